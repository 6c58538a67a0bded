"""The HTTP/1.1 connection of ``hefsearch serve``: uvicorn's h11 protocol with what uvicorn does
not have, so idle or slow clients cannot hold the server.

uvicorn gives a keep-alive timeout (between requests), a cap on the size of the request head
(``h11_max_incomplete_event_size``) and a graceful-shutdown timeout, which the server uses. It
has no timeout for the request head itself (a connection that sends nothing, or a byte now
and then, stays open for ever), and its ``limit_concurrency`` counts *connections*, so 256
silent connections turned every other request into a 503. This protocol adds:

- a **head timeout**: a request head must be complete within ``head_timeout_s`` of the
  connection's opening, or of the first byte of a later request on a kept-alive connection
  (quiet between requests is uvicorn's keep-alive timeout), else the connection is closed (no
  answer: nothing was asked);
- a **connection cap** that favours work: at ``max_connections`` a new connection closes the
  connection that has waited longest for a request head; only when every connection is busy
  answering is the new one closed.

The body's own deadline is the guard's (:class:`hefsearch.serve.http.Guard`), which reads it.
Verified against uvicorn 0.55's ``H11Protocol`` (``cycle``, ``connections``,
``on_response_complete``); the server selects it with ``uvicorn.Config(http=...)``.
"""

from __future__ import annotations

import json
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("hefsearch.serve")


def protocol_class(*, head_timeout_s: float, max_connections: int) -> type:
    """An :class:`H11Protocol` subclass with these limits (uvicorn builds one per connection)."""
    return type("HefsearchH11Protocol", (HardenedH11Protocol,),
                {"head_timeout_s": float(head_timeout_s), "max_connections": int(max_connections)})


class HardenedH11Protocol(H11Protocol):
    head_timeout_s: float = 10.0
    max_connections: int = 256

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self._waiting_since: float | None = None
        self._head_timer = None
        super().connection_made(transport)
        self._track()
        if len(self.connections) > self.max_connections:
            self._make_room()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._track(data_came=True)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._track()

    def connection_lost(self, exc) -> None:
        self._cancel_timer()
        self._waiting_since = None
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes that are not HTTP/1.1 (or a head over the size cap), in the
        server's one error shape instead of plain text."""
        body = json.dumps({"error": {"status": 400, "message": "The request is not valid HTTP/1.1, or its head is "
                                     "over 16 KiB.", "hint": "Send a well-formed request with shorter headers."}})
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"connection", b"close")]
        try:
            for event in (h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                          h11.Data(data=body.encode()), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event))
        except h11.LocalProtocolError:  # too early or too late in the exchange to answer
            pass
        self._close()

    # -- waiting for a request head ----------------------------------------------------------
    def _track(self, data_came: bool = False) -> None:
        """Note when the connection began to wait for a request (the cap closes the longest
        waiting), arm the head timer when a request is due (a new connection, or bytes of the
        next one), disarm it once a request head is complete."""
        if self.transport is None or self.transport.is_closing():
            return self._cancel_timer()
        waiting = self.cycle is None or self.cycle.response_complete
        if not waiting:
            self._waiting_since = None
            return self._cancel_timer()
        if self._waiting_since is None:
            self._waiting_since = self.loop.time()
        if self._head_timer is None and (data_came or self.cycle is None):
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_too_slow)

    def _cancel_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self._waiting_since is not None and not self.transport.is_closing():
            log.debug("closing a connection that sent no complete request in %.0f s", self.head_timeout_s)
            self._close()

    def _close(self) -> None:
        self._cancel_timer()
        self._waiting_since = None
        self.connections.discard(self)  # at once, so the cap counts it out
        self.transport.close()

    # -- the cap -----------------------------------------------------------------------------
    def _make_room(self) -> None:
        idle = [c for c in list(self.connections)
                if c is not self and getattr(c, "_waiting_since", None) is not None]
        if idle:
            min(idle, key=lambda c: c._waiting_since)._close()
        else:
            log.warning("%d connections are all being answered: a new one is closed", len(self.connections) - 1)
            self._close()

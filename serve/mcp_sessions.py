"""Room for every MCP client at ``/mcp``: the MCP SDK caps the open sessions and refuses a new
one at the cap until one expires (``--mcp-session-timeout``, 10 minutes), so one client that
opened 64 sessions and walked away locked every other client out for that long.

:class:`McpSessions` (pure ASGI, in front of the app, behind the guard) keeps the SDK's cap
and makes room as the connection cap does (:mod:`hefsearch.serve.protocol`): a request that
opens a session at the cap closes the session unused for longest (no request of it in
flight), with an ordinary MCP ``DELETE`` through the app, so the SDK ends it as if its client
had; that client's next request gets 404 and opens a new session, as after an expiry. Only
when every session has a request in flight is the new one refused: a JSON 503 with
``Retry-After``. Verified against the MCP SDK 2.3's ``StreamableHTTPSessionManager``.
"""

from __future__ import annotations

import time

#: seconds a client refused for want of a session is asked to wait
RETRY_AFTER_S = 5
SESSION_HEADER = b"mcp-session-id"
#: seconds a session idle past the timeout is still counted (the SDK's clock starts a little later)
EXPIRY_GRACE_S = 5.0


class McpSessions:
    """``app`` with the MCP sessions at ``/mcp`` capped at ``limit``, the idlest closed to make
    room; sessions idle for ``idle_s`` are forgotten (the SDK has closed them)."""

    def __init__(self, app, *, limit: int, idle_s: float, clock=time.monotonic):
        self.app = app
        self.limit = limit
        self.idle_s = idle_s
        self.clock = clock
        #: session id -> when a request of it last ended (or it opened)
        self._used: dict[str, float] = {}
        #: session id -> its requests in flight
        self._busy: dict[str, int] = {}
        self._opening = 0
        self._lock = None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path") != "/mcp":
            return await self.app(scope, receive, send)
        session = _header(scope, SESSION_HEADER)
        if session:
            return await self._in_session(session, scope, receive, send)
        if scope.get("method") != "POST":  # no session to open: the SDK answers
            return await self.app(scope, receive, send)
        return await self._open(scope, receive, send)

    async def _in_session(self, session: str, scope, receive, send):
        known = session in self._used
        if known:
            self._busy[session] = self._busy.get(session, 0) + 1
        status: list[int] = []

        async def watched(message):
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            return await self.app(scope, receive, watched)
        finally:
            if known:
                left = self._busy.pop(session, 1) - 1
                if left:
                    self._busy[session] = left
                self._used[session] = self.clock()
            ended = status and (status[0] == 404 or scope.get("method") == "DELETE" and status[0] < 300)
            if ended:
                self._forget(session)

    async def _open(self, scope, receive, send):
        import anyio

        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            self._expire()
            if len(self._used) + self._opening >= self.limit:
                idlest = min((s for s in self._used if not self._busy.get(s)), key=self._used.get, default=None)
                if idlest is None:
                    return await _busy(send, self.limit)
                self._forget(idlest)
                await self._close(idlest, scope)
            self._opening += 1

        async def watched(message):
            if message["type"] == "http.response.start" and message["status"] < 400:
                opened = dict(message.get("headers", ())).get(SESSION_HEADER)
                if opened:
                    self._used[opened.decode("latin-1")] = self.clock()
            await send(message)

        try:
            return await self.app(scope, receive, watched)
        finally:
            self._opening -= 1

    async def _close(self, session: str, scope) -> None:
        """End ``session`` with an MCP ``DELETE`` through the app (the SDK's own way to end one),
        addressed as the request that needs the room (its Host and Origin passed the checks)."""
        headers = [(k, v) for k, v in scope.get("headers", ()) if k in (b"host", b"origin", b"authorization")]
        delete = {**scope, "method": "DELETE", "query_string": b"",
                  "headers": [*headers, (SESSION_HEADER, session.encode("latin-1"))]}
        sent = False

        async def receive():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.disconnect"}

        async def discard(message):
            pass

        await self.app(delete, receive, discard)

    def _forget(self, session: str) -> None:
        self._used.pop(session, None)
        self._busy.pop(session, None)

    def _expire(self) -> None:
        """Forget sessions the SDK has closed for idleness (a little after it has: counting one
        too many only closes a closed session, one too few would let the SDK refuse)."""
        cutoff = self.clock() - self.idle_s - EXPIRY_GRACE_S
        for session in [s for s, t in self._used.items() if t < cutoff and not self._busy.get(s)]:
            self._forget(session)


def _header(scope, name: bytes) -> str:
    for k, v in scope.get("headers", ()):
        if k.lower() == name:
            return v.decode("latin-1")
    return ""


async def _busy(send, limit: int) -> None:
    from .http import refuse

    await refuse(send, 503, f"All {limit} MCP sessions are answering requests now.",
                 f"Retry in {RETRY_AFTER_S} s: a session with nothing in flight is closed to make room "
                 "(the server's --mcp-sessions).", [(b"retry-after", str(RETRY_AFTER_S).encode())])

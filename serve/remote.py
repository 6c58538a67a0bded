"""A running ``hefsearch serve`` as a service: :class:`RemoteService` answers the operations of
:data:`~.operations.OPERATIONS` (its methods are made from the table), as
:class:`~hefsearch.app.service.LibraryService` does, by the server's HTTP API, so ``hefsearch mcp`` on a laptop (or next to a server on the
Pi) answers from the server's warm process.
The standard library's HTTP client is enough for these few JSON calls."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

from hefsearch.app.service import ServiceError

from hefsearch.base.hosts import on_this_machine

from .operations import OPERATIONS, Operation

TIMEOUT_S = 30.0


class RemoteService:
    """``local``: the server is on this machine (a recorded one): never through a proxy. A
    loopback or wildcard address (127.0.0.0/8, ::1, localhost, 0.0.0.0, ::) never is either, so
    the token does not travel through ``http_proxy``."""

    def __init__(self, url: str, token: str | None = None, *, timeout_s: float = TIMEOUT_S, local: bool = False):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        host = urllib.parse.urlsplit(self.url).hostname or ""
        handlers = [urllib.request.ProxyHandler({})] if local or on_this_machine(host) else []
        self._opener = urllib.request.build_opener(*handlers)

    def _call(self, method: str, path: str, body: dict | None = None, params: dict | None = None) -> dict:
        query = urllib.parse.urlencode({k: v for k, v in (params or {}).items() if v is not None}, doseq=True)
        req = urllib.request.Request(self.url + path + (f"?{query}" if query else ""), method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"content-type": "application/json", "accept": "application/json",
                                              **({"authorization": f"Bearer {self.token}"} if self.token else {})})
        try:
            with self._opener.open(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            try:
                err = json.loads(e.read()).get("error") or {}
            except (ValueError, AttributeError):
                err = {}
            err = err if isinstance(err, dict) else {}
            raise ServiceError(err.get("message") or f"The server at {self.url} answered {e.code}.",
                               err.get("hint"), status=e.code) from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            raise ServiceError(f"Cannot reach the hefsearch server at {self.url} ({reason}).",
                               "Is 'hefsearch serve' running there? Check the address, the port and the token.",
                               status=503) from None


def _remote_method(op: Operation):
    """The client's method for ``op``: its request as the body's fields (``fields_of``), sent
    with the first of its HTTP methods (GET: in the query string)."""
    verb = op.methods[0]

    if op.body is None:
        def call(self) -> dict:
            return self._call(verb, op.path)
    else:
        def call(self, request) -> dict:
            fields = {k: str(v).lower() if isinstance(v, bool) else v for k, v in op.body.fields_of(request).items()}
            return self._call(verb, op.path, params=fields) if verb == "GET" else self._call(verb, op.path, fields)

    call.__name__ = call.__qualname__ = op.name
    call.__doc__ = op.summary
    return call


for _op in OPERATIONS:
    setattr(RemoteService, _op.name, _remote_method(_op))

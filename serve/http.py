"""The HTTP JSON API of ``hefsearch serve`` (FastAPI, so the OpenAPI schema is at
``/openapi.json``) and the MCP endpoint ``/mcp`` beside it, behind one guard.

Routes (every answer is JSON; errors are ``{"error": {"status", "message", "hint"}}``), made
from the table of operations (:data:`~.operations.OPERATIONS`) but for the reads by id and export:

- ``GET /search?query=...&k=&mode=&space=&path=&type=&lang=&since=&until=`` and ``POST /search``
  with the same fields as a JSON body: the JSON of ``hefsearch search --json``;
- ``GET /chunks/{id}``, ``GET /documents/{id}``, ``POST /get {"ids": [...]}``: text and location;
- ``GET /similar?id=CHUNK`` (or ``doc=ID``): chunks of other documents like it; ``GET /compare``
  (the search's fields, ``space=A&space=B``): the query in two spaces side by side (overlap@k, RBO);
- ``GET /status``, ``GET /health``; ``GET /export``: the library as one archive;
- ``GET /`` and ``/static/...``: the web page (:mod:`.web`), open without the token (no
  library data there); every answer carries the page's security headers.

The guard (:class:`Guard`, pure ASGI, in front of everything, ``/mcp`` included) refuses a
request without the right ``Authorization: Bearer`` token when the server has one (any bind
but loopback must), refuses a ``Host`` that is not loopback on a loopback bind without a token
(so a web page cannot reach the server through DNS rebinding), and refuses bodies over the
limit: by their Content-Length before anything is read, and by the bytes that actually
arrive (whatever the framing; both framings at once are refused), within a deadline; and
refuses an MCP request whose JSON-RPC id is still in flight in its session (409).
Every error, the framework's own included, is one JSON shape whose status says whose fault it
is (4xx: the request's, 5xx: the server's). Handlers are plain functions run in FastAPI's
thread pool; the service caps how many run or wait at once (503 beyond).
"""

from __future__ import annotations

import hmac
import json
import re
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated

from fastapi import Body, Query

from hefsearch.app.requests import GetRequest
from hefsearch.app.service import LibraryService, ServiceError, error_json
from hefsearch.base.errors import HefsearchError

from .operations import OPERATIONS, Operation, answer
from .schema import query_model
from .web import SecurityHeaders, add_web_routes, is_page


def _json_response(data: dict, status: int = 200):
    from fastapi.responses import JSONResponse

    return JSONResponse(data, status_code=status)


def _errors() -> dict:
    """The error answers every route documents in the OpenAPI schema."""
    from .schema import ErrorAnswer

    return {status: {"model": ErrorAnswer} for status in (400, 401, 404, 413, 503)}


@dataclass(frozen=True)
class McpMount:
    """The MCP server served at ``/mcp``: ``sessions`` may be open at once (beyond, the one
    unused for longest is closed to make room; 503 only while all are answering); one unused
    for ``idle_s`` is closed."""

    server: object
    sessions: int = 64
    idle_s: float = 600.0


def make_http_app(service: LibraryService, *, token: str | None = None, loopback: bool = True,
                  mcp: McpMount | None = None, host: str = "127.0.0.1", body_timeout_s: float = 15.0):
    """The ASGI app: the JSON API, ``/mcp`` when ``mcp`` is given, and the guard."""
    from fastapi import FastAPI

    from hefsearch.base.versions import hefsearch_version

    limits = service.limits
    mcp_server = None if mcp is None else mcp.server
    mcp_app = None if mcp is None else _mcp_app(mcp.server, limits, token=token, loopback=loopback,
                                                host=host, sessions=mcp.sessions, idle_s=mcp.idle_s)

    @asynccontextmanager
    async def lifespan(app):
        if mcp_server is None:
            yield
            return
        async with mcp_server.session_manager.run():
            yield

    app = FastAPI(title="hefsearch", version=hefsearch_version(), lifespan=lifespan, docs_url=None,
                  redoc_url=None,
                  description="Semantic search over your own documents (hefsearch serve). Every route "
                              "answers JSON; /mcp speaks the Model Context Protocol.")
    # no redirect to the slash-less route: its Location would be built from the request's Host
    app.router.redirect_slashes = False
    _add_error_handlers(app)
    _add_operation_routes(app, service)
    _add_read_routes(app, service)
    session = getattr(service, "session", None)  # a library this process holds: it can be exported
    if session is not None:
        _add_export_route(app, session.library.path)
    add_web_routes(app)
    served = app
    if mcp_app is not None:
        from .mcp_sessions import McpSessions

        app.router.routes.extend(mcp_app.routes)
        served = McpSessions(app, limit=mcp.sessions, idle_s=mcp.idle_s)  # the idlest makes room
    return SecurityHeaders(Guard(served, token=token, loopback=loopback and token is None,
                                 max_body=limits.max_body_bytes, body_timeout_s=body_timeout_s))


def _mcp_app(mcp_server, limits, *, token: str | None, loopback: bool, host: str, sessions: int, idle_s: float):
    """The MCP server's streamable HTTP app, mounted at ``/mcp``."""
    from mcp.server.transport_security import TransportSecuritySettings

    # a token (any bind but loopback) is the protection there; on loopback the SDK's own
    # Host/Origin check stays on as well, for every loopback address (127.0.0.2 too)
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if loopback and token is None:
        from .server import url_host

        names = ["127.0.0.1", "localhost", "[::1]"]
        bound = url_host(host)
        names += [bound] if bound not in names else []
        security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                             allowed_hosts=[f"{n}:*" for n in names],
                                             allowed_origins=[f"http://{n}:*" for n in names])
    return mcp_server.streamable_http_app(streamable_http_path="/mcp", host=host,
                                          transport_security=security,
                                          max_request_body_size=limits.max_body_bytes,
                                          max_sessions=sessions, session_idle_timeout=idle_s,
                                          json_response=True)


def _add_error_handlers(app) -> None:
    """Every error one JSON shape, ``{"error": {"status", "message", "hint"}}``: 4xx for what
    the request got wrong, 5xx for what the server did (logged with its traceback)."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    @app.exception_handler(HefsearchError)
    async def _refused(request, e: HefsearchError):  # the error's class decides its status
        return _json_response(error_json(e), e.http_status)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request, e: RequestValidationError):
        problems = "; ".join(_problem(err) for err in e.errors()[:5])
        return _json_response(ServiceError(f"Bad request: {problems}.",
                                           "See /openapi.json for the parameters.").to_dict(), 400)

    @app.exception_handler(HTTPException)
    async def _framework_error(request, e: HTTPException):
        status = e.status_code
        if status == 404:
            message, hint = f"No such route: {request.url.path[:200]}.", "See /openapi.json for the routes."
        elif status == 405:
            message, hint = f"{request.method} is not allowed on {request.url.path[:200]}.", "See /openapi.json."
        elif status == 400 and "parsing the body" in str(e.detail):
            message, hint = ("The request body is not JSON this server can read (not UTF-8, malformed, or "
                             "nested too deeply).", "Send a JSON object, e.g. {\"query\": \"...\"}.")
        else:
            message, hint = str(e.detail), None
        return _json_response(ServiceError(message, hint, status=status).to_dict(), status)

    @app.exception_handler(Exception)
    async def _server_error(request, e: Exception):  # the framework logs it with its traceback
        return _json_response(ServiceError("The server failed to answer this request (its log has the details).",
                                           "This is a fault of the server, not of the request: please report it.",
                                           status=500).to_dict(), 500)


def _problem(err: dict) -> str:
    where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
    # the input is not echoed: it may be huge, or text that does not encode (a lone surrogate)
    return f"{where}: {err.get('msg')}" if where else str(err.get("msg"))


def _add_operation_routes(app, service) -> None:
    """One route per method of each row of :data:`~.operations.OPERATIONS`: GET reads the
    body's fields as query parameters, POST as a JSON body (the same model)."""
    errors = _errors()
    for op in OPERATIONS:
        responses = {200: {"model": op.answer}, **errors} if op.answer is not None else errors
        for method in op.methods:
            app.add_api_route(op.path, _handler(service, op, method), methods=[method], responses=responses,
                              response_model=None, name=f"{op.name}_{method.lower()}")


def _handler(service, op: Operation, method: str):
    """The route function of ``op`` for ``method``; its signature tells FastAPI where the
    request's fields are (the query string for GET, the JSON body otherwise)."""
    import inspect

    def handler(**given):
        return _json_response(answer(service, op, given.get("fields")))

    params = []
    if op.body is not None:
        where = Annotated[query_model(op.body), Query()] if method == "GET" else Annotated[op.body, Body()]
        params.append(inspect.Parameter("fields", inspect.Parameter.KEYWORD_ONLY, annotation=where))
    handler.__signature__ = inspect.Signature(params)
    handler.__name__ = handler.__qualname__ = f"{op.name}_{method.lower()}"
    handler.__doc__ = op.summary
    return handler


def _add_read_routes(app, service) -> None:
    errors = _errors()

    @app.get("/chunks/{chunk_id}", responses=errors, response_model=None)
    def chunk(chunk_id: int):
        """One chunk: its text, document, page, line and character span."""
        return _json_response(service.get(GetRequest(ids=(chunk_id,)))["items"][0])

    @app.get("/documents/{doc_id}", responses=errors, response_model=None)
    def document(doc_id: int):
        """One document: path, kind, dates, languages, its chunks and its text."""
        return _json_response(service.get(GetRequest(ids=(f"doc:{doc_id}",)))["items"][0])


def _add_export_route(app, library_path) -> None:
    @app.get("/export", responses=_errors(), response_model=None)
    def export(space: Annotated[list[str], Query()] = [], vectors: bool = True):  # noqa: B006 (FastAPI's way)
        """The library as one archive (what 'hefsearch export' writes), taken while the server
        keeps serving and watching; ``space`` (repeatable) keeps only those spaces, ``vectors=false``
        none. Restore it with 'hefsearch import'."""
        from starlette.responses import StreamingResponse

        from hefsearch.app.archives import stream_export

        name, body = stream_export(library_path, space, vectors)
        return StreamingResponse(body, media_type="application/x-tar",
                                 headers={"Content-Disposition": f'attachment; filename="{name}"'})


class Guard:
    """Token, Host, framing and body checks in front of the whole app (see the module doc)."""

    def __init__(self, app, *, token: str | None, loopback: bool, max_body: int, body_timeout_s: float = 15.0):
        self.app = app
        self.token = token.encode() if token else None
        self.loopback = loopback
        self.max_body = max_body
        self.body_timeout_s = body_timeout_s
        #: (MCP session, JSON-RPC id) of the MCP requests being answered
        self._in_flight: set[tuple[str, str]] = set()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        head = _Head.of(scope)
        # the token first: nothing of a request without it is read beyond its head
        refusal = self._caller_refusal(scope, head) or self._size_refusal(head)
        if refusal is not None:
            return await refuse(send, *refusal, close=True)
        if head.chunked is None and not head.length:
            return await self.app(scope, receive, send)
        body = await self._read_body(receive, send)
        if body is None:
            return
        receive = _replay(body, receive)
        key = _rpc_request(scope, head.first("mcp-session-id"), body)
        if key is not None:
            return await self._once(key, scope, receive, send)
        return await self.app(scope, receive, send)

    def _caller_refusal(self, scope, head: "_Head") -> tuple | None:
        """Who may ask: the token when the server has one (the page asks for it itself), else
        on loopback a Host that is loopback; the refusal's (status, message, hint, headers)."""
        if self.token is not None and not is_page(scope):
            scheme, _, value = head.first("authorization").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token):
                return (401, "A token is needed: send 'Authorization: Bearer TOKEN'.",
                        "The token was printed when the server first started and is in its token file "
                        "(hefsearch serve --help: --token-file).", [(b"www-authenticate", b'Bearer realm="hefsearch"')])
        elif self.loopback and not _loopback_name(_host_name(head.first("host"))):
            return (403, "This server listens on loopback only and answers requests addressed to a loopback "
                         "address (127.0.0.1, ::1) or localhost.",
                    "To search from another machine, start it with --host ADDRESS (a token is then required).")
        return None

    def _size_refusal(self, head: "_Head") -> tuple | None:
        """One unambiguous size within the limit, as the head says it; the refusal's (status,
        message, hint)."""
        lengths = head.headers.get("content-length")
        if head.chunked is not None and lengths is not None or lengths is not None and len(set(lengths)) > 1:
            return (400, "The request has both a Content-Length and a Transfer-Encoding (or two "
                         "Content-Lengths): its size is ambiguous, so it is refused.", "Send one of them.")
        length = head.length_text
        if length is not None and (not (length.isascii() and length.isdigit()) or int(length) > self.max_body):
            return (413, f"The request body is over {self.max_body:,} bytes.")
        return None

    async def _once(self, key: tuple, scope, receive, send):
        """One MCP request per JSON-RPC id and session at a time: the SDK keys its answers by id,
        so a second request with an id still in flight took the first one's answer stream and
        left one of them unanswered for ever."""
        if key in self._in_flight:
            return await refuse(send, 409, "A request with this JSON-RPC id is still being answered in this "
                                            "MCP session.", "Give every request of a session its own id.")
        self._in_flight.add(key)
        try:
            return await self.app(scope, receive, send)
        finally:
            self._in_flight.discard(key)

    async def _read_body(self, receive, send) -> bytes | None:
        """The whole body, counted as it arrives (whatever the framing said): None once refused
        (over ``max_body`` bytes: 413; not all there within ``body_timeout_s``: 408) or when
        the client left."""
        import anyio

        parts, seen = [], 0
        with anyio.move_on_after(self.body_timeout_s) as deadline:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return None
                part = message.get("body", b"")
                seen += len(part)
                if seen > self.max_body:
                    await refuse(send, 413, f"The request body is over {self.max_body:,} bytes.", close=True)
                    return None
                parts.append(part)
                if not message.get("more_body", False):
                    return b"".join(parts)
        if deadline.cancelled_caught:
            await refuse(send, 408, f"The request body did not arrive within {self.body_timeout_s:g} s.",
                          "Send the whole body at once (the server's --body-timeout).", close=True)
        return None


@dataclass(frozen=True)
class _Head:
    """A request's headers (lower-case name -> values) and what its framing says."""

    headers: dict

    @classmethod
    def of(cls, scope) -> "_Head":
        headers: dict[str, list[str]] = {}
        for k, v in scope.get("headers", ()):
            headers.setdefault(k.decode("latin-1").lower(), []).append(v.decode("latin-1"))
        return cls(headers)

    def first(self, name: str) -> str:
        return (self.headers.get(name) or [""])[0]

    @property
    def chunked(self) -> list | None:
        return self.headers.get("transfer-encoding")

    @property
    def length_text(self) -> str | None:
        lengths = self.headers.get("content-length")
        return lengths[0].strip() if lengths else None

    @property
    def length(self) -> int:
        """The Content-Length (checked by the guard before this is read); 0 when none."""
        return int(self.length_text) if self.length_text else 0


def _rpc_request(scope, session: str, body: bytes) -> tuple[str, str] | None:
    """(session, id) of a JSON-RPC request POSTed to /mcp within a session; None otherwise
    (notifications, answers, batches, the initialize without a session, anything unreadable)."""
    if scope.get("method") != "POST" or scope.get("path") != "/mcp" or not session:
        return None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" not in message or message.get("id") is None:
        return None
    return session, json.dumps(message["id"])


def _replay(body: bytes, receive):
    """``receive`` for the app: the body read by the guard, then the client's own messages
    (the disconnect a streaming answer waits for)."""
    given = False

    async def wrapped():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return wrapped


def _loopback_name(host: str) -> bool:
    from hefsearch.base.hosts import is_loopback

    return bool(host) and is_loopback(host)


#: a Host header as RFC 9110 has it: a name or IPv4 address, or an IPv6 address in brackets,
#: then an optional port; nothing else (no userinfo, path or second host: "127.0.0.1:80@evil")
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::[0-9]{0,5})?")


def _host_name(host: str) -> str:
    """The host of a ``Host`` header without its port; '' when the header is not a plain
    host[:port] (then it is not loopback either)."""
    m = _HOST.fullmatch(host.strip().lower())
    return m.group(1) if m else ""


async def refuse(send, status: int, message: str, hint: str | None = None, extra: list | None = None,
                  close: bool = False) -> None:
    """An error answer from the guard; ``close``: the connection ends after it (a body may be
    unread, so the next bytes cannot be trusted to start a request)."""
    body = json.dumps(ServiceError(message, hint, status=status).to_dict()).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(extra or []), *([(b"connection", b"close")] if close else [])]})
    await send({"type": "http.response.body", "body": body})

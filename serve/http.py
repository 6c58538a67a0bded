"""The HTTP JSON API of ``hefsearch serve`` (FastAPI, so the OpenAPI schema is at
``/openapi.json``) and the MCP endpoint ``/mcp`` beside it, behind one guard.

Routes (every answer is JSON; errors are ``{"error": {"status", "message", "hint"}}``):

- ``GET /search?query=...&k=&mode=&space=&path=&type=&lang=&since=&until=`` and ``POST /search``
  with the same fields as a JSON body: the JSON of ``hefsearch search --json``;
- ``GET /chunks/{id}``, ``GET /documents/{id}``, ``POST /get {"ids": [...]}``: text and location;
- ``GET /similar?id=CHUNK`` (or ``doc=ID``): chunks of other documents like it;
- ``GET /compare?query=...&k=&mode=&space=A&space=B&...filters``: the query in the NPU (or
  8-bit) space and in FP32 side by side, with overlap@k and RBO (the TUI's compare view);
- ``GET /status``, ``GET /health``;
- ``GET /`` and ``/static/...``: the web page (:mod:`.web`), the only routes open without the
  token (they hold no library data); every answer carries the page's security headers.

The guard (:class:`Guard`, pure ASGI, in front of everything, ``/mcp`` included) refuses a
request without the right ``Authorization: Bearer`` token when the server has one (any bind
but loopback must), refuses a ``Host`` that is not loopback on a loopback bind without a token
(so a web page cannot reach the server through DNS rebinding), and refuses bodies over the
limit before they are read. Handlers are plain functions: FastAPI runs them in its thread
pool, and the service caps how many run or wait at once (503 beyond).
"""

from __future__ import annotations

import hmac
import json
from contextlib import asynccontextmanager
from typing import Optional

from hefsearch.app.service import LibraryService, ServiceError

from .schema import GetBody, SearchAnswer, SearchBody
from .web import SecurityHeaders, add_web_routes, is_page

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def _json_response(data: dict, status: int = 200):
    from fastapi.responses import JSONResponse

    return JSONResponse(data, status_code=status)


def _errors() -> dict:
    """The error answers every route documents in the OpenAPI schema."""
    from .schema import ErrorAnswer

    return {status: {"model": ErrorAnswer} for status in (400, 401, 404, 413, 503)}


def make_http_app(service: LibraryService, *, token: str | None = None, loopback: bool = True,
                  mcp_server=None, host: str = "127.0.0.1"):
    """The ASGI app: the JSON API, ``/mcp`` when ``mcp_server`` is given, and the guard."""
    from fastapi import FastAPI

    from hefsearch.embed.versions import hefsearch_version

    limits = service.limits
    mcp_app = None if mcp_server is None else _mcp_app(mcp_server, limits, token=token, loopback=loopback,
                                                       host=host)

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
    _add_error_handlers(app)
    _add_search_routes(app, service)
    _add_read_routes(app, service)
    _add_compare_route(app, service)
    add_web_routes(app)
    if mcp_app is not None:
        app.router.routes.extend(mcp_app.routes)
    return SecurityHeaders(Guard(app, token=token, loopback=loopback and token is None,
                                 max_body=limits.max_body_bytes))


def _mcp_app(mcp_server, limits, *, token: str | None, loopback: bool, host: str):
    """The MCP server's streamable HTTP app, mounted at ``/mcp``."""
    from mcp.server.transport_security import TransportSecuritySettings

    # a token (any bind but loopback) is the protection there; on loopback the SDK's
    # own Host/Origin check stays on as well
    security = None if loopback and token is None else TransportSecuritySettings(
        enable_dns_rebinding_protection=False)
    return mcp_server.streamable_http_app(streamable_http_path="/mcp", host=host,
                                          transport_security=security,
                                          max_request_body_size=limits.max_body_bytes,
                                          json_response=True)


def _add_error_handlers(app) -> None:
    from fastapi.exceptions import RequestValidationError

    @app.exception_handler(ServiceError)
    async def _service_error(request, e: ServiceError):
        return _json_response(e.to_dict(), e.status)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request, e: RequestValidationError):
        problems = "; ".join(f"{'.'.join(str(p) for p in err.get('loc', ()) if p != 'body')}: {err.get('msg')}"
                             for err in e.errors()[:5])
        return _json_response(ServiceError(f"Bad request: {problems}.",
                                           "See /openapi.json for the parameters.").to_dict(), 400)


def _add_search_routes(app, service: LibraryService) -> None:
    from fastapi import Body, Query

    errors = _errors()

    def do_search(b: SearchBody) -> dict:
        return service.search(b.query, k=b.k, mode=b.mode, space=b.space, path=b.path, type=b.type,
                              lang=b.lang, since=b.since, until=b.until, snippets=b.snippets)

    @app.get("/search", responses={200: {"model": SearchAnswer}, **errors}, response_model=None)
    def search_get(query: str = Query(...), k: int = 10, mode: str = "hybrid",
                   space: Optional[str] = None, path: Optional[str] = None,
                   type: Optional[list[str]] = Query(None), lang: Optional[list[str]] = Query(None),
                   since: Optional[str] = None, until: Optional[str] = None, snippets: str = "meaning"):
        """Search: the same JSON as ``hefsearch search --json``."""
        return _json_response(do_search(SearchBody(query=query, k=k, mode=mode, space=space, path=path,
                                                   type=type, lang=lang, since=since, until=until,
                                                   snippets=snippets)))

    @app.post("/search", responses={200: {"model": SearchAnswer}, **errors}, response_model=None)
    def search_post(body: SearchBody = Body(...)):
        """Search with a JSON body (same fields as the GET parameters)."""
        return _json_response(do_search(body))


def _add_read_routes(app, service: LibraryService) -> None:
    from fastapi import Body, Query

    errors = _errors()

    @app.get("/chunks/{chunk_id}", responses=errors, response_model=None)
    def chunk(chunk_id: int):
        """One chunk: its text, document, page, line and character span."""
        return _json_response(service.get([chunk_id])["items"][0])

    @app.get("/documents/{doc_id}", responses=errors, response_model=None)
    def document(doc_id: int):
        """One document: path, kind, dates, languages, its chunks and its text."""
        return _json_response(service.get([f"doc:{doc_id}"])["items"][0])

    @app.post("/get", responses=errors, response_model=None)
    def get(body: GetBody = Body(...)):
        """Several chunks and documents at once."""
        return _json_response(service.get(body.ids))

    @app.get("/similar", responses={200: {"model": SearchAnswer}, **errors}, response_model=None)
    def similar(id: Optional[int] = None, doc: Optional[int] = None, k: int = 10, space: Optional[str] = None,
                path: Optional[str] = None, type: Optional[list[str]] = Query(None),
                lang: Optional[list[str]] = Query(None), since: Optional[str] = None, until: Optional[str] = None):
        """Chunks of other documents most like chunk ``id`` (or document ``doc``)."""
        return _json_response(service.similar(id, doc_id=doc, k=k, space=space, path=path, type=type, lang=lang,
                                              since=since, until=until))

    @app.get("/status", responses=errors, response_model=None)
    def status():
        """What the library holds and how fresh it is."""
        return _json_response(service.status())

    @app.get("/health", responses=errors, response_model=None)
    def health():
        """Liveness, the default space and the library's freshness."""
        return _json_response(service.health())


def _add_compare_route(app, service: LibraryService) -> None:
    from fastapi import Query

    @app.get("/compare", responses=_errors(), response_model=None)
    def compare(query: str = Query(...), k: int = 10, mode: str = "vector",
                space: Optional[list[str]] = Query(None), path: Optional[str] = None,
                type: Optional[list[str]] = Query(None), lang: Optional[list[str]] = Query(None),
                since: Optional[str] = None, until: Optional[str] = None, rerank: bool = False):
        """The query in two vector spaces side by side (default: the NPU or 8-bit space and
        FP32): each side's hits, overlap@k, RBO and the chunks only one side found."""
        return _json_response(service.compare(query, k=k, mode=mode, spaces=space, path=path, type=type,
                                              lang=lang, since=since, until=until, rerank=rerank))


class Guard:
    """Token, Host and body-size checks in front of the whole app (see the module doc)."""

    def __init__(self, app, *, token: str | None, loopback: bool, max_body: int):
        self.app = app
        self.token = token.encode() if token else None
        self.loopback = loopback
        self.max_body = max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        if self.token is not None and not is_page(scope):  # the page asks for the token itself
            given = headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token):
                return await _refuse(send, 401, "A token is needed: send 'Authorization: Bearer TOKEN'.",
                                     "The token was printed when the server first started and is in its "
                                     "token file (hefsearch serve --help: --token-file).",
                                     [(b"www-authenticate", b'Bearer realm="hefsearch"')])
        elif self.loopback and _host_name(headers.get("host", "")) not in LOOPBACK_HOSTS:
            return await _refuse(send, 403, "This server listens on loopback only and answers requests "
                                            "addressed to 127.0.0.1 or localhost.",
                                 "To search from another machine, start it with --host ADDRESS (a token "
                                 "is then required).")
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            return await _refuse(send, 413, f"The request body is over {self.max_body:,} bytes.")
        if length is None and headers.get("transfer-encoding"):
            receive = _capped(receive, self.max_body)
        return await self.app(scope, receive, send)


def _capped(receive, limit: int):
    seen = 0

    async def wrapped():
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                return {"type": "http.disconnect"}
        return message

    return wrapped


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


async def _refuse(send, status: int, message: str, hint: str | None = None, extra: list | None = None) -> None:
    body = json.dumps(ServiceError(message, hint, status=status).to_dict()).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(extra or [])]})
    await send({"type": "http.response.body", "body": body})

"""The web page of ``hefsearch serve``: ``/`` and its static files (``serve/static``: plain HTML,
CSS and ES modules, no build step), and the security headers every answer of the server carries.

The page is one more front end on the JSON API (``/search``, ``/compare``, ``/similar``,
``/chunks``, ``/documents``, ``/status``): it holds no library data itself, so ``/`` and
``/static/*`` are the only routes the guard lets through without the token (the page then asks
for it, keeps it in the tab's ``sessionStorage`` and sends it as ``Authorization: Bearer``).
On a loopback bind the guard's Host check holds for them as for the API.

:class:`SecurityHeaders` wraps the whole app (the guard's refusals included): a strict
Content-Security-Policy (scripts and styles from this server only, nothing inline, no frames),
``nosniff``, no referrer, frame denial; and it refuses an API request whose ``Origin`` is not
the server's own (another site's page in the same browser), except ``/mcp``, where the MCP SDK
checks origins itself. The page's own files pass (they hold no data; Chromium sends ``Origin``
with module scripts, and a proxy that rewrites ``Host`` would otherwise break the page).
"""

import functools
import hashlib
from pathlib import Path

from hefsearch.app.service import ServiceError

STATIC = Path(__file__).parent / "static"
PAGE = "index.html"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
                 ".txt": "text/plain; charset=utf-8"}

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
_NAMES = {name for name, _ in SECURITY_HEADERS}


def is_page(scope) -> bool:
    """The page and its static files (GET/HEAD): open without the token, since they hold no data."""
    path = scope.get("path", "")
    return scope.get("method") in ("GET", "HEAD") and (path == "/" or path.startswith("/static/"))


@functools.lru_cache(maxsize=None)
def _asset(name: str) -> tuple[bytes, str, str] | None:
    """(bytes, content type, ETag) of a file shipped in ``static/``, read once; None for any
    other name (no subfolders, no dot files: the name is looked up, never joined to a path)."""
    shipped = {p.name: p for p in STATIC.iterdir() if p.is_file() and not p.name.startswith(".")}
    path = shipped.get(name)
    if path is None or path.suffix not in CONTENT_TYPES:
        return None
    data = path.read_bytes()
    return data, CONTENT_TYPES[path.suffix], '"' + hashlib.sha256(data).hexdigest()[:16] + '"'


def add_web_routes(app) -> None:
    from fastapi import Request
    from fastapi.responses import Response

    def answer(name: str, request: Request):
        asset = _asset(name)
        if asset is None:
            raise ServiceError(f"The page has no file {name[:80]!r}.", status=404)
        data, ctype, etag = asset
        # revalidate every time (a Pi answers 304 in a millisecond) so an upgrade shows at once
        headers = {"etag": etag, "cache-control": "no-cache"}
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        return Response(b"" if request.method == "HEAD" else data, media_type=ctype, headers=headers)

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    def page(request: Request):
        """The web page (the search lives in its URL: /?q=...&mode=...&type=...)."""
        return answer(PAGE, request)

    @app.api_route("/static/{name}", methods=["GET", "HEAD"], include_in_schema=False)
    def static(name: str, request: Request):
        return answer(name, request)


class SecurityHeaders:
    """Security headers on every answer, and foreign origins refused (see the module doc)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        origin = headers.get("origin")
        if origin is not None and not scope.get("path", "").startswith("/mcp") and not is_page(scope) \
                and _origin_host(origin) != headers.get("host", "").strip().lower():
            return await _refuse(send, "A page of another site may not use this server.",
                                 "Open the page this server serves at / instead.")

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", ()) if k.lower() not in _NAMES]
                message = {**message, "headers": kept + SECURITY_HEADERS}
            await send(message)

        return await self.app(scope, receive, send_with_headers)


def _origin_host(origin: str) -> str | None:
    """'http://127.0.0.1:8765' -> '127.0.0.1:8765'; None for 'null' or anything unreadable."""
    scheme, sep, rest = origin.strip().lower().partition("://")
    return rest.rstrip("/") if sep and scheme in ("http", "https") and rest else None


async def _refuse(send, message: str, hint: str) -> None:
    from .http import refuse  # http imports this module

    await refuse(send, 403, message, hint, extra=SECURITY_HEADERS)

"""A running ``hefsearch serve`` as a service: :class:`RemoteService` satisfies
:class:`~hefsearch.app.api.LibraryAPI`, as :class:`~hefsearch.app.service.LibraryService` does,
and calls the server's HTTP API, so ``hefsearch mcp`` on a laptop (or next to a server on the
Pi) answers from the server's warm process.
The standard library's HTTP client is enough for these few JSON calls."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

from hefsearch.app.requests import CompareRequest, GetRequest, SimilarRequest
from hefsearch.app.service import ServiceError
from hefsearch.search.request import SearchRequest

from .hosts import on_this_machine
from .schema import CompareBody, GetBody, SearchBody, SimilarBody

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

    def search(self, request: SearchRequest) -> dict:
        return self._call("POST", "/search", SearchBody.fields_of(request))

    def similar(self, request: SimilarRequest) -> dict:
        return self._call("GET", "/similar", params=SimilarBody.fields_of(request))

    def get(self, request: GetRequest) -> dict:
        return self._call("POST", "/get", GetBody.fields_of(request))

    def compare(self, request: CompareRequest) -> dict:
        return self._call("GET", "/compare", params=CompareBody.fields_of(request))

    def status(self) -> dict:
        return self._call("GET", "/status")

    def health(self) -> dict:
        return self._call("GET", "/health")

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
from hefsearch.search.filters import Filters
from hefsearch.search.request import SearchRequest

from hefsearch.base.hosts import on_this_machine

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

    def search(self, request: SearchRequest, snippets: str = "meaning") -> dict:
        return self._call("POST", "/search", _given({
            "query": request.query, "k": request.k, "mode": request.mode, "space": request.space,
            "snippets": snippets, "rerank": request.rerank_depth, **filter_fields(request.filters)}))

    def similar(self, request: SimilarRequest) -> dict:
        return self._call("GET", "/similar", params={"id": request.chunk_id, "doc": request.doc_id, "k": request.k,
                                                      "space": request.space, **filter_fields(request.filters)})

    def get(self, request: GetRequest) -> dict:
        return self._call("POST", "/get", {"ids": list(request.ids)})

    def compare(self, request: CompareRequest) -> dict:
        search = request.search
        return self._call("GET", "/compare", params={
            "query": search.query, "k": search.k, "mode": search.mode, "space": list(request.spaces or ()) or None,
            "rerank": "true" if request.rerank else None, **filter_fields(search.filters)})

    def status(self) -> dict:
        return self._call("GET", "/status")

    def health(self) -> dict:
        return self._call("GET", "/health")


def filter_fields(filters: Filters) -> dict:
    """``filters`` as the request fields the server reads back into the same filters (a kind is
    a type too; dates in ISO 8601)."""
    given = filters.to_dict()
    types = [*given.get("types", ()), *given.get("kinds", ())]
    return {"path": given.get("path_glob"), "type": types or None, "lang": given.get("langs"),
            "since": given.get("since"), "until": given.get("until")}


def _given(fields: dict) -> dict:
    return {k: v for k, v in fields.items() if v is not None}

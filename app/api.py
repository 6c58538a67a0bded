"""The operations a front end asks of a library, as one :class:`LibraryAPI` protocol. Two
classes satisfy it: :class:`~hefsearch.app.service.LibraryService` (this process holds the
library) and :class:`~hefsearch.serve.remote.RemoteService` (a running ``hefsearch serve``
answers), so the MCP tools (``hefsearch mcp``) work over either. Each takes its request
(:mod:`hefsearch.app.requests`, :class:`~hefsearch.search.request.SearchRequest`) and answers
the JSON every front end gives; a refused request raises a
:class:`~hefsearch.base.errors.HefsearchError` whose ``http_status`` says why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.search.request import SearchRequest

    from .requests import CompareRequest, GetRequest, SimilarRequest


@runtime_checkable
class LibraryAPI(Protocol):
    def search(self, request: "SearchRequest") -> dict:
        """Hits for the request (``search --json``)."""
        ...

    def similar(self, request: "SimilarRequest") -> dict:
        """Chunks of other documents like a chunk or a document (``similar --json``)."""
        ...

    def get(self, request: "GetRequest") -> dict:
        """Text and location of chunks and documents by id."""
        ...

    def compare(self, request: "CompareRequest") -> dict:
        """One query in two vector spaces side by side."""
        ...

    def status(self) -> dict:
        """What the library holds and how fresh it is (``status --json`` and more)."""
        ...

    def health(self) -> dict:
        """Liveness, the default space and the library's freshness."""
        ...

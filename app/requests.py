"""Requests of the application's operations other than a search (whose request is
:class:`~hefsearch.search.request.SearchRequest`): what a front end fills in and
:class:`~hefsearch.app.service.LibraryService` (or a remote server) answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hefsearch.search.filters import Filters
from hefsearch.search.request import SearchRequest


@dataclass(frozen=True)
class SimilarRequest:
    """"More like this": chunks of other documents nearest to a chunk or a whole document."""

    chunk_id: int | None = None
    doc_id: int | None = None
    k: int = 10
    space: str | None = None
    filters: Filters = field(default_factory=Filters)


@dataclass(frozen=True)
class GetRequest:
    """Chunks (``123``) and documents (``"doc:45"``) by id, in the order asked."""

    ids: tuple[Any, ...] = ()


@dataclass(frozen=True)
class CompareRequest:
    """One query in two vector spaces side by side (the TUI's compare view, ``/compare``)."""

    search: SearchRequest
    #: the two spaces (None: the library's NPU or 8-bit space and FP32)
    spaces: tuple[str, str] | None = None
    #: let the NPU side be re-ranked with FP32 vectors (default: its own ranking, what 8 bits cost)
    rerank: bool = False

"""Messages the app's thread workers post back to the UI thread (dataclasses, as in posting
and harlequin). Widgets never call the library themselves: they post a request message, the
app runs the work in a thread worker, and one of these comes back.

The fields are the search and index APIs' own types, imported for type checking only: importing
the app loads no index code (FAISS, extractors) before a worker needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from textual.message import Message

from hefsearch.app.requests import CompareRequest, SimilarRequest
from hefsearch.search.request import SearchRequest

if TYPE_CHECKING:
    from hefsearch.index.library import ChunkRecord, LibraryStatus
    from hefsearch.index.sync import ProgressEvent, SyncReport
    from hefsearch.search import Comparison, Hit, SearchResult


@dataclass
class SearchRequested(Message):
    """The search bar asks for a search (Enter, or typing when search-as-you-type is on)."""

    request: SearchRequest


@dataclass
class BlankQuerySubmitted(Message):
    """Enter on a query with nothing to search: the app says why instead of searching."""


@dataclass
class SearchFinished(Message):
    """A search (or "similar") answered; ``seq``: the app's number of the request, so an answer
    to an older one is dropped."""

    seq: int
    request: SearchRequest | SimilarRequest
    result: SearchResult


@dataclass
class CompareFinished(Message):
    seq: int
    request: CompareRequest
    comparison: Comparison


@dataclass
class SearchFailed(Message):
    seq: int
    error: BaseException


@dataclass
class HitChosen(Message):
    """The highlighted result changed: the preview should show it."""

    hit: Hit


@dataclass
class PreviewLoaded(Message):
    hit: Hit
    #: the hit's chunk and its neighbours, in document order
    records: list[ChunkRecord] = field(default_factory=list)


@dataclass
class StatusLoaded(Message):
    status: LibraryStatus
    #: how fresh the library is (hefsearch.app.freshness.Freshness), when known
    freshness: object = None


@dataclass
class SyncProgressed(Message):
    event: ProgressEvent

    def can_replace(self, message: Message) -> bool:
        # a burst of progress events collapses to the newest one
        return isinstance(message, SyncProgressed)


@dataclass
class SyncFinished(Message):
    report: SyncReport


@dataclass
class SyncFailed(Message):
    error: BaseException


@dataclass
class SnippetsLoaded(Message):
    """Semantic snippets (chunk id -> snippet) for hits of ``result``, computed after it was shown."""

    result: SearchResult
    snippets: dict[int, str]


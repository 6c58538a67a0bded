"""Messages the app's thread workers post back to the UI thread (dataclasses, as in posting
and harlequin). Widgets never call the library themselves: they post a request message, the
app runs the work in a thread worker, and one of these comes back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from .present import SearchRequest


@dataclass
class SearchRequested(Message):
    """The search bar asks for a search (Enter, or typing when search-as-you-type is on)."""

    request: SearchRequest


@dataclass
class SearchFinished(Message):
    request: SearchRequest
    result: Any  # hefsearch.search.SearchResult


@dataclass
class CompareFinished(Message):
    request: SearchRequest
    comparison: Any  # hefsearch.search.Comparison
    spaces: tuple[str, str]


@dataclass
class SearchFailed(Message):
    request: SearchRequest
    error: BaseException


@dataclass
class HitChosen(Message):
    """The highlighted result changed: the preview should show it."""

    hit: Any  # hefsearch.search.Hit


@dataclass
class PreviewLoaded(Message):
    hit: Any
    records: list = field(default_factory=list)  # ChunkRecords around the hit, in order


@dataclass
class StatusLoaded(Message):
    status: Any  # hefsearch.index.LibraryStatus


@dataclass
class SyncProgressed(Message):
    done: int | None
    total: int | None
    text: str

    def can_replace(self, message: Message) -> bool:
        # a burst of progress events collapses to the newest one
        return isinstance(message, SyncProgressed)


@dataclass
class SyncFinished(Message):
    report: Any  # hefsearch.index.sync.SyncReport


@dataclass
class SyncFailed(Message):
    error: BaseException

"""One query as a user asked it (:class:`SearchRequest`), and the working state of its search
(:class:`SearchRun`) that the stages of :meth:`~hefsearch.search.searcher.Searcher.search` fill in turn."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hefsearch.base.errors import HefsearchError

from .filters import Filters

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder

    from .grouping import Group


#: the search modes, default first (the CLI and the TUI offer these)
MODES = ("hybrid", "vector", "keyword")
#: how hit snippets are chosen: by meaning after the search (CPU FP32, within a budget), or
#: from the query's words only (``--quick-snippets``)
SNIPPETS = ("meaning", "quick")


class BadRequest(HefsearchError):
    """A request that cannot be a search (an unknown mode, k not a whole number from 1)."""

    title = "bad request"


@dataclass(frozen=True)
class SearchRequest:
    """One query as a user asked it, from any front end; :meth:`Searcher.search
    <hefsearch.search.searcher.Searcher.search>` answers it. Its mode, k and snippets are checked
    when it is made (:class:`BadRequest`); an empty query is a front end's to refuse
    (``app.searching.check_query``): the search answers it with a notice."""

    query: str
    mode: str = "hybrid"
    k: int = 10
    #: path glob, kinds, file types, languages, dates: every filter, once
    filters: Filters = field(default_factory=Filters)
    #: the vector space searched (None: the library's default)
    space: str | None = None
    #: every chunk as ranked, not one hit per file
    all_chunks: bool = False
    #: FP32 re-rank depth of a search (None: the default for the space searched, 0: off)
    rerank_depth: int | None = None
    #: when the accelerator fails, answer from the FP32 space (a comparison must not)
    fallback: bool = True
    #: :data:`SNIPPETS`: "meaning" fills them after the search (``hefsearch search``, the
    #: server); "quick" leaves them to the caller (the TUI asks per hit shown)
    snippets: str = "quick"
    #: ms that meaning-based snippets may take (None: all hits); the rest keep the quick one
    snippet_budget_ms: float | None = None

    def __post_init__(self):
        if self.mode not in MODES:
            raise BadRequest(f"Unknown mode {self.mode!r}.", f"Choose one of: {', '.join(MODES)}.")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise BadRequest(f"k must be a whole number from 1, not {self.k!r}.")
        if self.snippets not in SNIPPETS:
            raise BadRequest(f"Unknown snippets {self.snippets!r}.", f"Choose one of: {', '.join(SNIPPETS)}.")


@dataclass
class SearchRun:
    """What one search has found so far: each stage reads the earlier stages' fields and sets
    its own (timings in ms per stage)."""

    request: SearchRequest
    query: str
    filters: Filters
    k: int
    #: candidates each retriever returns (enough for k documents after grouping)
    depth: int
    #: re-rank depth (None: the default for the space searched, 0: off)
    rerank: int | None = None
    #: the depth the caller asked for (None: the default)
    asked_rerank: int | None = None
    #: what re-ranking did (RerankInfo as a dict), for the answer
    rerank_info: dict | None = None
    #: the searched space's post-transform as its fingerprint describes it (language move, hub
    #: correction), or None
    space_transform: dict | None = None
    #: how the library's chunks are cut (``index/passages.py``: ``passages_described``), or None
    passages: dict | None = None
    fallback: bool = True
    started: float = field(default_factory=time.perf_counter)
    timings: dict[str, float] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    notice: str | None = None
    label: str | None = None
    space: str | None = None
    encoder: "Encoder | None" = None
    query_vec: Any = None
    vec_ids: list[int] = field(default_factory=list)
    vec_scores: dict[int, float] = field(default_factory=dict)
    #: keyword hits: (chunk id, BM25, snippet)
    kw: list[tuple[int, float, str]] = field(default_factory=list)
    #: (chunk id, score, {retriever: rank}), best first
    ranked: list[tuple[int, float, dict]] = field(default_factory=list)
    records: dict = field(default_factory=dict)
    groups: "dict[int, Group]" = field(default_factory=dict)
    snippets: dict[int, str] = field(default_factory=dict)
    pending: set[int] = field(default_factory=set)

    @property
    def mode(self) -> str:
        return self.request.mode

"""Answering queries: vector, keyword and hybrid search over a library.

- **vector**: the query is encoded by the encoder of the space searched (never another one),
  then FAISS finds the nearest chunks: a German document for a Korean query.
- **keyword**: FTS5 BM25 over chunk text (:mod:`hefsearch.search.keyword`): chunks with every
  query word first, then chunks with some of them.
- **hybrid** (default): reciprocal rank fusion of the vector ranking with *strong* keyword
  evidence only: chunks with every query word, or, when none has them all, every *code* of the
  query ("XR-3000", "E-52"), spelled alike in every language
  (:func:`~hefsearch.search.keyword.code_terms`, :func:`~hefsearch.search.keyword.rare_terms`).
  Why not weak matches: docs/decisions.md, ``bench/hybrid.py``.

Device fallback: when encoding the query for a space fails (``DeviceError``, or its backend is
unavailable) and the library has a ``cpu-fp32`` space, that space answers with the CPU encoder
and ``SearchResult.notice`` says so; an FP32 query never runs against NPU vectors.

The query is cleaned first (:func:`prepare_query`); one with nothing left, or a keyword query
without a word, answers no hits and a notice saying why. An unknown ``space`` is an error naming
the library's spaces. A search never embeds snippet sentences: snippets come from the query's
words, and :meth:`Searcher.semantic_snippets` fills ``SearchResult.pending_snippets`` later with
the CPU FP32 encoder. Per-query work does not grow with the library (one ``IN`` query for the
hits; space names, not member counts). Figures: ``bench/query_latency.py``, docs/performance.md.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence


from hefsearch.base.errors import BackendUnavailable, DeviceError, HefsearchError, NotFound
from hefsearch.embed.space_names import FP32_SPACE
from hefsearch.index.passages import SETTING as PASSAGES_SETTING, passages_described
from hefsearch.readers.formats import CONTAINER_KINDS

from .filters import Filters
from .fusion import rrf
from .grouping import Group, group, tidy_snippet
from .request import SearchRequest, SearchRun
from .prefetch import PendingEncoder
from .compounds import short_query
from .keyword import (clean_text, code_terms, has_surrogates, keyword_search, needs_trigram, parse_query,
                      rare_terms)
from .snippets import SemanticSnippets, quick_snippets, window

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.spaces import SpaceInfo

log = logging.getLogger("hefsearch.search")

#: candidates taken from each ranking before fusion
FUSION_DEPTH = 50
#: candidate chunks per hit asked when results are grouped by document (a long file can fill
#: many places; too few candidates would leave fewer than k documents)
CANDIDATES_PER_HIT = 5
#: longer queries are cut (a pasted document); the encoder reads far fewer tokens anyway
MAX_QUERY_CHARS = 4000
EMPTY_QUERY_NOTICE = "The query is empty: type a few words to search for."
NO_WORDS_NOTICE = ("The query has no words keyword search can match (only punctuation or symbols); "
                   "vector search looks for the meaning instead.")


@dataclass
class Hit:
    rank: int
    chunk_id: int
    score: float
    path: str
    page: int | None
    line: int
    start: int
    end: int
    snippet: str
    text: str
    doc_kind: str
    sources: dict = field(default_factory=dict)
    #: cosine of the query and this chunk in the space searched (vector and hybrid modes; the
    #: FP32 cosine where FP32 re-ranked it): the score a person reads, the same in every mode
    #: that has one. ``score`` is what ranked it (cosine, BM25, or the fused rank value)
    similarity: float | None = None
    #: chunks of the same file among the candidates, after this one (one hit per document)
    more_in_file: int = 0
    #: files folded under this hit: the same content, or a copy of this passage
    also_in: list[str] = field(default_factory=list)
    #: the message a hit comes from when its document is a message inside a mail file; ``path``
    #: is then that file, the one on disk (the library stores the message below it: FILE/KEY)
    message: str | None = None
    #: above the answer's relevance line (:mod:`.relevance`); None: no line was drawn
    relevant: bool | None = None

    def __post_init__(self) -> None:
        if self.message is None and self.doc_kind in CONTAINER_KINDS and "/" in self.path:
            self.path, self.message = self.path.rsplit("/", 1)

    def to_dict(self) -> dict:
        return asdict(self)

    def also_in_text(self, names: int = 3) -> str:
        """'also in: fs.html, all.html (+2)': the files folded under this hit, by name; a copy
        whose name is this hit's own is named with the folders it differs by
        ('also in: fr/man1/chage.1.gz'), so that the line says which copy."""
        shown = [self._short_name(p) for p in self.also_in[:names]]
        more = len(self.also_in) - len(shown)
        return "also in: " + ", ".join(shown) + (f" (+{more})" if more else "")

    def _short_name(self, other: str) -> str:
        name = other.rsplit("/", 1)[-1]
        if name != self.path.rsplit("/", 1)[-1]:
            return name
        mine, theirs = self.path.split("/"), other.split("/")
        common = 0
        while common < min(len(mine), len(theirs)) - 1 and mine[common] == theirs[common]:
            common += 1
        return "/".join(theirs[common:])

    @property
    def shown_score(self) -> float:
        """The score to print: the cosine where there is one, else the ranking score (BM25)."""
        return self.score if self.similarity is None else self.similarity

    def location(self, *, short: bool = False) -> str:
        """Where in its file: 'p. 3 · line 12 · chars 420-910', or short 'p.3 l.12' (the TUI's
        lists). The page only for paged formats; the message first for mail."""
        message = [f"message {self.message}"] if self.message else []
        if short:
            return " ".join(message + ([f"p.{self.page}"] if self.page else [])
                            + ([f"l.{self.line}"] if self.line else []))
        return " · ".join(message + ([f"p. {self.page}"] if self.page is not None else [])
                          + [f"line {self.line}", f"chars {self.start}-{self.end}"])


@dataclass
class SearchResult:
    query: str
    mode: str
    space: str | None
    hits: list[Hit]
    timings: dict[str, float]
    notice: str | None = None
    backend_label: str | None = None
    #: chunk ids of hits whose snippet is a stand-in (the first sentence) until
    #: :meth:`Searcher.semantic_snippets` picks the sentence closest in meaning
    pending_snippets: set[int] = field(default_factory=set)
    #: every chunk as ranked (no grouping by document, copies not folded)
    all_chunks: bool = False
    #: whether and how deep FP32 re-ranked (:class:`~hefsearch.search.rerank.RerankInfo`
    #: as a dict; None: no vector ranking to re-rank)
    rerank: dict | None = None
    #: the searched space's post-transform (language move, hub correction: what the space
    #: corrects before comparing), as described in its fingerprint; None: plain cosine
    space_transform: dict | None = None
    #: how the library cut its chunks (``index/passages.py``): passages scored with their
    #: sections, or None (chunks that fill the encoder's window)
    passages: dict | None = None
    #: the filters it answers under (what rendering says), and the request it answers (None:
    #: a "similar", which has no query)
    filters: Filters = field(default_factory=Filters)
    request: SearchRequest | None = None
    #: where relevance ends (:class:`~hefsearch.search.relevance.RelevanceLine` as a dict:
    #: ``above`` hits are relevant); None: no line (keyword mode, too few candidates)
    relevance: dict | None = None

    def apply_snippets(self, snippets: dict[int, str]) -> None:
        """Put semantic snippets (chunk id -> snippet) into the hits; they are no longer pending."""
        for hit in self.hits:
            if hit.chunk_id in snippets:
                hit.snippet = tidy_snippet(snippets[hit.chunk_id])
        self.pending_snippets -= set(snippets)

    def to_dict(self) -> dict:
        return {"query": self.query, "mode": self.mode, "space": self.space, "all_chunks": self.all_chunks,
                "backend": self.backend_label, "notice": self.notice,
                "timings_ms": {k: round(v, 3) for k, v in self.timings.items()},
                "rerank": self.rerank, "space_transform": self.space_transform, "passages": self.passages,
                "relevance": self.relevance, "hits": [h.to_dict() for h in self.hits]}



class SearchError(HefsearchError):
    title = "search error"


class NotInLibrary(SearchError, NotFound):
    """A chunk or document id the library does not have (404 over HTTP)."""

    title = "not found"


def prepare_query(query: str) -> tuple[str, list[str]]:
    """The query as it is searched (clean text, no surrounding blanks, at most
    ``MAX_QUERY_CHARS``), and a notice for each change the user should know about."""
    notices = []
    text = clean_text(query).strip()
    if has_surrogates(query):
        notices.append("The query held bytes that are not valid UTF-8 (is the terminal's locale "
                       "UTF-8?); they were replaced with \ufffd.")
    if len(text) > MAX_QUERY_CHARS:
        text = text[:MAX_QUERY_CHARS]
        notices.append(f"The query was cut to its first {MAX_QUERY_CHARS:,} characters.")
    return text, notices


def _joined(kw: list, more: list, limit: int | None = None) -> list:
    """``kw`` and then the hits of ``more`` it does not hold yet, up to ``limit`` in all."""
    have = {c for c, _, _ in kw}
    out = list(kw)
    for m in more:
        if limit is not None and len(out) >= limit:
            break
        if m[0] not in have:
            have.add(m[0])
            out.append(m)
    return out


class Searcher:
    """Searches one library. Encoders are opened lazily per space and kept open."""

    def __init__(self, library: "Library", *,
                 encoder_factory: Callable[["SpaceInfo"], "Encoder"] | None = None,
                 encoders: dict[str, "Encoder"] | None = None,
                 bundle: str | None = None,
                 keyword_strength: str = "all",
                 keyword_weight: float = 1.0,
                 rerank_budget_ms: float | None = 250.0):
        self.library = library
        #: ms a search may spend computing missing FP32 vectors for re-ranking (None: no
        #: limit, as a bench wants; the default is search/rerank.py's DEFAULT_BUDGET_MS)
        self.rerank_budget_ms = rerank_budget_ms
        self._factory = encoder_factory
        self._encoders: dict[str, Encoder] = dict(encoders or {})
        self._pending: dict[str, PendingEncoder] = {}  # encoders opening in the background
        self._checked: set[str] = set()
        self._bundle = bundle
        self.keyword_strength = keyword_strength
        self.keyword_weight = keyword_weight
        #: keyword words also match inside compounds and as hyphen variants (off: a bench's "before")
        self.keyword_parts = True
        self._semantic: SemanticSnippets | None = None
        self._snippet_encoder: Encoder | None = None  # opened here only when no FP32 space has one
        self._semantic_unavailable = False
        #: (space, query, vector) of the last vector search: the snippets' query vector when
        #: that space is the FP32 one (encoded once, not twice)
        self._last_query: tuple | None = None
        self._last_encode_ms: float | None = None
        #: how the library cuts its chunks, read once it is decided (its first sync decides)
        self._passages: tuple[dict | None] | None = None
        self.passages()

    def passages(self) -> dict | None:
        """The library's passages (``index/passages.py``: ``passages_described``), or None.
        Fixed by the library's first sync: read from its settings until then, not per search after."""
        if self._passages is not None:
            return self._passages[0]
        settings = self.library.settings()
        described = passages_described(settings)
        if PASSAGES_SETTING in settings:
            self._passages = (described,)
        return described

    # -- spaces and encoders -------------------------------------------------------------
    def space_names(self) -> list[str]:
        return self.library.space_names()

    def default_space(self) -> str | None:
        names = self.space_names()
        if not names:
            return None
        preferred = self.library.settings().get("default_space")
        return preferred if preferred in names else names[0]

    def encoder_for(self, space: str) -> "Encoder":
        """The encoder of ``space`` (opened once); its fingerprint is checked against the space."""
        sp = self.library.space(space)  # its index loads while a prefetched encoder opens
        enc = self._encoders.get(space)
        if enc is None:
            pending = self._pending.pop(space, None)
            if pending is not None:
                enc = pending.result()
            else:
                enc = self._factory(sp.info) if self._factory else self._open_encoder(sp.info)
            self._encoders[space] = enc
        if space not in self._checked:
            sp.check_encoder(enc)
            self._checked.add(space)
        return enc

    def opened_encoder(self, space: str) -> "Encoder | None":
        """The encoder of ``space`` if one is open (opens nothing)."""
        return self._encoders.get(space)

    def prefetch(self, space: str | None = None) -> None:
        """Start opening the encoder of ``space`` (default: the default space) on a background
        thread, so that it overlaps whatever the caller does before its first vector search
        (:mod:`.prefetch`). Nothing happens for an unknown space or one already open; errors
        are raised by the search that uses the encoder, as without the prefetch."""
        space = space or self.default_space()
        if space is None or space in self._encoders or space in self._pending:
            return
        if space not in self.space_names():
            return  # the search says so, in its own words
        info = self.library.space_info(space)
        if self._factory is not None:
            factory, info_ = self._factory, info
            self._pending[space] = PendingEncoder(lambda: factory(info_))
            return
        try:
            bundle = self.bundle_path()  # read here: the library's connection stays on this thread
        except Exception:
            return  # the search raises it when it needs the encoder
        self._pending[space] = PendingEncoder(lambda: self._open_encoder(info, bundle))

    def bundle_path(self) -> str:
        """The bundle queries are encoded with: the one given, else ``$HEFSEARCH_BUNDLE``, else
        the one that built the library (an error naming --bundle when it has moved)."""
        from hefsearch.index.encoders import resolve_bundle

        return resolve_bundle(self.library, self._bundle)

    def check_space(self, space: str) -> None:
        """Raise when the library has no space ``space`` (checked in every mode: a typo in
        ``--space`` must not pass silently just because keyword search ignores it)."""
        names = self.space_names()
        if space in names:
            return
        if not names:
            raise SearchError(
                f"The library {self.library.path} has no vector space yet (asked for {space!r}).",
                "Index some folders first: hefsearch index FOLDER --bundle BUNDLE")
        raise SearchError(f"The library {self.library.path} has no vector space {space!r}; "
                          f"its spaces: {', '.join(names)}.",
                          "Pick one of them with --space, or leave --space out for the default space.")

    def has_open_encoder(self, space: str) -> bool:
        """Whether the encoder of ``space`` is open (or opening) already: using it costs no load."""
        return space in self._encoders or space in self._pending

    def adopt_encoder(self, space: str, encoder: "Encoder") -> None:
        """Use (and later close) ``encoder`` for ``space``; checked like any other on first use."""
        self._encoders[space] = encoder
        self._checked.discard(space)

    def _open_encoder(self, info: "SpaceInfo", bundle: str | None = None) -> "Encoder":
        from hefsearch.embed.encoder import Encoder

        encoder = Encoder.open(bundle or self.bundle_path(), backend=info.backend, **(info.backend_opts or {}))
        # the space decided the backend, not a flag (resolve_backend_name would say "--backend")
        encoder.backend_reason = f"{info.backend} (the backend of the space {info.name!r})"
        return encoder

    def __enter__(self) -> "Searcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for pending in self._pending.values():
            try:
                pending.discard()
            except Exception:  # pragma: no cover
                pass
        self._pending.clear()
        closed = [*self._encoders.values(), *filter(None, [self._snippet_encoder])]
        for enc in closed:
            try:
                enc.close()
            except Exception:  # pragma: no cover
                pass
        self._encoders.clear()
        self._snippet_encoder = self._semantic = None
        # Freed with the searcher, not here: freeing a 250k-piece tokenizer (multilingual-e5)
        # holds the GIL for ~0.25 s, which a one-shot search leaves to its exit (cli.main)
        self._closed_encoders = closed

    # -- searching -----------------------------------------------------------------------
    def search(self, request: SearchRequest) -> SearchResult:
        """The top ``request.k`` hits: one per document, copies folded (:mod:`.grouping`),
        unless ``all_chunks`` (the ``k`` best chunks, as the retrievers rank them), within
        ``request.filters`` (:mod:`hefsearch.search.filters`).

        Stage by stage (each a method filling one :class:`SearchRun`): check, vector, keyword,
        rank, fetch (and group), snippets, hits."""
        run = self._start(request)
        if run.notice is not None:  # nothing to search for
            return SearchResult(query=run.query, mode=request.mode, space=None, hits=[],
                                timings={"total": elapsed_ms(run.started)}, notice=run.notice,
                                filters=request.filters, request=request)
        if request.mode in ("vector", "hybrid"):
            self._vector_stage(run)
        if request.mode in ("keyword", "hybrid"):
            self._keyword_stage(run)
        self._rank_stage(run)
        self._fetch_stage(run)
        self._snippet_stage(run)
        return self._result(run)

    def _start(self, request: SearchRequest) -> SearchRun:
        """The request checked and the query cleaned; ``notice`` set when nothing is left."""
        started = time.perf_counter()
        if request.space is not None:
            self.check_space(request.space)
        query, notices = prepare_query(request.query)
        k = max(1, int(request.k))
        depth = max(FUSION_DEPTH, 3 * k) if request.mode == "hybrid" else k
        passages = self.passages()
        if not request.all_chunks:  # candidates enough for k documents after grouping
            depth = max(depth, FUSION_DEPTH, CANDIDATES_PER_HIT * k) * (passages or {}).get("per_section", 1)
        rerank = request.rerank_depth
        run = SearchRun(request=request, query=query, filters=request.filters, k=k, depth=depth,
                        rerank=rerank, asked_rerank=rerank, fallback=request.fallback, started=started,
                        notices=notices, passages=passages)
        if not query or (request.mode == "keyword" and not parse_query(query)):
            run.notice = " ".join([*notices, NO_WORDS_NOTICE if query else EMPTY_QUERY_NOTICE])
        return run

    def _vector_stage(self, run: SearchRun) -> None:
        """Encode the query in the space searched, FAISS top-``depth``, FP32 re-rank."""
        run.space = run.request.space or self.default_space()
        if run.space is None:
            raise SearchError(f"The library {self.library.path} has no vector space yet.",
                              "Index some folders first: hefsearch index FOLDER --bundle BUNDLE")
        run.encoder, run.query_vec, run.space, run.notice = self._encode(
            run.query, run.space, run.timings, run.fallback)
        run.label = run.encoder.label
        pt = getattr(run.encoder, "post_transform", None)
        run.space_transform = pt.describe() if pt is not None else None
        from .rerank import RerankInfo, default_depth

        if run.rerank is None:  # default: on when FP32 vectors are available (search/rerank.py)
            run.rerank = default_depth(self.library, run.space)
        t = time.perf_counter()
        allowed = self._allowed(run.filters)
        sp = self.library.space(run.space)
        # never fewer than FUSION_DEPTH: the relevance line reads the query's weaker candidates
        scores, ids = sp.search(run.query_vec, max(run.depth, run.rerank or 0, FUSION_DEPTH), allowed=allowed)
        run.timings["search"] = elapsed_ms(t)
        run.vec_ids = [int(i) for i in ids[0] if i >= 0]
        run.vec_scores = {int(i): float(s) for s, i in zip(scores[0], ids[0]) if i >= 0}
        if run.rerank:
            run.vec_ids, run.vec_scores, info = self._rerank(run.query, run.space, run.vec_ids, run.vec_scores,
                                                             run.rerank, run.timings)
            run.rerank_info = info.to_dict()
        else:
            note = "off" if run.rerank == 0 and run.asked_rerank is not None else RerankInfo.NOT_NEEDED
            run.rerank_info = RerankInfo(note=note).to_dict()

    def _keyword_stage(self, run: SearchRun) -> None:
        """FTS5: every word, then every word or a compound holding it (keyword mode then tops up
        with some words), or in hybrid mode the codes of the query when no chunk has every word."""
        t = time.perf_counter()
        mode, query, depth, filters, k = run.mode, run.query, run.depth, run.filters, run.k
        with self.library.snapshot():
            strength = "all" if mode == "keyword" else self.keyword_strength
            kw = keyword_search(self.library.db, query, depth, strength=strength, filters=filters)
            if self.keyword_parts and strength == "all" and (
                    len(kw) < k if mode == "keyword" else len(kw) < depth and short_query(query)):
                # exact words first, then their compounds and hyphen variants
                kw = _joined(kw, keyword_search(self.library.db, query, depth, filters=filters, parts=True))
            if mode == "hybrid" and not kw and self.keyword_strength == "all":
                codes = self._rare_codes(query)  # no chunk has every word: do the (rare) codes match?
                if codes:
                    kw = keyword_search(self.library.db, query, depth, strength="all",
                                        filters=filters, terms=codes)
            if mode == "keyword" and len(kw) < k:
                codes = self._rare_codes(query)  # a chunk holding the query's codes before one holding some word
                more = (keyword_search(self.library.db, query, k, filters=filters, terms=codes) if codes else [])
                more += keyword_search(self.library.db, query, k + len(kw), strength="any", filters=filters)
                kw = _joined(kw, more, limit=k)
        run.kw = kw
        run.timings["keyword"] = elapsed_ms(t)

    def _rare_codes(self, query: str) -> list:
        """The query's codes that few chunks hold (:func:`code_terms`, :func:`rare_terms`)."""
        codes = code_terms(query)
        return rare_terms(self.library.db, codes) if codes and not needs_trigram(query) else codes

    def _rank_stage(self, run: SearchRun) -> None:
        if run.mode == "vector":
            run.ranked = [(i, run.vec_scores[i], {"vector": r}) for r, i in enumerate(run.vec_ids, 1)]
        elif run.mode == "keyword":
            run.ranked = [(c, s, {"keyword": r}) for r, (c, s, _) in enumerate(run.kw, 1)]
        else:
            run.ranked = rrf({"vector": run.vec_ids, "keyword": [c for c, _, _ in run.kw]},
                             {"keyword": self.keyword_weight})

    def _fetch_stage(self, run: SearchRun) -> None:
        """The candidates' records in one ``IN`` query; one hit per document unless all_chunks;
        chunks deleted meanwhile dropped."""
        t = time.perf_counter()
        if run.request.all_chunks:
            run.ranked = run.ranked[: run.k]
        run.records = {r.id: r for r in self.library.chunks([i for i, _, _ in run.ranked])}
        if not run.request.all_chunks:
            run.groups = {g.chunk_id: g for g in group([i for i, _, _ in run.ranked], run.records, run.k)}
            run.ranked = [r for r in run.ranked if r[0] in run.groups]
        run.timings["fetch"] = elapsed_ms(t)

    def _snippet_stage(self, run: SearchRun) -> None:
        """Vector hits' snippets from the query's words now; those that need the meaning are
        left pending for :meth:`semantic_snippets`."""
        t = time.perf_counter()
        run.ranked = [r for r in run.ranked if r[0] in run.records]  # deleted meanwhile: dropped
        kw_snip = {c: s for c, _, s in run.kw}
        need_vec = [i for i, _, _ in run.ranked if i not in kw_snip]
        texts = [run.records[i].text for i in need_vec]
        quick = quick_snippets(run.query, texts)
        run.snippets = {i: snip for i, (snip, _) in zip(need_vec, quick)}
        run.pending = {i for i, (_, final) in zip(need_vec, quick) if not final}
        run.snippets.update(kw_snip)
        run.timings["snippet"] = elapsed_ms(t)

    def _result(self, run: SearchRun) -> SearchResult:
        similarity = self._similarities([i for i, _, _ in run.ranked], run.vec_scores, run.space, run.query_vec)
        hits = []
        for rank, (i, s, src) in enumerate(run.ranked, 1):
            rec, g = run.records[i], run.groups.get(i)
            snip = tidy_snippet(run.snippets.get(i) or window(rec.text, (0, 0)))
            hits.append(Hit(rank=rank, chunk_id=i, score=float(s), path=rec.path, page=rec.page,
                            line=rec.line, start=rec.start, end=rec.end, snippet=snip, text=rec.text,
                            doc_kind=rec.doc_kind, sources=dict(src), similarity=similarity.get(i),
                            more_in_file=len(g.more) if g else 0, also_in=list(g.also_in) if g else []))
        line = self._relevance(run, hits)
        run.timings["total"] = elapsed_ms(run.started)
        if run.query_vec is not None:
            self._last_query = (run.space, run.query, run.query_vec[0])
        notice = " ".join([*run.notices, run.notice] if run.notice else run.notices) or None
        return SearchResult(query=run.query, mode=run.mode, space=run.space, hits=hits, timings=run.timings,
                            notice=notice, backend_label=run.label, pending_snippets=run.pending,
                            all_chunks=run.request.all_chunks, rerank=run.rerank_info,
                            space_transform=run.space_transform, filters=run.request.filters, request=run.request,
                            relevance=None if line is None else line.to_dict(),
                            passages=run.passages if run.query_vec is not None else None)

    def _relevance(self, run: SearchRun, hits: list[Hit]):
        """The relevance line of the hits against the query's vector candidates; each hit marked."""
        from .relevance import cut_for, relevance_line

        if not run.vec_scores or run.encoder is None:
            return None
        bundle = getattr(run.encoder, "bundle", None)
        manifest = getattr(bundle, "manifest", None) or {}
        line = relevance_line([(h.similarity, "keyword" in h.sources) for h in hits], run.vec_scores.values(),
                              cut_for((manifest.get("model") or {}).get("id"), manifest,
                                      quantised=bool(getattr(run.encoder, "is_quantised", False))))
        for n, hit in enumerate(hits):
            hit.relevant = None if line is None else n < line.above
        return line

    def _similarities(self, ids: list[int], vec_scores: dict[int, float], space: str | None,
                      query_vec) -> dict[int, float]:
        """Cosine of the query and each hit: the vector retriever's score, or, for a hit only
        keyword search found (hybrid), from its stored vector in the space searched."""
        out = {i: vec_scores[i] for i in ids if i in vec_scores}
        missing = [i for i in ids if i not in out]
        if missing and space is not None and query_vec is not None:
            try:
                sp = self.library.space(space)
                have = sp.has(missing)
                known = [i for i, h in zip(missing, have) if h]
                if known:
                    out.update(zip(known, (sp.vectors(known) @ query_vec[0]).tolist()))
            except (HefsearchError, OSError) as e:  # the score stays the fused one
                log.info("no similarity for %d keyword hits: %s", len(missing), e)
        return {i: float(v) for i, v in out.items()}

    # -- semantic snippets, after the results ---------------------------------------------
    def semantic_snippets(self, result: SearchResult, hits: Sequence[Hit] | None = None, *,
                          budget_ms: float | None = None) -> dict[int, str]:
        """{chunk id: snippet around the sentence closest in meaning to the query} for the
        ``hits`` (default: all of ``result``'s) whose snippet is pending. Apply it with
        :meth:`SearchResult.apply_snippets`. ``budget_ms``: only the hits whose snippets fit
        that time (cached ones always; :data:`~hefsearch.search.snippets.SEMANTIC_BUDGET_MS`),
        the others stay pending.

        Embeds on the CPU in FP32: the FP32 space's encoder, else a CPU encoder of the bundle
        opened once; never the NPU. Sentence vectors are cached per chunk. Returns ``{}`` when
        no CPU encoder can be opened (the stand-in snippets stay)."""
        todo = [h for h in (result.hits if hits is None else hits) if h.chunk_id in result.pending_snippets]
        if not todo:
            return {}
        engine = self._semantic_engine()
        if engine is None:
            return {}
        last = self._last_query
        if last is not None and last[:2] == (result.space, result.query) and result.space == FP32_SPACE \
                and engine.encoder is self._encoders.get(FP32_SPACE):
            engine.prime(result.query, last[2], self._last_encode_ms)  # the search encoded it with this encoder
        return engine.snippets(result.query, [(h.chunk_id, h.text) for h in todo], budget_ms=budget_ms)

    def _semantic_engine(self) -> SemanticSnippets | None:
        if self._semantic is None and not self._semantic_unavailable:
            try:
                if FP32_SPACE in self.space_names():
                    encoder = self.encoder_for(FP32_SPACE)
                else:
                    from hefsearch.embed.reference import open_reference_encoder

                    encoder = self._snippet_encoder = open_reference_encoder(self.bundle_path())
            except (HefsearchError, OSError) as e:
                log.info("semantic snippets unavailable: %s", getattr(e, "message", None) or e)
                self._semantic_unavailable = True  # asked again on every scroll otherwise
                return None
            self._semantic = SemanticSnippets(encoder)
        return self._semantic

    def _encode(self, query: str, space: str, timings: dict, fallback: bool):
        t = time.perf_counter()
        try:
            enc = self.encoder_for(space)
            t_encode = time.perf_counter()  # the encoding alone, not the wait for the encoder's open
            vec = enc.encode_queries([query])
            self._last_encode_ms = elapsed_ms(t_encode)
            timings["encode"] = elapsed_ms(t)
            return enc, vec, space, None
        except (DeviceError, BackendUnavailable) as e:
            what = self._label_of(space)
            if not fallback or space == FP32_SPACE or FP32_SPACE not in self.space_names():
                hint = e.hint
                if space != FP32_SPACE and FP32_SPACE not in self.space_names():
                    hint = ((hint + " ") if hint else "") + (
                        "To keep searching when the accelerator fails, add an FP32 space: "
                        "hefsearch index FOLDER --also-fp32")
                raise type(e)(e.message, hint) from e
            log.warning("%s failed (%s); answering from the FP32 space", what, e.message)
            enc = self.encoder_for(FP32_SPACE)
            vec = enc.encode_queries([query])
            timings["encode"] = elapsed_ms(t)
            return enc, vec, FP32_SPACE, f"{what} failed: {e.message}; answered from the FP32 space"

    def _label_of(self, space: str) -> str:
        for info in self.library.spaces():
            if info.name == space:
                return info.label or info.backend
        return space

    def _allowed(self, filters: Filters) -> set[int] | None:
        """The chunk ids the filters let through (None: every chunk)."""
        if filters.empty:
            return None
        from hefsearch.index import documents

        where, params = filters.sql()
        return documents.filtered_chunk_ids(self.library.query, where, params)

    def _rerank(self, query, space, ids, scores, n, timings):
        try:
            from . import rerank as rr
        except ImportError:
            raise SearchError("Re-ranking is not available in this installation.") from None
        t = time.perf_counter()
        ids, scores, info = rr.rerank_candidates(self, query=query, space=space, ids=ids, scores=scores, top=n,
                                                 budget_ms=self.rerank_budget_ms)
        timings["rerank"] = elapsed_ms(t)
        return list(ids), dict(scores), info


def elapsed_ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


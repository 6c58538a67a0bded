"""One open library for a front end: the library, a searcher with its encoders, and the work
every front end asks of them. The TUI calls it from its thread workers, the server from its
request threads, the CLI once per command; all get the search API's own types
(``SearchResult``, ``Comparison``, ``LibraryStatus``, ``SyncReport``) back.

The searcher serves one query at a time (``_engine``): encoders are not thread-safe and the
NPU runs one model at a time; everything else (status, reading chunks) goes straight to the
library, whose SQLite connection serialises itself.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from hefsearch.search.filters import Filters
from hefsearch.search.request import SearchRequest  # noqa: F401  (re-exported: front ends build requests)


if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.index.encoders import EncoderChoice
    from hefsearch.index.library import ChunkRecord, Library, LibraryStatus
    from hefsearch.index.sync import ProgressEvent, SyncReport
    from hefsearch.search import Comparison, Hit, Searcher, SearchResult

    from .freshness import Freshness

log = logging.getLogger("hefsearch.app")


class LibrarySession:
    """The library and a searcher over it, plus how a re-index opens its encoders
    (``open_encoders()``; default: the library's own, as ``hefsearch index`` opens them)."""

    def __init__(self, library: "Library", searcher: "Searcher", *,
                 open_encoders: Callable[[], "EncoderChoice"] | None = None):
        self.library = library
        self.searcher = searcher
        self._open_encoders = open_encoders
        #: one query at a time through the searcher (its encoders open lazily, once)
        self._engine = threading.Lock()

    @classmethod
    def open(cls, library_path: str | Path | None, *, bundle: str | None = None,
             load_spaces: bool = True, **options):
        """A session over the existing library at ``library_path`` (None: the default one),
        closed by :meth:`close`. ``load_spaces=False``: each space's index is read when first
        searched (see :meth:`Library.open <hefsearch.index.library.Library.open>`), for a
        session that answers one query."""
        from hefsearch.index.library import Library
        from hefsearch.search import Searcher

        library = Library.open(library_path, create=False, load_spaces=load_spaces)
        try:
            return cls(library, Searcher(library, bundle=bundle), **options)
        except BaseException:
            library.close()
            raise

    def close(self) -> None:
        try:
            if self.searcher is not None:
                self.searcher.close()
        finally:
            self.library.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def library_path(self) -> Path:
        return Path(self.library.path)

    # -- searching -------------------------------------------------------------------------
    def prefetch(self, request: SearchRequest) -> None:
        """Start opening the encoder ``request`` will need (vector and hybrid modes) in the
        background, so it overlaps reading the space's index (:mod:`hefsearch.search.prefetch`)."""
        if request.mode in ("vector", "hybrid"):
            with self._engine:
                self.searcher.prefetch(request.space)

    def search(self, request: SearchRequest, *, semantic_snippets: bool = False,
               snippet_budget_ms: float | None = None) -> "SearchResult":
        """The hits of ``request``; ``semantic_snippets`` also fills the snippets chosen by
        meaning (what ``hefsearch search`` prints; the TUI asks for them per visible hit
        instead), within ``snippet_budget_ms`` when given (the server's: hits that do not fit
        keep their stand-in and stay in ``pending_snippets``)."""
        with self._engine:
            result = self.searcher.search(request, rerank=request.rerank_depth)
            if semantic_snippets and result.pending_snippets:
                import time

                t = time.perf_counter()
                result.apply_snippets(self.searcher.semantic_snippets(result, budget_ms=snippet_budget_ms))
                result.timings["semantic_snippets"] = (time.perf_counter() - t) * 1000.0
            return result

    def compare(self, request: SearchRequest, spaces: tuple[str, str]) -> "Comparison":
        from hefsearch.search import compare

        filters = request.all_filters()
        options = {} if filters.empty else {"filters": filters}
        if not request.rerank:
            options["rerank"] = 0  # the NPU space's own ranking; None = the API's default
        with self._engine:
            return compare(self.searcher, request.query, spaces=spaces, k=request.k,
                           mode=request.mode, **options)

    def similar(self, chunk_id: int | None = None, *, doc_id: int | None = None, k: int = 10,
                space: str | None = None, filters: Filters | None = None) -> "SearchResult":
        """Chunks of other documents nearest to a chunk (or a whole document)."""
        from hefsearch.search.similar import similar

        with self._engine:
            return similar(self.searcher, chunk_id=chunk_id, doc_id=doc_id, k=k, space=space,
                           filters=filters)

    def semantic_snippets(self, result: "SearchResult", hits) -> dict[int, str]:
        """Meaning-based snippets for ``hits`` of ``result`` (CPU FP32, cached per chunk)."""
        with self._engine:
            return self.searcher.semantic_snippets(result, hits)

    def warm_up(self, space: str | None = None) -> None:
        """One query in ``space`` (default: the default space), so its encoder (and device)
        is open before the user's first."""
        space = space or self.default_space()
        if space is None:
            return
        with self._engine:
            self.searcher.search("warm up", k=1, mode="vector", space=space, fallback=False)

    def backend_label(self, space: str | None) -> str | None:
        """What encodes queries of ``space`` ("CPU FP32", "Hailo-10H", ...), once its encoder is
        open (None before: asking must not open a device)."""
        enc = self.searcher.opened_encoder(space) if space else None
        return None if enc is None else enc.label

    def default_space(self) -> str | None:
        try:
            return self.searcher.default_space()
        except Exception:
            return None

    # -- reading ---------------------------------------------------------------------------
    def neighbours(self, hit: "Hit", around: int) -> list["ChunkRecord"]:
        """The hit's chunk with up to ``around`` chunks of its document before and after it."""
        return list(self.library.neighbours(hit.chunk_id, before=around, after=around))

    def status(self) -> "LibraryStatus":
        return self.library.status()

    def freshness(self) -> "Freshness":
        from .freshness import freshness

        return freshness(self.library)

    # -- re-index --------------------------------------------------------------------------
    def recorded_roots(self) -> list[Path]:
        """The folders the library indexes (as ``hefsearch index`` without PATHS uses them),
        those that are there now."""
        from .folders import library_folders

        return library_folders(self.library).present

    def reindex(self, roots: Sequence[Path], progress: Callable[["ProgressEvent"], None]) -> "SyncReport":
        """Sync ``roots`` into the library (new, changed and deleted files); ``progress`` is
        called on this thread with each ``ProgressEvent``."""
        from .reindex import reindex

        encoders = self._open_encoders() if self._open_encoders is not None else None
        try:
            return reindex(self.library, roots, encoders, progress=progress).report
        finally:
            if encoders is not None:
                encoders.close()

"""One open library for a front end: the library, a searcher with its encoders, and the work
every front end asks of them. The TUI calls it from its thread workers, the server from its
request threads, the CLI once per command; all get the search API's own types
(``SearchResult``, ``Comparison``, ``LibraryStatus``, ``SyncReport``) back.

The searcher serves one query at a time (``_engine``): encoders are not thread-safe and the
NPU runs one model at a time; everything else (status, reading chunks) goes straight to the
library, whose SQLite connection serialises itself. A document shown outside hefsearch (the
TUI opens a hit): how (:func:`display_form`), and the text indexed from it (:func:`indexed_text`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from hefsearch.search.request import SearchRequest


if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.index.encoders import EncoderChoice
    from hefsearch.index.library import ChunkRecord, Library, LibraryStatus
    from hefsearch.index.sync import ProgressEvent, SyncReport
    from hefsearch.search import Comparison, Hit, Searcher, SearchResult

    from .freshness import Freshness
    from .requests import CompareRequest, SimilarRequest

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

    def search(self, request: SearchRequest) -> "SearchResult":
        """The hits of ``request``; with ``request.snippets`` "meaning" also the snippets chosen
        by meaning (what ``hefsearch search`` prints; the TUI asks "quick" and fills them per
        visible hit), within ``request.snippet_budget_ms`` when given (hits that do not fit
        keep their stand-in and stay in ``pending_snippets``)."""
        with self._engine:
            result = self.searcher.search(request)
            if request.snippets == "meaning" and result.pending_snippets:
                import time

                t = time.perf_counter()
                result.apply_snippets(self.searcher.semantic_snippets(result, budget_ms=request.snippet_budget_ms))
                result.timings["semantic_snippets"] = (time.perf_counter() - t) * 1000.0
            return result

    def compare(self, request: "CompareRequest") -> "Comparison":
        """``request.search`` in both of ``request.spaces`` (which must be given), each side as
        its encoder ranks it; the NPU side FP32 re-ranked only when ``request.rerank``."""
        from dataclasses import replace

        from hefsearch.search import compare

        if request.spaces is None:
            raise ValueError("compare needs its two spaces")
        # rerank_depth None: the search API's default; 0: the NPU space's own ranking
        search = replace(request.search, rerank_depth=None if request.rerank else 0)
        with self._engine:
            return compare(self.searcher, search, request.spaces)

    def similar(self, request: "SimilarRequest") -> "SearchResult":
        """Chunks of other documents nearest to a chunk (or a whole document)."""
        from hefsearch.search.similar import similar

        with self._engine:
            return similar(self.searcher, chunk_id=request.chunk_id, doc_id=request.doc_id, k=request.k,
                           space=request.space, filters=request.filters)

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
            self.searcher.search(SearchRequest("warm up", mode="vector", k=1, space=space, fallback=False))

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
    def find_target(self, target: str) -> tuple[int | None, int | None]:
        """(None, document id) for ``PATH`` (a whole document), (chunk id, None) for ``PATH:N``
        (its N-th chunk, from 1); a path the library does not hold is an error."""
        import os

        from hefsearch.base.terminal_text import printable
        from hefsearch.index import documents
        from hefsearch.search.searcher import NotInLibrary

        def doc_of(path: str) -> int | None:
            return documents.document_id(self.library.query, printable(os.path.abspath(path)))

        doc = doc_of(target)
        if doc is not None:
            return None, doc
        path, sep, number = target.rpartition(":")
        if sep and number.isdigit() and (doc := doc_of(path)) is not None:
            ids = documents.chunk_ids_of(self.library.query, doc)
            if not 1 <= int(number) <= len(ids):
                raise NotInLibrary(f"{path} has {len(ids)} chunk(s); there is no chunk {number}.",
                                   f"Give a number from 1 to {len(ids)}, or the path alone for the whole document.")
            return ids[int(number) - 1], None
        raise NotInLibrary(f"{target} is not a document of the library {self.library.path}.",
                           "Give the path of an indexed file (as 'hefsearch search' lists it), optionally "
                           "with :CHUNK, or --id with a chunk_id from 'hefsearch search --json'.")

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


# -- a document shown outside hefsearch (the TUI opens a hit in an editor or the system's program)
def display_form(path: str, kind: str | None) -> str:
    """How to show the document at ``path`` (of ``kind``, when known): "opener" (a binary
    format: the system's program), "text" (compressed, or a manual page: the text hefsearch
    indexed, see :func:`indexed_text`), or "file" (the file itself, in an editor). The table of
    formats decides (:mod:`hefsearch.readers.formats`)."""
    from hefsearch.readers.filetypes import compression_of
    from hefsearch.readers.formats import OPENER_KINDS, OPENER_SUFFIXES

    if kind in OPENER_KINDS or Path(path).suffix.lower() in OPENER_SUFFIXES:
        return "opener"
    if kind == "man" or compression_of(path):
        return "text"
    return "file"


def indexed_text(path: str, kind: str | None) -> tuple[str, str] | None:
    """The text hefsearch indexes from ``path`` (decompressed, a manual page rendered) and the
    document's own name (``chsh.1`` for ``chsh.1.gz``); None when the file cannot be read now."""
    from hefsearch.base.errors import HefsearchError
    from hefsearch.readers.extract import extract
    from hefsearch.readers.filetypes import inner_name

    try:
        text = extract(Path(path), kind=kind).text
    except (HefsearchError, OSError):
        return None
    return inner_name(path), text

"""The app's one door to everything outside it, without Textual: the library, the search API,
the re-index and the programs that open a hit.

:class:`LibrarySession` is the only object the app calls for work; its methods run on the
app's thread workers and return the search API's own types (``SearchResult``, ``Comparison``,
``LibraryStatus``, ``SyncReport``). Tests build one around a library they made, with a
recording launcher, or subclass it to fake a method.

A re-index embeds with the encoders ``hefsearch index`` would choose for this library
(:mod:`hefsearch.index.encoders`), opened for the run and closed after it.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from . import launch
from .present import SearchRequest

if TYPE_CHECKING:
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import ChunkRecord, Library, LibraryStatus
    from hefsearch.index.sync import ProgressEvent, SyncReport
    from hefsearch.search import Comparison, Hit, Searcher, SearchResult

log = logging.getLogger("hefsearch.tui")


def open_sync_encoders(library: Library) -> list[Encoder]:
    """Encoders for every space of ``library`` that can be opened here, the default space's
    first (sync chunks with the first one); see :mod:`hefsearch.index.encoders`."""
    from hefsearch.index.encoders import open_sync_encoders as choose

    choice = choose(library)
    for name, why in choice.skipped_spaces:
        log.warning("re-index leaves space %s as it is: %s", name, why)
    return choice.encoders


class LibrarySession:
    """The library and a searcher over it, plus how a re-index opens its encoders
    (``open_encoders()``, default :func:`open_sync_encoders`) and how a hit is opened
    (``launcher(argv, terminal=bool)``; ``env`` is where ``$VISUAL``/``$EDITOR`` are looked up,
    default ``os.environ``)."""

    def __init__(self, library: Library, searcher: Searcher, *,
                 open_encoders: Callable[[], Sequence[Encoder]] | None = None,
                 launcher: launch.Launcher = launch.run_argv, env: Mapping[str, str] | None = None):
        self.library = library
        self.searcher = searcher
        self._open_encoders = open_encoders or (lambda: open_sync_encoders(library))
        self.launcher = launcher
        self.env = env
        #: one query at a time through the searcher (its encoders open lazily, once)
        self._engine = threading.Lock()

    @classmethod
    def open(cls, library_path: str | Path | None) -> LibrarySession:
        """The session of the ``tui`` command: the existing library at ``library_path`` (None:
        the default one) and a searcher over it, both closed by :meth:`close`."""
        from hefsearch.index.library import Library
        from hefsearch.search import Searcher

        library = Library.open(library_path, create=False)
        try:
            return cls(library, Searcher(library))
        except BaseException:
            library.close()
            raise

    def close(self) -> None:
        try:
            self.searcher.close()
        finally:
            self.library.close()

    def __enter__(self) -> LibrarySession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def library_path(self) -> Path:
        return Path(self.library.path)

    # -- searching -------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> SearchResult:
        with self._engine:
            return self.searcher.search(request.query, k=request.k, mode=request.mode,
                                        path_glob=request.path_glob, kinds=request.kinds,
                                        all_chunks=request.all_chunks)

    def compare(self, request: SearchRequest, spaces: tuple[str, str]) -> Comparison:
        from hefsearch.search import compare

        options = {key: v for key, v in (("path_glob", request.path_glob), ("kinds", request.kinds)) if v}
        if not request.rerank:
            options["rerank"] = 0  # the NPU space's own ranking; None = the API's default
        with self._engine:
            return compare(self.searcher, request.query, spaces=spaces, k=request.k,
                           mode=request.mode, **options)

    def semantic_snippets(self, result: SearchResult, hits) -> dict[int, str]:
        """Meaning-based snippets for ``hits`` of ``result`` (CPU FP32, cached per chunk)."""
        with self._engine:
            return self.searcher.semantic_snippets(result, hits)

    def warm_up(self, space: str) -> None:
        """One query in ``space``, so its encoder (and device) is open before the user's first."""
        with self._engine:
            self.searcher.search("warm up", k=1, mode="vector", space=space, fallback=False)

    def default_space(self) -> str | None:
        try:
            return self.searcher.default_space()
        except Exception:
            return None

    # -- reading ---------------------------------------------------------------------------
    def neighbours(self, hit: Hit, around: int) -> list[ChunkRecord]:
        """The hit's chunk with up to ``around`` chunks of its document before and after it."""
        return list(self.library.neighbours(hit.chunk_id, before=around, after=around))

    def status(self) -> LibraryStatus:
        return self.library.status()

    def plan_open(self, hit: Hit) -> launch.LaunchPlan:
        return launch.plan_open(hit.path, line=hit.line, kind=hit.doc_kind, env=self.env)

    def launch(self, plan: launch.LaunchPlan) -> None:
        self.launcher(plan.argv, terminal=plan.terminal)

    # -- re-index --------------------------------------------------------------------------
    def recorded_roots(self) -> list[Path]:
        """The folders the library indexes (``Library.recorded_roots``, as ``hefsearch index``
        without PATHS uses them), those that are there now."""
        try:
            roots = self.library.recorded_roots()
        except Exception:
            return []
        return [Path(r) for r in roots if Path(r).exists()]

    def reindex(self, roots: Sequence[Path], progress: Callable[[ProgressEvent], None]) -> SyncReport:
        """Sync ``roots`` into the library (new, changed and deleted files); ``progress`` is
        called on this thread with each ``ProgressEvent``."""
        from hefsearch.index.sync import sync
        from hefsearch.search.language_neutral import keep_language_neutral

        encoders = list(self._open_encoders())
        try:
            report = sync(self.library, list(roots), encoders, progress=progress)
            for line in keep_language_neutral(self.library, encoders, None):  # as `hefsearch index` does
                log.info("%s", line)
            return report
        finally:
            for encoder in encoders:
                encoder.close()

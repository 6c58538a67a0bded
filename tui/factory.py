"""The app factory shared by the ``tui`` command and the tests (as posting's make_posting):
the library, the searcher and the encoders are injected, so tests run the real app around a
library they built."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from .app import DARK, LIGHT, HefsearchApp
from .history import HISTORY_FILE, QueryHistory


def make_app(library, searcher=None, *, encoders: Sequence | None = None, launcher=None,
             roots: Sequence[str | Path] | None = None, history_path: Path | None = None,
             k: int = 10, mode: str = "hybrid", live: bool = False, light: bool = False,
             neighbours: int = 2, sync_library: Callable[[], object] | None = None,
             open_sync_encoders: Callable[[], Sequence] | None = None, env=None,
             sync_fn: Callable | None = None, compare_fn: Callable | None = None) -> HefsearchApp:
    """Build the TUI around an open Library.

    - ``searcher``: a ``hefsearch.search.Searcher``; built over ``library`` when None.
    - ``encoders``: the encoders a re-index embeds with (``index.sync.sync``'s ``encoders``);
      when None, ``open_sync_encoders()`` is called on the worker thread when a re-index starts.
    - ``launcher(argv, terminal=bool)``: runs the editor / system opener; tests record argv.
    - ``roots``: folders a re-index syncs; default: the ones the library recorded.
    - ``history_path``: where query history is kept; default ``<library>/tui-history.json``.
    - ``sync_library()``: opens the Library instance the re-index writes through (default:
      the same instance the searcher reads).
    """
    if searcher is None:
        from hefsearch.search import Searcher

        searcher = Searcher(library)
    if history_path is None and getattr(library, "path", None) is not None:
        history_path = Path(library.path) / HISTORY_FILE
    return HefsearchApp(
        library, searcher, sync_encoders=encoders, roots=roots, launcher=launcher,
        history=QueryHistory(history_path), k=k, mode=mode, live=live,
        theme=LIGHT if light else DARK, neighbours=neighbours, sync_library=sync_library,
        open_sync_encoders=open_sync_encoders, env=env, sync_fn=sync_fn, compare_fn=compare_fn,
    )

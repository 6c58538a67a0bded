"""One whole sync run, the same for every front end: ``hefsearch index`` (through
:mod:`hefsearch.app.indexing`), the TUI's re-index, ``hefsearch watch`` (changed paths only)
and ``hefsearch serve --watch`` all call :func:`reindex`, which opens the encoders the library
needs (or uses the ones given), runs the sync (which records the folders and a whole run's
crawl options in the library), keeps the language-neutral space and closes what it opened.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.index.encoders import EncoderChoice
    from hefsearch.index.library import Library
    from hefsearch.index.sync import ProgressEvent, SyncOptions, SyncReport

log = logging.getLogger("hefsearch.app")


@dataclass
class ReindexRun:
    report: "SyncReport"
    #: what the language-neutral step did, one line each
    notes: list[str] = field(default_factory=list)
    #: (space, why it was not updated)
    skipped_spaces: list[tuple[str, str]] = field(default_factory=list)


def reindex(library: "Library", roots: Sequence[str | Path], encoders: "EncoderChoice | None" = None, *,
            progress: Callable[["ProgressEvent"], None] | None = None,
            paths: Sequence[str | Path] | None = None,
            language_neutral: bool | None = None,
            options: "SyncOptions | None" = None) -> ReindexRun:
    """Sync ``roots`` into ``library`` (only ``paths`` below them, when given).

    ``encoders``: the run's encoders, opened and closed by the caller (the watcher keeps them
    between runs); without them the library's own are opened
    (:func:`~hefsearch.index.encoders.open_sync_encoders`) and closed at the end. ``options``
    (a :class:`~hefsearch.index.sync.SyncOptions`: the crawl options whole, the batch size) go
    to :func:`hefsearch.index.sync.sync`; without crawl options the sync uses those the
    library remembers (so the TUI's re-index skips what ``index --exclude`` skipped).

    :raises LibraryBusy: another process held the write lock for more than 5 s.
    :raises DiskFull: the disk is full; every batch committed before stays.
    """
    from hefsearch.index.encoders import open_sync_encoders
    from hefsearch.index.sync import sync
    from hefsearch.search.language_neutral import keep_language_neutral

    choice = encoders if encoders is not None else open_sync_encoders(library)
    try:
        report = sync(library, list(roots), choice.encoders, options, progress=progress,
                      **({"paths": list(paths)} if paths is not None else {}))
        notes = list(keep_language_neutral(library, choice.encoders, language_neutral))
        for line in notes:
            log.info("%s", line)
        return ReindexRun(report, notes, list(choice.skipped_spaces))
    finally:
        if encoders is None:
            choice.close()

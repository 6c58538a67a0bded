"""One whole sync run, the same for every front end: ``hefsearch index`` (through
:mod:`hefsearch.app.indexing`), the TUI's re-index, ``hefsearch watch`` (changed paths only)
and ``hefsearch serve --watch`` all call :func:`reindex`, which opens the encoders the library
needs (or uses the ones given), runs the sync (which records the folders in the library), keeps
the language-neutral space, closes what it opened and remembers the crawl options of a full run.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.index.encoders import EncoderChoice
    from hefsearch.index.library import Library
    from hefsearch.index.sync import ProgressEvent, SyncOptions, SyncReport

log = logging.getLogger("hefsearch.app")

#: setting holding the crawl options of the last full run (``--exclude``, ``--max-size``, ...),
#: which runs that give none (the watcher, the TUI's re-index) apply the same way
CRAWL_SETTING = "crawl_options"
CRAWL_OPTIONS = ("include_hidden", "excludes", "max_bytes", "follow_links", "overlap_tokens")


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
    (a :class:`~hefsearch.index.sync.SyncOptions`: excludes, max_bytes, batch_chunks, ...) go
    to :func:`hefsearch.index.sync.sync`; without them the crawl options are those of the last
    full run (so a watcher skips what ``index --exclude`` skipped), and a full run given
    options records their crawl options.

    :raises LibraryBusy: another process held the write lock for more than 5 s.
    :raises DiskFull: the disk is full; every batch committed before stays.
    """
    from hefsearch.index.encoders import open_sync_encoders
    from hefsearch.index.sync import sync
    from hefsearch.search.language_neutral import keep_language_neutral

    choice = encoders if encoders is not None else open_sync_encoders(library)
    try:
        stored = _settings(library).get(CRAWL_SETTING) or {}
        run_options = options if options is not None else _remembered(stored)
        report = sync(library, list(roots), choice.encoders, run_options, progress=progress,
                      **({"paths": list(paths)} if paths is not None else {}))
        notes = list(keep_language_neutral(library, choice.encoders, language_neutral))
        for line in notes:
            log.info("%s", line)
        if paths is None and options is not None:
            used = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(options).items()
                    if k in CRAWL_OPTIONS}
            if used != stored and not getattr(library, "read_only", True):
                library.set_settings(**{CRAWL_SETTING: used})
        return ReindexRun(report, notes, list(choice.skipped_spaces))
    finally:
        if encoders is None:
            choice.close()


#: how each crawl option reads in a message (the ``hefsearch index`` flag that sets it)
_FLAGS = {"excludes": "--exclude", "max_bytes": "--max-size", "include_hidden": "--include-hidden",
          "follow_links": "--follow-links", "overlap_tokens": "--overlap"}


def crawl_options(library: "Library", given: dict, *, forget: bool = False,
                  **other) -> tuple["SyncOptions", list[str]]:
    """The options of a run that was ``given`` some crawl options (SyncOptions field -> value):
    those given, every other one as the library remembers it (the defaults with ``forget``),
    plus ``other`` (batch size, --ext); and what the run changes against the remembered ones,
    one line each ("--exclude: 'changelog*' -> none"), for the run to say so."""
    stored = _settings(library).get(CRAWL_SETTING) or {}
    before = _remembered(stored)
    opts = dataclasses.replace(_remembered({}) if forget else before, **given, **other)
    changes = [f"{_FLAGS[k]}: {option_text(k, getattr(before, k))} -> {option_text(k, getattr(opts, k))}"
               for k in CRAWL_OPTIONS if _plain(getattr(before, k)) != _plain(getattr(opts, k))]
    return opts, changes


def remembered_text(library: "Library", given=()) -> str:
    """The crawl options the library remembers that differ from the defaults and are not among
    ``given``, as flags ("--exclude 'changelog*' --max-size 0.03"); "" when none."""
    settings = _settings(library)
    stored = _remembered(settings.get(CRAWL_SETTING) or {})
    defaults = _remembered({})
    flags = [option_flag(k, getattr(stored, k)) for k in CRAWL_OPTIONS
             if k not in given and _plain(getattr(stored, k)) != _plain(getattr(defaults, k))]
    extra = settings.get("extra_suffixes") or {}  # every run adds them (index.sync); said here too
    flags += [f"--ext {s}" + ("" if kind == "text" else f"={kind}") for s, kind in sorted(extra.items())]
    return " ".join(flags)


def option_text(key: str, value) -> str:
    """One crawl option's value for a person: excludes quoted, sizes in MiB, flags on/off."""
    if key == "excludes":
        return " ".join(f"'{p}'" for p in value) or "none"
    if key == "max_bytes":
        return f"{round(value / (1024 * 1024), 4):g} MiB"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def option_flag(key: str, value) -> str:
    """One crawl option as the flags that give it ("--exclude 'a' --exclude 'b'")."""
    if key == "excludes":
        return " ".join(f"--exclude '{p}'" for p in value)
    if key == "max_bytes":
        return f"--max-size {round(value / (1024 * 1024), 4):g}"
    if isinstance(value, bool):
        return _FLAGS[key] if value else f"--no-{_FLAGS[key][2:]}"
    return f"{_FLAGS[key]} {value}"


def _plain(value):
    return list(value) if isinstance(value, (tuple, list)) else value


def _remembered(stored: dict) -> "SyncOptions":
    """The default options with the crawl options the last full run recorded."""
    from hefsearch.index.sync import SyncOptions

    return dataclasses.replace(SyncOptions(), **{k: v for k, v in stored.items() if k in CRAWL_OPTIONS})


def _settings(library) -> dict:
    try:
        return library.settings()
    except Exception:  # a library that cannot be read now: nothing recorded to reuse
        return {}

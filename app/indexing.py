"""``hefsearch index`` as one operation: :func:`run_index` takes an
:class:`~hefsearch.app.requests.IndexRequest` and does the whole run (the checks made before a
library is created, the library created and, when its first run fails, discarded again, its
folders, the remembered crawl options, Ray, the encoders, the sync with its progress, the
default bundle), closing all it opened. It returns an :class:`IndexResult` that knows its JSON
form; what a person should see while it runs goes to a ``say`` callback as :class:`Notice`\\ s,
which the front end renders.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ContextManager, Protocol

from hefsearch.base.errors import HefsearchError

from .requests import IndexRequest

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.index.encoders import EncoderChoice
    from hefsearch.index.library import Library
    from hefsearch.index.sync import ProgressEvent, SyncOptions, SyncReport

#: the run's exit statuses besides errors (an error's is its ``exit_code``)
EXIT_OK, EXIT_PARTIAL, EXIT_INTERRUPTED = 0, 3, 130


class IndexRequestError(HefsearchError):
    """The run cannot start as asked (no folders to index, options that exclude each other);
    a command line shows it as a usage error."""

    title = "usage error"


@dataclass(frozen=True)
class Notice:
    """One thing a run says while it runs. ``kind`` names it (below), ``values`` are its parts
    (paths, names, reasons: raw, a front end escapes them), ``text`` is it for a person."""

    kind: str
    text: str
    values: tuple = ()

    #: the kinds that warn (the others inform)
    WARNINGS = frozenset({"folder_gone", "options_changed", "space_skipped", "long_run"})

    @property
    def warning(self) -> bool:
        return self.kind in self.WARNINGS


class ProgressDisplay(Protocol):
    """What shows a sync's progress: entered for the sync only, fed each ``ProgressEvent``."""

    def __enter__(self) -> object: ...

    def __exit__(self, *exc) -> object: ...

    def update(self, event: "ProgressEvent") -> None: ...


def sync_summary_dict(report: "SyncReport", library_path, skipped_spaces=(), interrupted: bool = False) -> dict:
    """The JSON summary of a run (``index --json``)."""
    return {
        "interrupted": interrupted, "found": report.found,
        "unsupported": report.unsupported, "nothing_supported": report.nothing_supported(),
        "library": str(library_path), "spaces": report.spaces, "added": report.added,
        "changed": report.changed, "removed": report.removed, "unchanged": report.unchanged,
        "chunks_embedded": report.chunks_embedded, "backfilled": report.backfilled,
        "chunks_cut": report.chunks_cut, "seconds": round(report.seconds, 3),
        "partial": report.partial, "skipped": report.skipped,
        "failed": [{"path": p, "reason": r} for p, r in report.failed],
        "stale": [{"path": p, "reason": r} for p, r in report.stale],
        "notes": [{"path": p, "reason": r} for p, r in report.notes],
        "links_not_followed": [{"path": p, "reason": r} for p, r in report.links],
        "spaces_not_updated": [{"space": s, "reason": r} for s, r in skipped_spaces],
    }


@dataclass
class IndexResult:
    """What a run did: the sync's report (so far, when interrupted), the spaces it left as they
    were, what it said, and the Ray actors' summary (a ``--ray`` run)."""

    report: "SyncReport"
    library_path: Path
    skipped_spaces: list[tuple[str, str]] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    ray_actors: list[dict] | None = None
    interrupted: bool = False
    #: the exit status of an interrupted run: 130 (Ctrl+C), 143 (SIGTERM during a --ray run) ...
    interrupt_code: int = EXIT_INTERRUPTED

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return self.interrupt_code
        return EXIT_PARTIAL if self.report.partial else EXIT_OK

    def to_dict(self) -> dict:
        out = sync_summary_dict(self.report, self.library_path, self.skipped_spaces, self.interrupted)
        if self.ray_actors is not None:
            out["ray_actors"] = self.ray_actors
        return out


class _Say:
    """The run's notices, kept and handed on as they are said."""

    def __init__(self, say: Callable[[Notice], None] | None):
        self.said: list[Notice] = []
        self._say = say

    def __call__(self, kind: str, text: str, *values) -> None:
        notice = Notice(kind, text, tuple(values))
        self.said.append(notice)
        if self._say is not None:
            self._say(notice)


def run_index(request: IndexRequest, *, say: Callable[[Notice], None] | None = None,
              progress: ProgressDisplay | None = None) -> IndexResult:
    """Index ``request.paths`` (none: the library's folders) into the library; see the module.

    A library the run created is removed again when the run fails (or is interrupted) before
    it holds anything, so no empty library looks like a real one.

    :raises IndexRequestError: no folders to index, or options that exclude each other.
    :raises DiskFull: the disk is full (``exit_code`` 4); every batch committed before stays.
    :raises KeyboardInterrupt: Ctrl+C before the sync started (during it, the result says so).
    """
    from hefsearch.index.library import Library
    from hefsearch.index.library_folder import library_exists, resolve_library_path

    _check_options(request)
    # Every check that needs no encoder comes first, and a library is created only once they
    # pass: a failed first run must not leave an empty library that looks like a real one.
    existed = library_exists(request.library_path)
    folder = resolve_library_path(request.library_path)
    folder_existed = folder.exists()
    _check_before_creating(request, existed, folder)
    library = Library.open(request.library_path, create=True)
    try:
        result = _index(library, request, _Say(say), progress)
        if result.interrupted:
            _discard_if_unfilled(library, existed, folder, folder_existed)
        return result
    except BaseException:
        _discard_if_unfilled(library, existed, folder, folder_existed)
        raise
    finally:
        library.close()


def _check_options(request: IndexRequest) -> None:
    if request.ray_actors and not request.ray_address:
        raise IndexRequestError("--ray-actors needs --ray ADDRESS.")
    if request.device and request.ray_address:
        raise IndexRequestError("--device picks a chip of this machine; with --ray each hailo actor takes "
                                "a chip of its own node.")


def _check_before_creating(request: IndexRequest, existed: bool, folder: Path) -> None:
    """What can be refused before a library exists: missing folders, no folders for a new
    library, no bundle anywhere."""
    from hefsearch.index.encoders import choose_bundle
    from hefsearch.index.sync import check_roots

    if request.paths:
        check_roots(request.paths)
    elif not existed:
        raise IndexRequestError(f"No folders given, and there is no library at {folder} yet: name the "
                                "folders to index, e.g. hefsearch index ~/Documents")
    if not existed:
        choose_bundle(None, request.bundle)  # no bundle anywhere: say so before creating anything


def _discard_if_unfilled(library: "Library", existed: bool, folder: Path, folder_existed: bool) -> None:
    from hefsearch.index.library_folder import discard_new_library

    if not existed and not library.document_count() and not library.space_names():
        library.close()
        discard_new_library(folder, folder_existed)


def _index(library: "Library", request: IndexRequest, say: _Say, progress: ProgressDisplay | None) -> IndexResult:
    """The run on the open library: folders, options, encoders (Ray's first), the sync."""
    from hefsearch.index.encoders import remember_default_bundle
    from hefsearch.index.sync import SyncReport

    from .long_run import LongRunNotice
    from .reindex import reindex

    library.require_writable()  # before loading encoders: a read-only library is refused at once
    paths = list(request.paths) or [str(p) for p in _present_folders(library, say)]
    options = _sync_options(library, request, say)
    remote = _start_ray(library, request) if request.ray_address else None
    choice = _open_encoders(library, request, remote)
    result = IndexResult(SyncReport(), Path(library.path), choice.skipped_spaces, say.said)
    try:
        _say_encoders(choice, say)
        watching: ContextManager = progress if progress is not None else contextlib.nullcontext()
        try:
            long_run = LongRunNotice(progress.update if progress is not None else None,
                                     lambda text, todo: say("long_run", text, todo))
            with watching:
                run = reindex(library, paths, choice, progress=long_run,
                              language_neutral=request.language_neutral, options=options)
        except KeyboardInterrupt as e:  # the report so far; SIGTERM in a --ray run carries 143
            result.report = getattr(e, "sync_report", None) or SyncReport()
            result.interrupted, result.interrupt_code = True, getattr(e, "exit_code", EXIT_INTERRUPTED)
            return result
        for line in run.notes:
            say("note", line, line)
    finally:
        choice.close()
    if choice.bundle_source in ("given", "env"):
        remember_default_bundle(choice.bundle, library.path)  # a new library then needs no --bundle
    result.report = run.report
    result.ray_actors = remote.summary() if remote is not None else None
    return result


def _present_folders(library: "Library", say: _Say) -> list[Path]:
    """The library's folders for a run without paths; a folder that is gone now (an unmounted
    disk) is left out with a warning, and what is indexed from it stays."""
    from hefsearch.base.terminal_text import for_terminal

    from .folders import library_folders

    folders = library_folders(library)
    if not folders.recorded:
        raise IndexRequestError(f"The library {for_terminal(library.path)} records no folders yet: name the "
                                "folders to index, e.g. hefsearch index ~/Documents")
    for gone in folders.gone:
        say("folder_gone", f"{gone} is not there now; what is indexed from it is kept.", str(gone))
    if not folders.present:
        raise IndexRequestError("None of the library's folders is there now: "
                                + ", ".join(for_terminal(str(r)) for r in folders.recorded))
    say("folders", "folders: " + ", ".join(map(str, folders.present)), *map(str, folders.present))
    return folders.present


def _sync_options(library: "Library", request: IndexRequest, say: _Say) -> "SyncOptions":
    """The run's options: the crawl options given, every other one as the library remembers
    it (read here, once; the defaults with ``forget_options``, the added suffixes kept), saying
    which remembered ones apply and what the run changes. The notices' values are the options
    (field, value as given) and the changes (field, before, after), for a front end to word its
    own way."""
    from hefsearch.index.crawl_options import ADDED_UP, OPTION_NAMES, CrawlOptions
    from hefsearch.index.passages import PASSAGE_TOKENS
    from hefsearch.index.sync import SyncOptions

    remembered = CrawlOptions.remembered(library.settings())
    start = CrawlOptions(extra_suffixes=remembered.extra_suffixes) if request.forget_options else remembered
    try:
        crawl = start.given(request.crawl)
    except ValueError as e:
        raise IndexRequestError(str(e)) from None
    if not request.forget_options:
        kept = remembered.differences(CrawlOptions(), leave_out=set(request.crawl) - set(ADDED_UP))
        if kept:
            say("remembered_options", "options remembered by the library: "
                + "; ".join(f"{OPTION_NAMES[k]} {remembered.value_text(k)}" for k in kept),
                *((k, remembered.given_form(k)) for k in kept))
    changes = [(k, remembered.value_text(k), crawl.value_text(k))
               for k in crawl.differences(remembered, leave_out=ADDED_UP)]
    if changes and library.document_count():
        say("options_changed", "crawl options changed (kept for later runs, 'watch' and the TUI's re-index): "
            + "; ".join(f"{OPTION_NAMES[k]}: {old} -> {new}" for k, old, new in changes), *changes)
    batch = {"batch_chunks": request.batch_chunks} if request.batch_chunks is not None else {}
    passages = None if request.passages is None else PASSAGE_TOKENS if request.passages else 0
    return SyncOptions(crawl=crawl, passage_tokens=passages, **batch)


def _start_ray(library: "Library", request: IndexRequest):
    """The Ray pool that embeds the first space, and the CPU FP32 one (hefsearch.index.ray_pool)."""
    from hefsearch.index.encoders import resolve_bundle
    from hefsearch.index.ray_pool import RayEncoder, RayPoolOptions

    options = RayPoolOptions(address=request.ray_address, backend=request.backend, actors=request.ray_actors,
                             also_fp32=request.also_fp32)
    return RayEncoder.start(library, resolve_bundle(library, request.bundle), options)


def _open_encoders(library: "Library", request: IndexRequest, remote) -> "EncoderChoice":
    """The run's encoders (the Ray pool first when there is one, closed again if opening fails)."""
    from hefsearch.index.encoders import open_sync_encoders

    try:
        return open_sync_encoders(library, bundle=request.bundle, backend=request.backend,
                                  also_fp32=request.also_fp32, first=remote,
                                  **({"device_id": request.device} if request.device else {}))
    except BaseException:
        if remote is not None:
            remote.close()
        raise


def _say_encoders(choice: "EncoderChoice", say: _Say) -> None:
    """Which bundle and encoders the run uses, and the spaces it leaves as they are."""
    if choice.bundle_note:
        say("default_bundle", choice.bundle_note, choice.bundle)
    for enc in choice.encoders:
        say("encoder", f"encoder: {enc.backend_reason} -> space {enc.space_name}", enc.backend_reason, enc.space_name)
    for name, why in choice.skipped_spaces:
        say("space_skipped", f"space {name} is not updated by this run: {why}", name, why)


def secret_rule_text() -> str:
    """Which files are never indexed as secrets (.env, keys, .ssh/ ...), for a person."""
    from hefsearch.index.crawl import secret_rule_text as rule_text

    return rule_text()


def supported_suffixes() -> str:
    """The file suffixes ``index`` reads, as a list for its help (the formats table's)."""
    from hefsearch.readers.formats import suffix_list

    return suffix_list()

"""Incremental sync: make the library match a set of folders.

For each file under the roots: unchanged (same size and mtime, or else the same sha256) is
skipped; new or changed files are extracted, chunked and embedded by every encoder into its
own space; files gone from disk are removed from SQLite and every space. A file that fails to
extract is recorded with its reason; if an earlier version of it was indexed, that version is
kept (status ``stale``) rather than lost. Indexed data is only removed when its file is gone
(or newly excluded): files under a folder that could not be listed, and files that are
unreadable or over ``--max-size`` right now, keep what is indexed, and the failure says so.

File names are kept as the OS gives them (undecodable bytes as lone surrogates) to open the
file; ``documents.path`` holds the printable form (:func:`~hefsearch.index.crawl.printable`)
and ``documents.path_bytes`` the real name when the two differ, so such a file is matched,
found unchanged and removed like any other.

A full disk (a vector segment, the FAISS index or SQLite cannot be written) stops the sync with
:class:`DiskFull`; every batch committed before it stays, and the next run continues.

Work is done in batches: a bounded number of chunks is embedded in memory, then committed in
one SQLite transaction (see :mod:`hefsearch.index.library` for why that is crash-safe). A
document is always committed whole, so an interrupted sync re-done ends with exactly the
chunks a clean run produces. Extraction and chunking run one file ahead in a background
thread while the encoder works.

Finally every space of the sync is back-filled: chunks it does not hold yet (a space added
later, e.g. ``--also-fp32`` on a second run, or vectors lost on disk) are embedded.

The stages, each one function under the write lock (:func:`_sync` only runs them):
``_open_spaces`` (spaces and settings), ``_crawl`` (stat only), ``_compare`` (crawl vs stored
rows -> a plan of work and removals), ``_remove_documents``, ``_index_files`` (a ``_Prefetch``
thread prepares files, ``_flush`` embeds and ``_commit`` writes one batch; with a :class:`BatchSubmitter` first encoder,
a Ray pool, up to ``max_in_flight`` batches are out at once and ``_land`` collects and commits
them in the order sent), ``_backfill`` and
``_record_sync`` (failures table, ``last_sync``).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import queue
import sqlite3
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from hefsearch.embed.errors import HefsearchError

from .crawl import FAILED_SKIPS, LINK_SKIPS, NOTED_SKIPS, is_under, printable
from .errors import LibraryError
from .library import Library, utc_now
from .store import is_disk_full, put_setting

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder

log = logging.getLogger("hefsearch.index")

#: chunks embedded per commit (bounded memory and bounded work lost to a crash)
DEFAULT_BATCH_CHUNKS = 256
#: how long an interrupted sync waits for the extraction thread (a daemon: it may be inside
#: one slow file, and it dies with the process)
WORKER_JOIN_S = 0.5


class DiskFull(LibraryError):
    """The disk holding the library is full; committed batches are kept."""

    title = "disk full"

    def __init__(self, library_path: Path, detail: str):
        super().__init__(
            f"Disk full: cannot write to the library {printable(library_path)} ({detail}).",
            "Free space on that disk (or index into a library on another disk with --library), "
            "then run the same command again: every batch committed so far is kept and the run "
            "continues where it stopped.")


@runtime_checkable
class BatchSubmitter(Protocol):
    """A first encoder that embeds elsewhere (:class:`~hefsearch.index.ray_pool.RayEncoder`):
    a batch is submitted now and collected later; at most ``max_in_flight`` are out at once and
    they are committed in the order sent, so a run commits the same batches as a local one.
    ``collect`` gives {space name: vectors}: the first space's and any other space it embeds
    with them (the CPU FP32 one on Ray actors), which are then not embedded here."""

    max_in_flight: int

    def submit_passages(self, texts: list[str]) -> object: ...

    def collect(self, ticket: object) -> dict[str, np.ndarray]: ...


@dataclass
class ProgressEvent:
    phase: str  # "scan", "remove", "index", "backfill", "done"
    files_total: int = 0  # files found under the roots
    files_done: int = 0  # files whose fate is settled (unchanged, indexed, failed)
    files_todo: int = 0  # files that needed work (new or changed)
    chunks_done: int = 0  # chunks embedded (by the first encoder) so far
    chunks_per_s: float = 0.0
    #: seconds left, from the characters of text still to embed and the rate so far
    eta_s: float | None = None
    path: str | None = None
    failed: int = 0
    #: characters of text embedded so far, and still to embed (estimated for files not read yet)
    text_done: int = 0
    text_left: int = 0


@dataclass
class SyncReport:
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    chunks_embedded: int = 0
    seconds: float = 0.0
    #: files that now fail to extract but whose previous version stays indexed
    stale: list[tuple[str, str]] = field(default_factory=list)
    #: skipped entries worth telling (special files, symlink loops, broken links)
    notes: list[tuple[str, str]] = field(default_factory=list)
    #: symlinks not followed, the reason naming the target
    links: list[tuple[str, str]] = field(default_factory=list)
    #: chunks embedded into a space that lacked them (space added later, lost vectors)
    backfilled: int = 0
    chunks_cut: int = 0
    spaces: list[str] = field(default_factory=list)
    encode_seconds: float = 0.0
    #: supported files found under the roots (indexed, unchanged or failed)
    found: int = 0
    #: unsupported files by suffix ("(none)" for names without one), and the first few of them
    unsupported: dict[str, int] = field(default_factory=dict)
    unsupported_examples: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """Some files failed but the rest was indexed."""
        return bool(self.failed or self.stale)

    def nothing_supported(self) -> str | None:
        """Why a run found nothing to index, or None: '0 files supported: 15 unsupported
        (.py 9, .c 6), e.g. a.py, b.c'."""
        if self.found:
            return None
        n = sum(self.unsupported.values())
        if not n:
            return "0 files found under the folders given."
        by = ", ".join(f"{k} {v}" for k, v in sorted(self.unsupported.items(), key=lambda kv: (-kv[1], kv[0]))[:6])
        return (f"0 files supported: {n} unsupported ({by}), e.g. {', '.join(self.unsupported_examples)}.")


@dataclass
class _Job:
    path: str  # as the OS gave it (may hold surrogates): to open the file
    size: int
    mtime_ns: int
    kind: str
    doc_id: int | None  # existing document row
    old_status: str | None
    sha256: str | None = None
    same_content: bool = False
    chunks: list = field(default_factory=list)
    #: each chunk's language ('' when unsure), detected once here and stored with it
    langs: list = field(default_factory=list)
    encoding: str | None = None
    error: str | None = None

    @property
    def shown(self) -> str:
        return printable(self.path)


def _path_bytes(path: str) -> bytes | None:
    """The real name bytes for ``documents.path_bytes`` when the printable form differs."""
    return None if printable(path) == path else os.fsencode(path)


def _real_path(shown: str, raw: bytes | None) -> str:
    return shown if raw is None else os.fsdecode(raw)


def _disk_full_detail(error: BaseException) -> str | None:
    """What says the disk is full in ``error`` or its causes, or None."""
    seen = 0
    e: BaseException | None = error
    while e is not None and seen < 10:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            return e.strerror or os.strerror(e.errno)
        if isinstance(e, sqlite3.Error) and is_disk_full(e):
            return "database or disk is full"
        if isinstance(e, RuntimeError) and any(m in str(e) for m in (os.strerror(errno.ENOSPC), "disk is full")):
            return os.strerror(errno.ENOSPC)  # FAISS writes raise RuntimeError with the C message
        e = e.__cause__ or e.__context__
        seen += 1
    return None


@dataclass
class SyncOptions:
    """The crawl and batching options of one sync."""

    include_hidden: bool = False
    excludes: Sequence[str] = ()
    max_bytes: int = 0
    overlap_tokens: int = 32
    batch_chunks: int = DEFAULT_BATCH_CHUNKS
    follow_links: bool = False
    #: suffix -> kind, besides the built-in ones (the library's setting plus this run's)
    extra_suffixes: dict[str, str] = field(default_factory=dict)


#: examples of unsupported files a report keeps
UNSUPPORTED_EXAMPLES = 5


def sync(
    library: Library,
    roots: Sequence[Path],
    encoders: Sequence["Encoder"],
    *,
    include_hidden: bool = False,
    excludes: Sequence[str] = (),
    max_bytes: int | None = None,
    overlap_tokens: int = 32,
    progress: Callable[[ProgressEvent], None] | None = None,
    batch_chunks: int = DEFAULT_BATCH_CHUNKS,
    follow_links: bool = False,
    extra_suffixes: dict[str, str] | None = None,
    paths: Sequence[Path] | None = None,
) -> SyncReport:
    """Bring the library up to date with ``roots``; see the module docstring.

    ``extra_suffixes`` (suffix -> kind) are added to the library's ``extra_suffixes`` setting,
    which every sync reads: a suffix once added stays indexed (a run without it would remove
    those files). The roots are added to the library's recorded folders (``roots``), which
    ``hefsearch index`` without PATHS and the TUI's re-index sync.

    ``paths`` (files or folders below the roots, e.g. what ``hefsearch watch`` saw change)
    limits the run to them: only they are crawled (:func:`~hefsearch.index.crawl.crawl_paths`,
    same rules) and only documents at or below them can be removed; the rest of the library
    is left as it is.

    :raises DiskFull: the library's disk is full (batches committed before stay).
    :raises KeyboardInterrupt: Ctrl+C, with the report of what was done as ``sync_report``
        (every committed batch stays).
    """
    from .crawl import DEFAULT_MAX_BYTES

    if not encoders:
        raise ValueError("sync needs at least one encoder")
    stored = library.settings().get("extra_suffixes") or {}
    opts = SyncOptions(include_hidden=include_hidden, excludes=excludes,
                       max_bytes=DEFAULT_MAX_BYTES if max_bytes is None else max_bytes,
                       overlap_tokens=overlap_tokens, batch_chunks=batch_chunks, follow_links=follow_links,
                       extra_suffixes={**stored, **(extra_suffixes or {})})
    resolved = check_roots(roots)
    report = SyncReport()
    try:
        only = None if paths is None else [Path(os.path.abspath(os.path.expanduser(os.fspath(p)))) for p in paths]
        return _sync(library, resolved, encoders, opts, progress or (lambda ev: None), report, only)
    except KeyboardInterrupt as e:
        e.sync_report = report  # what was done: `index --json` prints it
        raise
    except Exception as e:
        detail = _disk_full_detail(e)
        if detail is None:
            raise
        raise DiskFull(library.path, detail) from None


def check_roots(roots: Sequence) -> list[Path]:
    """The roots resolved; a HefsearchError naming the first one that does not exist."""
    resolved = []
    for r in roots:
        p = Path(os.path.expanduser(os.fspath(r)))
        if not p.exists():
            raise HefsearchError(f"{printable(p)} does not exist.", "Check the path; nothing was changed.")
        resolved.append(p.resolve())
    return resolved


def _sync(library: Library, resolved: list[Path], encoders, opts: SyncOptions, emit,
          report: SyncReport, only: list[Path] | None = None) -> SyncReport:
    """The stages, under the write lock: spaces, crawl, compare, remove, index, back-fill, record."""
    t0 = time.perf_counter()
    root_strs = [str(r) for r in resolved]
    with library.write_lock(wait=True):  # bounded (LOCK_WAIT_S): a back-fill between windows lets go
        spaces = _open_spaces(library, encoders, report, root_strs, opts)
        crawled = _crawl(resolved, opts, emit, only)
        plan = _compare(crawled, _stored_documents(library, root_strs, only), report)
        report.found = len(plan.found)
        if plan.gone:
            emit(ProgressEvent("remove", files_total=len(plan.found)))
            _remove_documents(library, spaces, [plan.existing[p][0] for p in plan.gone])
            report.removed = len(plan.gone)
        # new and changed files: extract + chunk ahead in a thread, embed and commit in batches
        state = _Progress(emit, len(plan.found), plan.todo, report)
        state.files_done = len(plan.found) - len(plan.todo)
        state.tick(force=True)
        if plan.todo:
            _index_files(library, spaces, encoders, plan.todo, report, state, overlap_tokens=opts.overlap_tokens,
                         batch_chunks=opts.batch_chunks, max_bytes=opts.max_bytes,
                         old_sha={p: plan.existing[p][3] for p in plan.existing})
        for sp, enc in zip(spaces, encoders):  # chunks a space does not hold yet
            report.backfilled += _backfill(library, sp, enc, opts.batch_chunks, state)
        fill_languages(library)
        _record_sync(library, root_strs, plan.crawl_failures, report, only)
        threshold = library.hnsw_threshold()
        for sp in spaces:
            sp.maintain(hnsw_threshold=threshold, factory_override=library.index_factory_setting(sp.info.dim))
    report.seconds = time.perf_counter() - t0
    state.phase = "done"
    state.tick(force=True)
    return report


def _open_spaces(library: Library, encoders, report: SyncReport, root_strs: list[str],
                 opts: SyncOptions) -> list:
    """Consumes the encoders; produces their spaces (created when new) and records the bundle,
    the folders (added to ``roots``), the extra suffixes, the start of this run
    (``sync_started``: a run that never reaches ``last_sync`` was interrupted) and, on a first
    sync, the default space in the library's settings."""
    spaces = [library.ensure_space(enc) for enc in encoders]
    report.spaces = [sp.info.name for sp in spaces]
    settings = library.settings()
    shown = [printable(r) for r in root_strs]
    new_settings = {"bundle": str(Path(encoders[0].bundle.path).resolve()),
                    "roots": merge_roots(library.recorded_roots(), shown),
                    "sync_started": {"at": utc_now(), "roots": shown}}
    if opts.extra_suffixes != (settings.get("extra_suffixes") or {}):
        new_settings["extra_suffixes"] = opts.extra_suffixes
    if not settings.get("default_space"):
        new_settings["default_space"] = _default_space([sp.info for sp in spaces])
    library.set_settings(**new_settings)
    return spaces


def _default_space(infos) -> str:
    """The first encoder's space, unless it is an 8-bit *simulation* and the run also fills the
    FP32 space: a simulation shows what an NPU would cost, and on a machine without one FP32
    is the better answer (the demo indexes both)."""
    from hefsearch.embed.space_names import FP32_SPACE, NPU_SIM, kind_of

    names = [i.name for i in infos]
    if kind_of(names[0], infos[0].kind) == NPU_SIM and FP32_SPACE in names:
        return FP32_SPACE
    return names[0]


def merge_roots(recorded: Sequence[str], new: Sequence[str]) -> list[str]:
    """The recorded folders plus ``new``, in order, without a folder that lies inside another."""
    out: list[str] = []
    for r in [*recorded, *new]:
        if r in out or any(is_under(r, o) for o in out):
            continue
        out = [o for o in out if not is_under(o, r)] + [r]
    return out


@dataclass
class _Crawled:
    found: list  # crawl.FoundFile
    skipped: list  # crawl.SkippedFile


def _crawl(resolved: list[Path], opts: SyncOptions, emit, only: list[Path] | None = None) -> _Crawled:
    """Consumes the roots (or ``only`` these paths below them); produces what is under them
    (stat only, nothing is read)."""
    from .crawl import FoundFile, crawl, crawl_paths

    out = _Crawled([], [])
    emit(ProgressEvent("scan"))
    options = dict(include_hidden=opts.include_hidden, excludes=opts.excludes, max_bytes=opts.max_bytes,
                   follow_links=opts.follow_links, extra_suffixes=opts.extra_suffixes)
    items = crawl(resolved, **options) if only is None else crawl_paths(resolved, only, **options)
    for item in items:
        (out.found if isinstance(item, FoundFile) else out.skipped).append(item)
    return out


def _stored_documents(library: Library, root_strs: list[str], only: list[Path] | None = None) -> dict[str, tuple]:
    """The document rows under the roots (and at or below ``only``'s paths, when given), keyed
    by real path (as the crawler gives it): (id, size, mtime_ns, sha256, status, error)."""
    select = "SELECT path, path_bytes, id, size, mtime_ns, sha256, status, error FROM documents"
    if only is None:
        rows = library.query(select)
    else:  # by path prefix: a watcher's run reads its few rows, not the whole table
        rows = []
        for p in only:
            shown = printable(p)
            rows += library.query(f"{select} WHERE path = ? OR path LIKE ? ESCAPE '\\'",
                                  [shown, _like_prefix(shown)])
    only_strs = None if only is None else [str(p) for p in only]
    existing: dict[str, tuple] = {}
    for row in rows:
        real = _real_path(row[0], row[1])
        if any(is_under(real, r) for r in root_strs) and (
                only_strs is None or any(is_under(real, p) for p in only_strs)):
            existing[real] = row[2:]
    return existing


@dataclass
class _Plan:
    """The compare stage's result: what needs work and what goes."""

    found: list  # crawl.FoundFile, name clashes dropped
    todo: list[_Job]  # new or changed files
    gone: list[str]  # real paths whose rows (and vectors) are removed
    existing: dict[str, tuple]  # see _stored_documents
    crawl_failures: list[tuple[str, str, str]]  # rows for the failures table


def _compare(crawled: _Crawled, existing: dict[str, tuple], report: SyncReport) -> _Plan:
    """Consumes the crawl and the stored rows; produces the :class:`_Plan`. Unchanged files
    (same size and mtime) are counted here; their earlier failures are reported again."""
    protected, crawl_failures = _account_skips(crawled.skipped, existing, report)
    found = _drop_name_clashes(crawled.found, report, crawl_failures)
    found_paths = {str(f.path) for f in found}
    todo: list[_Job] = []
    for f in found:
        path = str(f.path)
        old = existing.get(path)
        if old is not None and old[1] == f.size and old[2] == f.mtime_ns:
            status, error = old[4], old[5]
            if status == "failed":
                report.failed.append((printable(path), error or "failed before"))
            elif status == "stale":
                report.stale.append((printable(path), error or "failed before"))
            else:
                report.unchanged += 1
            continue
        todo.append(_Job(path, f.size, f.mtime_ns, f.kind, None if old is None else old[0],
                         None if old is None else old[4]))
    gone = [p for p in existing if p not in found_paths and not _is_protected(p, existing[p][4], protected)]
    return _Plan(found, todo, gone, existing, crawl_failures)


def _record_sync(library: Library, root_strs: list[str], crawl_failures: list[tuple[str, str, str]],
                 report: SyncReport, only: list[Path] | None = None) -> None:
    """Replaces the failures under the roots (or ``only``'s paths) with this run's and stores
    the run as last_sync (``partial`` when it covered only some paths)."""
    shown_roots = [printable(r) for r in root_strs]
    cleared = shown_roots if only is None else [printable(p) for p in only]
    with library.transaction():
        for r in cleared:
            library.db.execute("DELETE FROM failures WHERE path = ? OR path LIKE ? ESCAPE '\\'",
                               [r, _like_prefix(r)])
        library.db.conn.executemany(
            "INSERT OR REPLACE INTO failures(path, reason, counted_as, seen_at) VALUES (?,?,?,?)",
            [(p, reason, kind, utc_now()) for p, reason, kind in crawl_failures])
        put_setting(library.db, "last_sync", {
            "at": utc_now(), "roots": shown_roots, "skipped": report.skipped,
            "added": report.added, "changed": report.changed, "removed": report.removed,
            "failed": len(report.failed), "chunks_embedded": report.chunks_embedded,
            **({} if only is None else {"partial": True, "paths": len(only)})})


def _account_skips(skipped: list, existing: dict[str, tuple], report: SyncReport
                   ) -> tuple[dict[str, bool], list[tuple[str, str, str]]]:
    """Sort the crawl's skips into the report and the failures table.

    Returns the paths whose indexed data must stay (real path -> True for a folder, whose
    whole subtree stays) and the failure rows (printable path, reason, kind). A file that is
    unreadable or over the size limit now keeps its indexed version: a mistyped --max-size
    must not empty the library.
    """
    protected: dict[str, bool] = {}
    rows: list[tuple[str, str, str]] = []
    for item in skipped:
        kind = item.counted_as
        report.skipped[kind] = report.skipped.get(kind, 0) + 1
        real, shown, reason = str(item.path), printable(item.path), printable(item.reason)
        if kind in FAILED_SKIPS:
            protected[real] = True
            old = existing.get(real)
            if old is not None and old[4] in ("ok", "stale"):
                report.stale.append((shown, reason))
                reason = f"{reason}; the previously indexed version is kept"
            else:
                report.failed.append((shown, reason))
        elif kind in LINK_SKIPS:
            report.links.append((shown, reason))
        elif kind in NOTED_SKIPS:
            report.notes.append((shown, reason))
        else:
            if kind == "unsupported":
                suffix = Path(shown).suffix.lower() or "(none)"
                report.unsupported[suffix] = report.unsupported.get(suffix, 0) + 1
                if len(report.unsupported_examples) < UNSUPPORTED_EXAMPLES:
                    report.unsupported_examples.append(Path(shown).name)
            continue
        rows.append((shown, reason, kind))
    return protected, rows


def _drop_name_clashes(found: list, report: SyncReport, failures: list[tuple[str, str, str]]) -> list:
    """Two files whose printable names are equal (``caf\\xe9.txt`` literally, and ``caf`` +
    byte 0xE9 + ``.txt``) would share one row: the second one is reported, not indexed."""
    kept, by_shown = [], {}
    for f in found:
        shown = printable(f.path)
        first = by_shown.setdefault(shown, f.path)
        if first != f.path:
            reason = "its name, made printable, is the same as another file's; rename one of them"
            report.failed.append((shown, reason))
            failures.append((shown, reason, "unreadable"))
            continue
        kept.append(f)
    return kept


def _is_protected(path: str, status: str, protected: dict[str, bool]) -> bool:
    """Keep ``path``'s row: it (or a folder above it) failed this time, and it holds an
    indexed version (a row that never indexed anything is replaced by the failure record)."""
    if not protected:
        return False
    if path in protected:
        return status in ("ok", "stale")
    parent = os.path.dirname(path)
    while True:
        if parent in protected:
            return True
        up = os.path.dirname(parent)
        if up == parent:
            return False
        parent = up


def _like_prefix(root: str) -> str:
    esc = root.rstrip(os.sep).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return esc + os.sep + "%"


class _Progress:
    """Counts for progress events; the ETA from the characters of text still to embed (files
    not read yet are estimated from their size and the text per byte seen so far for their
    kind), at the rate text has been embedded so far. Counting files instead misled on real
    folders: one 8 MB page among small notes took as long as thousands of them."""

    def __init__(self, emit, files_total: int, todo: Sequence[_Job], report: SyncReport,
                 clock: Callable[[], float] = time.perf_counter):
        self.emit = emit
        self.files_total = files_total
        self.files_todo = len(todo)
        self.files_done = 0
        self.todo_done = 0
        self.chunks = 0
        self.report = report
        self.phase = "index"
        self.path: str | None = None
        self.clock = clock
        self.started = clock()
        self._last = 0.0
        #: bytes of the files not read yet, by (kind, compressed)
        self._unread: dict[tuple, int] = {}
        for job in todo:
            key = _size_key(job)
            self._unread[key] = self._unread.get(key, 0) + job.size
        self._ratio: dict[tuple, list[int]] = {}  # key -> [text chars, file bytes] of read files
        self.text_read = 0  # chars of files read, not embedded yet
        self.text_done = 0  # chars embedded
        self._batch_chars = 0.0  # chars per chunk of the batch being embedded

    def read(self, job: _Job) -> None:
        """A file was extracted: its text replaces the estimate from its size."""
        key = _size_key(job)
        self._unread[key] = max(0, self._unread.get(key, 0) - job.size)
        chars = sum(len(c.text) for c, _ in job.chunks)
        seen = self._ratio.setdefault(key, [0, 0])
        seen[0] += chars
        seen[1] += job.size
        self.text_read += chars

    def embedding(self, jobs: Sequence[_Job]) -> None:
        texts = [len(c.text) for job in jobs for c, _ in job.chunks]
        self._batch_chars = sum(texts) / len(texts) if texts else 0.0

    def embedded(self, jobs: Sequence[_Job]) -> None:
        chars = sum(len(c.text) for job in jobs for c, _ in job.chunks)
        self.text_read -= chars
        self.text_done += chars

    def text_left(self) -> int:
        chars, size = (sum(v) for v in zip(*self._ratio.values())) if self._ratio else (0, 0)
        overall = chars / size if size else 1.0
        unread = 0.0
        for key, n in self._unread.items():
            c, b = self._ratio.get(key, (0, 0))
            unread += n * (c / b if b else overall)
        return int(self.text_read + unread)

    def tick(self, force: bool = False, extra_chunks: int = 0) -> None:
        now = self.clock()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        elapsed = max(now - self.started, 1e-6)
        chunks = self.chunks + extra_chunks
        done = self.text_done + int(extra_chunks * self._batch_chars)
        left = max(0, self.text_left() - int(extra_chunks * self._batch_chars))
        eta = None
        if done and self.files_todo and self.phase == "index":
            eta = elapsed / done * left
        self.emit(ProgressEvent(
            self.phase, files_total=self.files_total, files_done=self.files_done,
            files_todo=self.files_todo, chunks_done=chunks, chunks_per_s=chunks / elapsed,
            eta_s=eta, path=self.path, failed=len(self.report.failed), text_done=done, text_left=left))


def _size_key(job: _Job) -> tuple:
    """Files whose text per byte is alike: same kind, compressed or not."""
    from .filetypes import compression_of

    return job.kind, compression_of(job.path) is not None


def _prepare(job: _Job, first: "Encoder", overlap_tokens: int, max_bytes: int, old_sha: str | None) -> _Job:
    """Hash, extract and chunk one file (runs in the background thread)."""
    from .chunk import chunk_text
    from .extract import ExtractionError, extract, read_regular_file

    try:
        # Read through the extractor's guard: a file swapped for a FIFO since the crawl must
        # not block the sync.
        job.sha256 = hashlib.sha256(read_regular_file(Path(job.path), max_bytes=max_bytes)).hexdigest()
        if old_sha is not None and job.sha256 == old_sha and job.old_status == "ok":
            job.same_content = True
            return job
        doc = extract(Path(job.path), kind=job.kind, max_bytes=max_bytes)
        job.kind, job.encoding = doc.kind, doc.encoding
        chunks = chunk_text(doc, first.count_tokens, first.max_tokens, overlap_tokens)
        lines = _line_numbers(doc.text, [c.start for c in chunks])
        job.chunks = [(c, ln) for c, ln in zip(chunks, lines)]
        job.langs = chunk_languages([c.text for c in chunks])
    except ExtractionError as e:
        job.error = printable(e.message)
    except OSError as e:
        job.error = printable(f"cannot read: {e.strerror or e}")
    except Exception as e:  # an extractor bug must not stop the whole sync
        log.debug("unexpected error on %s", job.shown, exc_info=True)
        job.error = printable(f"unexpected error: {type(e).__name__}: {e}")
    return job


def _line_numbers(text: str, starts: list[int]) -> list[int]:
    out, line, pos = [], 1, 0
    for s in starts:  # starts are ascending
        if s < pos:
            line, pos = 1, 0
        line += text.count("\n", pos, s)
        pos = s
        out.append(line)
    return out


class _Prefetch:
    """Hashing, extraction and chunking one file ahead of the encoder, in a daemon thread;
    the prepared jobs come out of a bounded queue in ``todo`` order (None ends them)."""

    def __init__(self, todo: list[_Job], first: "Encoder", overlap_tokens: int, max_bytes: int,
                 old_sha: dict[str, str | None]):
        self.jobs: queue.Queue = queue.Queue(maxsize=32)
        self.stopped = threading.Event()
        self._args = (todo, first, overlap_tokens, max_bytes, old_sha)
        self.worker = threading.Thread(target=self._produce, name="hefsearch-extract", daemon=True)
        self.worker.start()

    def _hand_over(self, item) -> None:
        # never block once the consumer has stopped (Ctrl+C): it no longer drains the queue
        while not self.stopped.is_set():
            try:
                self.jobs.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _produce(self) -> None:
        todo, first, overlap_tokens, max_bytes, old_sha = self._args
        try:
            for job in todo:
                if self.stopped.is_set():
                    return
                self._hand_over(_prepare(job, first, overlap_tokens, max_bytes, old_sha.get(job.path)))
        finally:
            self._hand_over(None)

    def stop(self) -> None:
        """Let the thread go; wait at most WORKER_JOIN_S (it may be inside one slow file)."""
        self.stopped.set()
        self.worker.join(timeout=WORKER_JOIN_S)


def _index_files(library, spaces, encoders, todo, report, state, *, overlap_tokens, batch_chunks,
                 max_bytes, old_sha) -> None:
    """Consumes the files that need work; embeds and commits them in batches of about
    ``batch_chunks`` chunks, documents whole. A :class:`BatchSubmitter` first encoder (a Ray
    pool) gets up to ``max_in_flight`` batches at once; they are committed in the order sent."""
    ahead = _Prefetch(todo, encoders[0], overlap_tokens, max_bytes, old_sha)
    remote = encoders[0] if isinstance(encoders[0], BatchSubmitter) else None
    sent: deque = deque()  # (jobs, ticket) out at the remote encoder, oldest first
    pending: list[_Job] = []
    pending_chunks = 0

    def send(jobs: list[_Job]) -> None:
        if remote is None:
            _flush(library, spaces, encoders, jobs, report, state)
            return
        while len(sent) >= remote.max_in_flight:  # back-pressure: commit the oldest first
            _land(library, spaces, encoders, sent.popleft(), report, state)
        texts = [c.text for job in jobs for c, _ in job.chunks]
        sent.append((jobs, remote.submit_passages(texts) if texts else None))

    try:
        while True:
            job = ahead.jobs.get()
            if job is None:
                break
            state.path = job.shown
            state.read(job)
            pending.append(job)
            pending_chunks += len(job.chunks)
            if pending_chunks >= batch_chunks:
                send(pending)
                pending, pending_chunks = [], 0
            elif not job.chunks:
                state.tick()
        if pending:
            send(pending)
        while sent:
            _land(library, spaces, encoders, sent.popleft(), report, state)
    finally:
        ahead.stop()


def _land(library: Library, spaces, encoders, sent: tuple, report: SyncReport, state: _Progress) -> None:
    """Collect one batch from the remote first encoder, then embed the other spaces and commit."""
    jobs, ticket = sent
    t = time.perf_counter()
    ready = encoders[0].collect(ticket) if ticket is not None else {}  # no texts: nothing to embed
    report.encode_seconds += time.perf_counter() - t
    _flush(library, spaces, encoders, jobs, report, state, ready=ready)


def _flush(library: Library, spaces, encoders, jobs: list[_Job], report: SyncReport, state: _Progress,
           ready: dict[str, np.ndarray] | None = None) -> None:
    """Embed one batch (``ready``: vectors already computed, by space name) and commit it."""
    texts = [c.text for job in jobs for c, _ in job.chunks]
    vectors = []
    for i, enc in enumerate(encoders):
        if ready and enc.space_name in ready:
            vectors.append(ready[enc.space_name])
            continue
        derived = _derived_vectors(enc, encoders[:i], vectors, texts)
        if derived is not None:
            vectors.append(derived)
            continue
        if i == 0:
            state.embedding(jobs)
            enc.on_batch = lambda n: state.tick(extra_chunks=n)
        try:
            t = time.perf_counter()
            vectors.append(enc.encode_passages(texts) if texts else np.empty((0, enc.dim), np.float32))
            report.encode_seconds += time.perf_counter() - t
        finally:
            enc.on_batch = None
    added, removed = _commit(library, spaces, jobs, vectors)
    for sp, vecs in zip(spaces, vectors):
        sp.committed(added, vecs, removed)
    for job in jobs:
        if job.error is not None:
            if job.old_status in ("ok", "stale"):
                report.stale.append((job.shown, job.error))
            else:
                report.failed.append((job.shown, job.error))
        elif job.same_content:
            report.unchanged += 1
        elif job.doc_id is None or job.old_status == "failed":
            report.added += 1
        else:
            report.changed += 1
        report.chunks_cut += sum(1 for c, _ in job.chunks if c.cut)
    report.chunks_embedded += len(texts)
    state.embedded(jobs)
    state.chunks += len(texts)
    state.files_done += len(jobs)
    state.todo_done += len(jobs)
    state.tick(force=True)


def _derived_vectors(enc, earlier, vectors: list[np.ndarray], texts: list[str]) -> np.ndarray | None:
    """A post-transformed space's vectors (the language-neutral one) made from the vectors of its
    base encoder already computed for this batch, or None. The encoder itself would run the
    whole model again on the same texts and then apply the same transform (embed/encoder.py):
    deriving halves the CPU time of indexing a multilingual library, and with Ray it uses the
    FP32 vectors the actors sent."""
    pt = getattr(enc, "post_transform", None)
    if pt is None:
        return None
    # the base encoder's fingerprint parts are its own without the post-transform: equal parts,
    # equal raw vectors (embed/encoder.py Encoder.fingerprint_parts)
    base = {**enc.fingerprint_parts(), "post_transform": None}
    for other, vecs in zip(earlier, vectors):
        if other.fingerprint_parts() == base:
            return enc.transformed(vecs, texts)
    return None


def _commit(library: Library, spaces, jobs: list[_Job], vectors: list[np.ndarray]) -> tuple[np.ndarray, list[int]]:
    """One transaction for a batch of whole documents; returns (new chunk ids, removed ids)."""
    now = utc_now()
    conn = library.db.conn
    staged: list[tuple] = []
    removed: list[int] = []
    new_ids: list[int] = []
    try:
        with library.transaction():
            for job in jobs:
                gone, added = _write_job(conn, job, now)
                removed += gone
                new_ids += added
            ids = np.asarray(new_ids, np.int64)
            if len(ids):
                # vectors first (durable), then the members that make them real, in this transaction
                for sp, vecs in zip(spaces, vectors):
                    staged.append((sp, sp.stage(ids, vecs)))
                for sp in spaces:
                    conn.executemany("INSERT INTO space_members(space, chunk_id) VALUES (?, ?)",
                                     [(sp.info.name, int(i)) for i in ids])
    except BaseException:
        for sp, seg in staged:
            try:
                sp.unstage(seg)
            except Exception:  # pragma: no cover - reconcile removes it at the next open
                pass
        raise
    return ids, removed


def _write_job(conn, job: _Job, now: str) -> tuple[list[int], list[int]]:
    """One document's rows, inside the batch's transaction; returns (removed chunk ids, new
    chunk ids in ordinal order). A failing file keeps its indexed version, marked stale."""
    if job.error is not None:
        if job.old_status in ("ok", "stale"):  # keep the indexed version, say why
            conn.execute("UPDATE documents SET status='stale', error=?, size=?, mtime_ns=? "
                         "WHERE id=?", [job.error, job.size, job.mtime_ns, job.doc_id])
        else:
            _upsert_document(conn, job, "failed", 0, 0, now)
        return [], []
    if job.same_content:
        conn.execute("UPDATE documents SET size=?, mtime_ns=? WHERE id=?",
                     [job.size, job.mtime_ns, job.doc_id])
        return [], []
    removed: list[int] = []
    if job.doc_id is not None:
        removed = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE doc_id=?", [job.doc_id])]
        conn.execute("DELETE FROM chunks WHERE doc_id=?", [job.doc_id])
    cut = sum(1 for c, _ in job.chunks if c.cut)
    doc_id = _upsert_document(conn, job, "ok", len(job.chunks), cut, now)
    langs = job.langs if len(job.langs) == len(job.chunks) else [None] * len(job.chunks)
    conn.executemany(
        'INSERT INTO chunks(doc_id, ordinal, text, start, "end", page, line, tokens, cut, lang) '
        "VALUES (?,?,?,?,?,?,?,?,?,?)",
        [(doc_id, c.ordinal, c.text, c.start, c.end, c.page, ln, c.tokens, int(c.cut), lang)
         for (c, ln), lang in zip(job.chunks, langs)])
    if not job.chunks:
        return removed, []
    return removed, [r[0] for r in conn.execute("SELECT id FROM chunks WHERE doc_id=? ORDER BY ordinal", [doc_id])]


def _upsert_document(conn, job: _Job, status: str, nchunks: int, cut: int, now: str) -> int:
    conn.execute(
        "INSERT INTO documents(path, path_bytes, size, mtime_ns, sha256, kind, status, error, chunks, "
        "cut_chunks, encoding, indexed_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(path) DO UPDATE "
        "SET path_bytes=excluded.path_bytes, size=excluded.size, mtime_ns=excluded.mtime_ns, "
        "sha256=excluded.sha256, kind=excluded.kind, status=excluded.status, error=excluded.error, "
        "chunks=excluded.chunks, cut_chunks=excluded.cut_chunks, encoding=excluded.encoding, "
        "indexed_at=excluded.indexed_at",
        [job.shown, _path_bytes(job.path), job.size, job.mtime_ns, job.sha256, job.kind, status,
         job.error, nchunks, cut, job.encoding, now])
    return conn.execute("SELECT id FROM documents WHERE path=?", [job.shown]).fetchone()[0]


def _remove_documents(library: Library, spaces, doc_ids: list[int]) -> None:
    removed: list[int] = []
    with library.transaction():
        for i in range(0, len(doc_ids), 500):
            part = doc_ids[i : i + 500]
            marks = ",".join("?" * len(part))
            removed += [r[0] for r in library.db.execute(
                f"SELECT id FROM chunks WHERE doc_id IN ({marks})", part)]
            library.db.execute(f"DELETE FROM documents WHERE id IN ({marks})", part)  # cascades
    for sp in spaces:
        sp.forget(removed)


def _backfill(library: Library, space, encoder, batch_chunks: int, state: _Progress) -> int:
    total = 0
    while True:
        rows = library.query(
            "SELECT c.id, c.text FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM space_members m "
            "WHERE m.space = ? AND m.chunk_id = c.id) ORDER BY c.id LIMIT ?",
            [space.info.name, batch_chunks])
        if not rows:
            return total
        state.phase = "backfill"
        ids = np.array([r[0] for r in rows], np.int64)
        vecs = encoder.encode_passages([r[1] for r in rows])
        space.add(ids, vecs)
        total += len(ids)
        state.chunks += len(ids)
        state.tick(force=True)


def chunk_languages(texts: list[str]) -> list[str | None]:
    """The language of each text for ``chunks.lang``: a code, ``''`` when too unsure to tell,
    None when languages cannot be identified here (left to a later sync)."""
    from hefsearch.embed.language import identify_all

    try:
        return [lang or "" for lang in identify_all(texts)]
    except HefsearchError as e:
        log.info("chunk languages not detected: %s", e.message)
        return [None] * len(texts)


def fill_languages(library: Library, batch: int = 2000) -> int:
    """Detect the language of chunks stored without one (a library written before
    ``chunks.lang`` existed): once, in batches, under the caller's write lock."""
    done = 0
    while True:
        rows = library.query("SELECT id, text FROM chunks WHERE lang IS NULL ORDER BY id LIMIT ?", [batch])
        if not rows:
            return done
        langs = chunk_languages([r[1] for r in rows])
        if langs and langs[0] is None:
            return done
        with library.transaction():
            library.db.conn.executemany("UPDATE chunks SET lang = ? WHERE id = ?",
                                        [(lang, r[0]) for r, lang in zip(rows, langs)])
        done += len(rows)

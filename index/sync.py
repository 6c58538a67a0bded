"""Incremental sync: make the library match a set of folders.

Unchanged files (same size and mtime, else the same sha256) are skipped; new or changed ones are
extracted, chunked and embedded by every encoder into its own space; files gone from disk are
removed from SQLite and every space. A file that fails keeps its indexed version (``stale``) and
its reason; indexed data goes only with its file (or a new exclusion), never because a folder or
file cannot be read right now. Names stay as the OS gives them; ``documents.path`` is printable
and ``path_bytes`` keeps the real name. A full disk stops the sync with :class:`DiskFull`; the
batches committed before it stay.

Batches of whole documents are committed one transaction each (crash safety:
:mod:`hefsearch.index.library`), so a re-run after an interruption ends as a clean run would.
Finally every space is back-filled with the chunks it lacks.

The stages run under the write lock (:func:`_sync`), each in the module of its seam:
``_open_spaces``; ``sync_plan`` (crawl, compare); ``_remove_documents``; ``sync_batches``
(prepare one file ahead, embed, commit; a Ray pool's batches in flight); ``_backfill``;
``_record_sync``. Types in ``sync_types``, progress in ``sync_progress``, SQL in ``documents``.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from hefsearch.base.errors import HefsearchError
from hefsearch.base.terminal_text import printable

from . import documents
from .containers import attach_members, split_members
from .crawl import is_under
from hefsearch.readers.formats import CONTAINER_KINDS

from .crawl_options import CrawlOptions
from .library import Library, utc_now
from .ocr_cache import OcrPageCache
from .store import is_disk_full, put_setting
from .passages import library_passage_tokens, stored_sections
from .sync_batches import Target, encode_stoppable, index_files
from .sync_plan import compare, crawl_stage
from .sync_prepare import chunk_languages
from .sync_progress import Progress
from .sync_types import (DEFAULT_BATCH_CHUNKS, BatchSubmitter, DiskFull, Job, ProgressEvent, SyncOptions,
                         SyncReport, real_path)

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder

log = logging.getLogger("hefsearch.index")

#: what callers import from here (the types live in sync_types)
__all__ = ["DEFAULT_BATCH_CHUNKS", "BatchSubmitter", "DiskFull", "Job", "ProgressEvent", "SyncOptions", "SyncReport",
           "check_roots", "chunk_languages", "fill_languages", "merge_roots", "sync"]


def sync(
    library: Library,
    roots: Sequence[Path],
    encoders: Sequence["Encoder"],
    options: SyncOptions | None = None,
    *,
    progress: Callable[[ProgressEvent], None] | None = None,
    paths: Sequence[Path] | None = None,
) -> SyncReport:
    """Bring the library up to date with ``roots``; see the module docstring.

    ``options`` (:class:`SyncOptions`, its defaults when None): what to crawl, whole
    (:class:`~hefsearch.index.crawl_options.CrawlOptions`; None: those the library remembers),
    and how to batch. A whole run (no ``paths``) records its crawl options, which later runs
    given none use. The roots are added to the library's recorded folders (``roots``), which
    ``hefsearch index`` without PATHS and the TUI's re-index sync.

    ``paths`` (files or folders below the roots, e.g. what ``hefsearch watch`` saw change)
    limits the run to them: only they are crawled (:func:`~hefsearch.index.crawl.crawl_paths`,
    same rules) and only documents at or below them can be removed; the rest of the library
    is left as it is.

    :raises DiskFull: the library's disk is full (batches committed before stay).
    :raises KeyboardInterrupt: Ctrl+C, with the report of what was done as ``sync_report``
        (every committed batch stays).
    """
    if not encoders:
        raise ValueError("sync needs at least one encoder")
    opts = options or SyncOptions()
    if opts.crawl is None:
        opts = dataclasses.replace(opts, crawl=CrawlOptions.remembered(library.settings()))
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
        # decided by the first sync, under the lock; a wish checked against it
        opts = dataclasses.replace(opts, passage_tokens=library_passage_tokens(
            library, encoders[0].max_tokens, opts.passage_tokens))
        spaces = _open_spaces(library, encoders, report, root_strs, opts, only is None)
        crawled = crawl_stage(resolved, opts, emit, only)
        containers = {str(f.path) for f in crawled.found if f.kind in CONTAINER_KINDS}
        files, members = split_members(_stored_documents(library, root_strs, only), containers)
        plan = compare(crawled, files, report)
        attach_members(plan, members)
        report.found = len(plan.found)
        if plan.gone:
            emit(ProgressEvent("remove", files_total=len(plan.found)))
            _remove_documents(library, spaces, [plan.existing[p][0] for p in plan.gone])
            report.removed = len(plan.gone)
        # new and changed files: extract + chunk ahead in a thread, embed and commit in batches
        state = Progress(emit, len(plan.found), plan.todo, report)
        state.files_done = len(plan.found) - len(plan.todo)
        state.tick(force=True)
        if plan.todo:
            index_files(Target(library, spaces, list(encoders), report, state), plan.todo, opts,
                        {p: plan.existing[p][3] for p in plan.existing})
        if report.ocr_waiting:  # once per run, with how to install it
            from hefsearch.readers.ocr import INSTALL_HINT

            n = len(report.ocr_waiting)
            report.notes.append((report.ocr_waiting[0], f"{n} file(s) with pages only OCR can read "
                                 f"(this one{' and ' + str(n - 1) + ' more' if n > 1 else ''}): {INSTALL_HINT}"))
        for sp, enc in zip(spaces, encoders):  # chunks a space does not hold yet
            report.backfilled += _backfill(library, sp, enc, opts.batch_chunks, state)
        fill_languages(library)
        _record_sync(library, root_strs, plan.crawl_failures, report, only)
        if only is None and not report.unfinished:  # every page read is in a committed document
            OcrPageCache(library.path).clear()
        threshold = library.hnsw_threshold()
        for sp in spaces:
            sp.maintain(hnsw_threshold=threshold, factory_override=library.index_factory_setting(sp.info.dim))
    report.seconds = time.perf_counter() - t0
    state.phase = "done"
    state.tick(force=True)
    return report


def _open_spaces(library: Library, encoders, report: SyncReport, root_strs: list[str],
                 opts: SyncOptions, whole: bool) -> list:
    """Consumes the encoders; produces their spaces (created when new) and records the bundle,
    the folders (added to ``roots``), a whole run's crawl options, the start of this run
    (``sync_started``: a run that never reaches ``last_sync`` was interrupted), the folders a
    ``whole`` run (not a watcher's few paths) has yet to finish (``unfinished``: folder ->
    when the first run that did not finish it started; cleared by :func:`_record_sync`) and,
    on a first sync, the default space in the library's settings."""
    spaces = [library.ensure_space(enc) for enc in encoders]
    report.spaces = [sp.info.name for sp in spaces]
    settings = library.settings()
    shown = [printable(r) for r in root_strs]
    new_settings = {"bundle": str(Path(encoders[0].bundle.path).resolve()),
                    "roots": merge_roots(library.recorded_roots(), shown),
                    "sync_started": {"at": utc_now(), "roots": shown}}
    if whole:
        new_settings["unfinished"] = {**{r: new_settings["sync_started"]["at"] for r in shown},
                                      **(settings.get("unfinished") or {})}
        # the crawl options, from the start: a suffix added by a stopped run keeps its files
        before = CrawlOptions.remembered(settings).settings()
        new_settings.update({k: v for k, v in opts.crawl.settings().items() if v != before[k]})
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


def _stored_documents(library: Library, root_strs: list[str], only: list[Path] | None = None) -> dict[str, tuple]:
    """The document rows under the roots (and at or below ``only``'s paths, when given), keyed
    by real path (as the crawler gives it): (id, size, mtime_ns, sha256, status, error)."""
    # by path prefix with ``only``: a watcher's run reads its few rows, not the whole table
    rows = documents.stored_rows(library.query, None if only is None else [printable(p) for p in only])
    only_strs = None if only is None else [str(p) for p in only]
    existing: dict[str, tuple] = {}
    for row in rows:
        real = real_path(row[0], row[1])
        if any(is_under(real, r) for r in root_strs) and (
                only_strs is None or any(is_under(real, p) for p in only_strs)):
            existing[real] = row[2:]
    return existing


def _record_sync(library: Library, root_strs: list[str], crawl_failures: list[tuple[str, str, str]],
                 report: SyncReport, only: list[Path] | None = None) -> None:
    """Replaces the failures under the roots (or ``only``'s paths) with this run's, stores
    the run as last_sync (``partial`` when it covered only some paths) and, for a whole run,
    takes its folders (and those inside them) off ``unfinished``; ``report.unfinished`` lists
    the folders left there (an earlier run over them stopped)."""
    shown_roots = [printable(r) for r in root_strs]
    cleared = shown_roots if only is None else [printable(p) for p in only]
    unfinished = library.settings().get("unfinished") or {}
    if only is None:
        unfinished = {f: at for f, at in unfinished.items() if not any(is_under(f, r) for r in shown_roots)}
    report.unfinished = sorted(unfinished)
    with library.transaction():
        put_setting(library.db, "unfinished", unfinished)
        for r in cleared:
            library.db.execute("DELETE FROM failures WHERE path = ? OR path LIKE ? ESCAPE '\\'",
                               [r, documents.like_prefix(r)])
        library.db.conn.executemany(
            "INSERT OR REPLACE INTO failures(path, reason, counted_as, seen_at) VALUES (?,?,?,?)",
            [(p, reason, kind, utc_now()) for p, reason, kind in crawl_failures])
        put_setting(library.db, "last_sync", {
            "at": utc_now(), "roots": shown_roots, "skipped": report.skipped,
            "added": report.added, "changed": report.changed, "removed": report.removed,
            "failed": len(report.failed), "chunks_embedded": report.chunks_embedded,
            **({} if only is None else {"partial": True, "paths": len(only)})})


def _remove_documents(library: Library, spaces, doc_ids: list[int]) -> None:
    with library.transaction():
        removed = documents.delete_documents(library.db.execute, doc_ids)
    for sp in spaces:
        sp.forget(removed)


def _backfill(library: Library, space, encoder, batch_chunks: int, state: Progress) -> int:
    total = 0
    while True:
        rows = documents.chunks_missing_from(library.query, space.info.name, batch_chunks)
        if not rows:
            return total
        state.phase = "backfill"
        ids = np.array([r[0] for r in rows], np.int64)
        vecs = encode_stoppable(encoder, [r[1] for r in rows], stored_sections(library, ids))
        space.add(ids, vecs)
        total += len(ids)
        state.chunks += len(ids)
        state.tick(force=True)


def fill_languages(library: Library, batch: int = 2000) -> int:
    """Detect the language of chunks stored without one (a library written before
    ``chunks.lang`` existed): once, in batches, under the caller's write lock."""
    done = 0
    while True:
        rows = documents.chunks_without_language(library.query, batch)
        if not rows:
            return done
        langs = chunk_languages([r[1] for r in rows])
        if langs and langs[0] is None:
            return done
        with library.transaction():
            documents.set_languages(library.db.conn, [(lang, r[0]) for r, lang in zip(rows, langs)])
        done += len(rows)

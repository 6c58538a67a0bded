"""The library: a folder holding ``library.db`` (SQLite) and ``spaces/<name>/`` (vectors).

Crash safety: SQLite is the commit point.

1. A batch is embedded in memory first (nothing written).
2. Under the write lock (``library.lock``, an ``flock`` of the one writer), each space's vectors
   are written as a new raw segment (temp file, fsync, rename, fsync of the folder), carrying
   chunk ids reserved inside the open SQLite transaction.
3. That transaction inserts the documents, chunks and ``space_members`` rows and commits: only
   now does the batch exist; readers see all of it or none (WAL).
4. The in-memory FAISS index gets the new ids; its file (a cache) is saved now and then.

Reconcile (at open and whenever the write lock is taken) repairs a crash at any point: segments
with no committed member are deleted, FAISS ids SQLite does not list are removed, missing
members are added from the raw vectors (a member without its raw vector loses its membership,
and the next sync embeds it again). So each space's FAISS ids equal its ``space_members`` rows.
Readers in other processes never repair: they follow their own snapshot and refresh when
``PRAGMA data_version`` changes.

Nothing waits forever: the write lock waits at most :data:`LOCK_WAIT_S`, then raises
:class:`LibraryBusy` naming the holder (pid, command, start time). A library this process cannot
write opens read-only: no lock, no repairs, no migrations; searching still works.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

import numpy as np

from hefsearch.base.locations import data_dir  # the data folder; also part of index's API

from . import documents, store
from .documents import ChunkRecord  # noqa: F401  (part of the library's API)
from .crawl import FAILED_SKIPS
from .errors import LibraryBusy, LibraryError, SpaceError
from . import library_folder
from .library_folder import DB_FILE, LOCK_FILE, resolve_library_path
from .lockfile import acquire_before, release_file_lock, take_file_lock
from .spaces import (DEFAULT_COMPRESS_THRESHOLD, DEFAULT_HNSW_THRESHOLD, MAX_THRESHOLD, Space, SpaceInfo,
                     check_fingerprint, factory_problem, read_index_stats, sorted_ids)

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder

log = logging.getLogger("hefsearch.index")

#: seconds a writer waits for another writer before giving up (interactive: a few seconds)
LOCK_WAIT_S = 5.0


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class LibraryStatus:
    documents: int
    chunks: int
    spaces: list[SpaceInfo]
    failures: list[tuple[str, str]]  # (path, reason): files that should be indexed and are not
    truncated_chunks: int
    skipped: dict[str, int]
    last_sync: str | None
    #: documents whose latest version failed but whose previous version is still indexed
    stale: int = 0
    path: str = ""
    settings: dict = field(default_factory=dict)
    #: (path, reason) left out on purpose and worth knowing: symlinks not followed, special
    #: files, loops (not failures)
    notes: list[tuple[str, str]] = field(default_factory=list)
    #: the folders the library indexes (``hefsearch index`` without PATHS syncs them)
    roots: list[str] = field(default_factory=list)
    #: when the last run started if it never finished (Ctrl+C, kill, power cut), else None;
    #: with folders unfinished, when the first run that did not finish them started
    interrupted: str | None = None
    #: the folders whose last whole run did not finish (until a run over them completes)
    unfinished: list[str] = field(default_factory=list)
    #: a process is writing the library now
    writing: bool = False
    ocr_pages: int = 0  #: pages read by OCR (scanned PDF pages, images) in searchable documents

    def skipped_text(self) -> str:
        """The last run's non-zero skip counters, in words ("3 symlinks not followed ...")."""
        from .crawl import skipped_text

        return skipped_text(self.skipped or {})


class Library:
    def __init__(self, path: Path, db):
        self.path = Path(path)
        self.db = db
        #: why this process cannot write the library (None: it can); set by _start_reading
        self.read_only_reason: str | None = None
        self._dblock = threading.RLock()  # one connection, several threads: one at a time
        self._warned: set = set()  # bad stored settings already warned about (once per library)
        self._wlock = threading.RLock()
        self._wdepth = 0
        self._writer_thread: int | None = None
        self._lockfile = None
        self._spaces: dict[str, Space] = {}
        self._load_at_open = True
        self.last_reconcile: dict[str, dict] = {}

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path | None = None, *, create: bool = True,
             read_only: bool | None = None, load_spaces: bool = True) -> "Library":
        """Open the library at ``path`` (``create``: make it when missing).

        ``load_spaces=False`` reads each space's FAISS index only when it is first used
        (:meth:`space`), checked against its members then, without repairing files: what a
        one-shot search wants (it may use one space of several, and its encoder opens while
        that index loads). The next writer repairs, as after any reader.

        ``read_only=True`` writes nothing (no lock file, repairs or migrations); ``None`` (the
        default) picks it when the folder or ``library.db`` is not writable for this process,
        and falls back to it when the disk turns out full or read-only.
        """
        folder = resolve_library_path(path)
        dbfile = folder / DB_FILE
        if not dbfile.exists():
            if not create or read_only:
                raise LibraryError(
                    f"No library at {folder}.",
                    "Build one with: hefsearch index FOLDER" + (f" --library {path}" if path else "")
                    + " (add --bundle BUNDLE unless 'hefsearch index' was given one before, as "
                      "'make demo' does)",
                )
            try:
                (folder / "spaces").mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise LibraryError(f"Cannot create the library folder {folder}: {e.strerror}.",
                                   "Choose another place with --library PATH.") from None
        elif folder.is_file():  # pragma: no cover
            raise LibraryError(f"{folder} is a file, not a library folder.")
        reason = "opened read-only" if read_only else None
        if read_only is None and not library_folder.writable(folder):
            reason = "the library folder is not writable for this user"
        db, reason = library_folder.connect(dbfile, reason)
        lib = cls(folder, db)
        lib._load_at_open = load_spaces
        try:
            lib._check_version()
            if reason is not None:
                lib._start_reading(reason)
            else:
                lib._start_writing()
        except OSError as e:  # e.g. a space folder that cannot be read
            lib.close()
            raise LibraryError(f"Cannot open the library {folder}: {e.strerror or e} "
                               f"({e.filename or folder}).",
                               "Check that its files are readable, then run this again.") from None
        except BaseException:
            lib.close()
            raise
        return lib

    def _start_writing(self) -> None:
        """Migrate and repair, unless another process is writing (it did both) or this one
        cannot write here after all (full disk, read-only mount): then only read."""
        try:
            with self.write_lock(wait=False, reconcile=False):
                store.migrate(self.db, self._dblock)
                self._load_spaces(repair=True)
        except LibraryBusy:
            self._check_version(strict=True)
            self._load_spaces(repair=False)
        except (OSError, LibraryError) as e:
            if not store.refuses_writes(e):
                raise
            self._start_reading(library_folder.cannot_write_reason(self.path, e))

    def _start_reading(self, reason: str) -> None:
        self.read_only_reason = reason
        version = store.schema_version(self.db)
        if version < store.SCHEMA_VERSION:
            raise LibraryError(
                f"The library {self.path} was written by an older hefsearch (schema {version}; "
                f"this one needs {store.SCHEMA_VERSION}) and upgrading it needs write access "
                f"({reason}).",
                "Run 'hefsearch status' on it once as a user who can write to it (that "
                "upgrades it), then search again.")
        log.info("library %s is read-only here (%s): searching only, repairs skipped",
                 self.path, reason)
        self._load_spaces(repair=False)

    def _load_spaces(self, repair: bool) -> None:
        """Every space reconciled at open, unless opened with ``load_spaces=False``."""
        if self._load_at_open:
            self._reconcile(repair=repair)

    @property
    def read_only(self) -> bool:
        return self.read_only_reason is not None

    def _check_version(self, strict: bool = False) -> None:
        v = store.schema_version(self.db)
        if v > store.SCHEMA_VERSION:
            raise LibraryError(
                f"The library {self.path} was written by a newer hefsearch (schema {v}, this one "
                f"knows {store.SCHEMA_VERSION}).", "Upgrade hefsearch: pip install -U hefsearch")
        if strict and v < store.SCHEMA_VERSION:
            raise LibraryBusy(f"The library {self.path} is being upgraded by another process.",
                              "Try again in a moment.")

    def close(self) -> None:
        for sp in self._spaces.values():
            if sp.dirty and self._wdepth:
                with contextlib.suppress(Exception):
                    sp.save()
        self._spaces.clear()
        if self._lockfile is not None:
            with contextlib.suppress(OSError):
                self._lockfile.close()
            self._lockfile = None
            self._wdepth = 0
        with contextlib.suppress(Exception):
            self.db.conn.close()

    def __enter__(self) -> "Library":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- locking and transactions --------------------------------------------------------
    @contextlib.contextmanager
    def write_lock(self, *, wait: bool | float = True, reconcile: bool = True) -> Iterator[None]:
        """Be the one writer of this library (re-entrant). On first acquisition the
        reconcile step runs with repairs, so leftovers of a crashed writer are cleared.

        ``wait``: True waits up to :data:`LOCK_WAIT_S` seconds for another writer (in this
        process or another), False not at all, a number that many seconds; then
        :class:`LibraryBusy` says who holds the lock.
        """
        self.require_writable()
        deadline = time.monotonic() + _wait_seconds(wait)
        if not acquire_before(self._wlock, deadline):
            raise LibraryBusy(
                f"Another task of this program (re-index or FP32 back-fill) is writing to the "
                f"library {self.path}.", "Try again when it has finished.")
        try:
            if self._wdepth == 0:
                self._acquire_file_lock(deadline)
                self._wdepth, self._writer_thread = 1, threading.get_ident()
                try:
                    if reconcile:
                        self.reconcile()
                except BaseException:
                    self._wdepth, self._writer_thread = 0, None
                    self._release_file_lock()
                    raise
            else:
                self._wdepth += 1
            try:
                yield
            finally:
                self._wdepth -= 1
                if self._wdepth == 0:
                    self._writer_thread = None
                    try:
                        self._save_dirty_spaces()
                    finally:  # a failed save (full disk) must not keep the lock
                        self._release_file_lock()
        finally:
            self._wlock.release()

    def require_writable(self) -> None:
        """Raise LibraryError (with the reason) when this process cannot write the library."""
        if self.read_only:
            raise LibraryError(
                f"The library {self.path} is open read-only here: {self.read_only_reason}.",
                "Searching works; to index or back-fill, use a library folder you can write "
                "(--library PATH), or free disk space.")

    def _save_dirty_spaces(self) -> None:
        for sp in self._spaces.values():
            if sp.dirty:
                sp.save()

    def _acquire_file_lock(self, deadline: float) -> None:
        self._lockfile = take_file_lock(self.path / LOCK_FILE, deadline, f"the library {self.path}")

    def _release_file_lock(self) -> None:
        if self._lockfile is not None:
            release_file_lock(self._lockfile)
            self._lockfile = None

    @property
    def writing(self) -> bool:
        return self._wdepth > 0

    def transaction(self):
        """A write transaction (``BEGIN IMMEDIATE``); call it while holding :meth:`write_lock`."""
        return store.transaction(self.db, self._dblock)

    def snapshot(self):
        """A read transaction: all queries inside see one committed state."""
        return store.snapshot(self.db, self._dblock)

    def query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        with self._dblock:
            return self.db.execute(sql, list(params)).fetchall()

    def data_version(self) -> int:
        """Changes whenever another connection commits (cheap; no disk read)."""
        with self._dblock:
            return self.db.execute("PRAGMA data_version").fetchone()[0]

    def member_ids(self, space: str, among: Iterable[int] | None = None) -> np.ndarray:
        """The chunk ids ``space`` holds (its committed ``space_members`` rows) as a sorted
        int64 array; with ``among``, only those of these ids.

        Read from the cursor straight into the array: 1M rows in 0.24 s and 8 MB, where a Python
        set took 0.34 s and about 60 MB, and ``fetchall`` first 0.39 s."""
        with self._dblock:
            if among is None:
                cur = self.db.execute("SELECT chunk_id FROM space_members WHERE space = ? "
                                      "ORDER BY chunk_id", [space])  # the primary key's order
                return np.fromiter((r[0] for r in cur), np.int64)
            out: list[int] = []
            ids = sorted_ids(among).tolist()
            for i in range(0, len(ids), 900):
                part = ids[i : i + 900]
                out += [r[0] for r in self.db.execute(
                    f"SELECT chunk_id FROM space_members WHERE space = ? AND chunk_id IN "
                    f"({','.join('?' * len(part))}) ORDER BY chunk_id", [space, *part])]
            return np.array(out, np.int64)  # sorted: the parts are sorted and in order

    # -- reconcile -----------------------------------------------------------------------
    def reconcile(self) -> dict[str, dict]:
        """Make every space's FAISS index equal its committed members (see module doc).

        Repairs files only while holding the write lock (or if it can be taken right now);
        otherwise (another process writes) it fixes the in-memory view only.
        """
        if self._wdepth and self._writer_thread == threading.get_ident():
            return self._reconcile(repair=True)
        if self.read_only:
            return self._reconcile(repair=False)
        try:
            with self.write_lock(wait=False, reconcile=False):
                return self._reconcile(repair=True)
        except LibraryBusy:
            return self._reconcile(repair=False)

    def _reconcile(self, repair: bool) -> dict[str, dict]:
        report = {}
        for info in self._space_infos():
            with self.snapshot():
                members = self.member_ids(info.name)
            sp = self._spaces.get(info.name) or Space(self, info)
            done = sp.load(members, repair=repair)
            sp._seen_version = None
            lost = done.pop("lost_ids")
            if repair and len(lost):
                with self.transaction():
                    self.db.conn.executemany(
                        "DELETE FROM space_members WHERE space = ? AND chunk_id = ?",
                        [(info.name, i) for i in lost.tolist()])
            self._spaces[info.name] = sp
            report[info.name] = done
            if any(done.values()):
                log.info("reconcile %s: %s", info.name, done)
        self.last_reconcile = report
        return report

    # -- settings ------------------------------------------------------------------------
    def settings(self) -> dict:
        with self._dblock:
            return store.all_settings(self.db)

    def set_settings(self, **values) -> None:
        with self._dblock:
            if self.db.conn.in_transaction:
                for k, v in values.items():
                    store.put_setting(self.db, k, v)
                return
        with self.transaction():
            for k, v in values.items():
                store.put_setting(self.db, k, v)

    # -- spaces --------------------------------------------------------------------------
    def _space_infos(self) -> list[SpaceInfo]:
        rows = self.query(
            "SELECT s.name, s.kind, s.fingerprint, s.parts, s.dim, "
            "(SELECT COUNT(*) FROM space_members m WHERE m.space = s.name), s.backend, "
            "s.backend_opts, s.label, s.index_factory FROM spaces s ORDER BY s.rowid")  # creation order
        return [SpaceInfo(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5], r[6], json.loads(r[7]),
                          r[8], r[9]) for r in rows]

    def spaces(self) -> list[SpaceInfo]:
        return self._space_infos()

    def space_names(self) -> list[str]:
        """Space names in creation order (cheap: no member counts)."""
        return [r[0] for r in self.query("SELECT name FROM spaces ORDER BY rowid")]

    def space(self, name: str) -> Space:
        sp = self._spaces.get(name)
        if sp is not None:
            return sp
        self._reconcile_one(self.space_info(name))
        return self._spaces[name]

    def space_info(self, name: str) -> SpaceInfo:
        """What the library records of space ``name`` (no index read); SpaceError when absent."""
        infos = {i.name: i for i in self._space_infos()}
        if name not in infos:
            known = ", ".join(sorted(infos)) or "none yet"
            raise SpaceError(f"The library {self.path} has no vector space {name!r} (spaces: {known}).",
                             "Index with the backend that builds it, e.g. hefsearch index PATH "
                             "--backend cpu, or pick one of the listed spaces.")
        return infos[name]

    def _reconcile_one(self, info: SpaceInfo) -> None:
        with self.snapshot():
            members = self.member_ids(info.name)
        sp = Space(self, info)
        sp.load(members, repair=False, defer_flat=not self._load_at_open)
        self._spaces[info.name] = sp

    def drop_space(self, name: str) -> None:
        """Remove a space: its rows, then its folder (SQLite first, so a crash in between
        leaves only a folder no space refers to). Takes the write lock."""
        with self.write_lock():
            with self.transaction():
                self.db.execute("DELETE FROM space_members WHERE space = ?", [name])
                self.db.execute("DELETE FROM spaces WHERE name = ?", [name])
            self._spaces.pop(name, None)
            shutil.rmtree(self.path / "spaces" / name, ignore_errors=True)

    def ensure_space(self, encoder: "Encoder", name: str | None = None, *,
                     backend_opts: dict | None = None, wait: bool | float = True) -> Space:
        """The space for this encoder: created on first use, else its fingerprint is checked.
        ``wait``: how long creating it may wait for the write lock (see :meth:`write_lock`)."""
        name = name or encoder.space_name
        parts, fp = encoder.fingerprint_parts(), encoder.fingerprint
        existing = {i.name: i for i in self._space_infos()}
        if name in existing:
            check_fingerprint(existing[name], parts, fp)
            return self.space(name)
        opts = backend_opts if backend_opts is not None else encoder.space_opts
        factory = self.index_factory_setting(encoder.dim) or "Flat"
        info = SpaceInfo(name=name, kind=encoder.space_kind, fingerprint=fp, parts=parts,
                         dim=encoder.dim, count=0, backend=encoder.backend.name, backend_opts=opts,
                         label=encoder.label,
                         index_factory=factory)
        with self.write_lock(wait=wait, reconcile=False):
            with self.transaction():
                self.db.execute(
                    "INSERT INTO spaces(name, kind, fingerprint, parts, dim, backend, backend_opts, "
                    "label, index_factory, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    [name, info.kind, fp, json.dumps(parts, sort_keys=True, default=str), info.dim,
                     info.backend, json.dumps(opts, sort_keys=True), info.label, factory, utc_now()])
            sp = Space(self, info)
            sp.load((), repair=True)
            self._spaces[name] = sp
        return sp

    def _set_space_factory(self, name: str, factory: str) -> None:
        with self.transaction():
            self.db.execute("UPDATE spaces SET index_factory = ? WHERE name = ?", [factory, name])

    def hnsw_threshold(self) -> int:
        return self._count_setting("hnsw_threshold", DEFAULT_HNSW_THRESHOLD)

    def compress_threshold(self) -> int:
        """Chunk count from which a space's FAISS index is compressed (setting
        ``compress_threshold``; see :mod:`hefsearch.index.spaces`)."""
        return self._count_setting("compress_threshold", DEFAULT_COMPRESS_THRESHOLD)

    def _count_setting(self, key: str, default: int) -> int:
        """A threshold setting, or its default (with one warning) when the stored value is no
        whole number of chunks from 1 to MAX_THRESHOLD: ``hefsearch settings`` refuses those,
        but a library written by an older version or edited by hand may hold one, and an index
        run must not die on it."""
        value = self.settings().get(key)
        if value is None:
            return default
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_THRESHOLD:
            return value
        if (key, repr(value)) not in self._warned:
            self._warned.add((key, repr(value)))
            log.warning("library setting %s = %.40r is not a number of chunks from 1 to %s; using the default "
                        "%s. Fix it with 'hefsearch settings %s VALUE' or 'hefsearch settings %s default'.",
                        key, value, f"{MAX_THRESHOLD:,}", f"{default:,}", key, key)
        return default

    def index_factory_setting(self, dim: int) -> str | None:
        """The library's ``index_factory`` setting when FAISS can serve vectors of ``dim`` with
        it (checked in a child process: some strings abort or segfault FAISS), else None, with
        one warning: every space then follows the size rules."""
        factory = self.settings().get("index_factory")
        if factory is None:
            return None
        problem = (f"it is not a text ({type(factory).__name__})" if not isinstance(factory, str)
                   else factory_problem(factory, dim))
        if problem is None:
            return factory
        if ("index_factory", repr(factory), dim) not in self._warned:
            self._warned.add(("index_factory", repr(factory), dim))
            log.warning("library setting index_factory = %.60r cannot be used: %s; spaces follow the size rules "
                        "(flat, HNSW, compressed). Set another with 'hefsearch settings index_factory VALUE', "
                        "or 'default'.", factory, problem.rstrip("."))
        return None

    # -- reading -------------------------------------------------------------------------
    def chunks(self, ids: Sequence[int]) -> list[ChunkRecord]:
        """Chunk records in the order given; ids that no longer exist are left out."""
        ids = [int(i) for i in ids]
        with self._dblock:
            found = documents.chunk_records(self.db.execute, ids)
        return [found[i] for i in ids if i in found]

    def neighbours(self, chunk_id: int, before: int = 1, after: int = 1) -> list[ChunkRecord]:
        """The chunk with up to ``before``/``after`` chunks of the same document around it."""
        with self.snapshot():
            return documents.neighbours(self.db.execute, chunk_id, before, after)

    def status(self) -> LibraryStatus:
        with self.snapshot():
            q = self.db.execute
            docs, stale, chunks, cut, ocr_pages = documents.counts(q)
            failures = [(p, e if s == "failed" else f"{e} (the previously indexed version is kept)")
                        for p, s, e in documents.not_ok(q)]
            notes = []
            for p, r, kind in q("SELECT path, reason, counted_as FROM failures ORDER BY path"):
                (failures if kind in FAILED_SKIPS else notes).append((p, r))
            settings = store.all_settings(self.db)
            spaces = self._space_infos()
        for info in spaces:  # what each index is and measured (index.json; FAISS not loaded)
            info.index_stats = read_index_stats(self.path / "spaces" / info.name)
        last = settings.get("last_sync") or {}
        started = (settings.get("sync_started") or {}).get("at")
        writing = self.writing or library_folder.writer_active(self.path)
        unfinished = settings.get("unfinished") or {}
        interrupted = started if started and started > (last.get("at") or "") else None
        if unfinished:
            interrupted = min(unfinished.values())
        interrupted = None if writing else interrupted
        return LibraryStatus(
            documents=docs, chunks=chunks, spaces=spaces, failures=failures, truncated_chunks=cut,
            skipped=dict(last.get("skipped") or {}), last_sync=last.get("at"), stale=stale,
            path=str(self.path), settings=settings, notes=notes, roots=self.recorded_roots(settings),
            interrupted=interrupted, writing=writing, ocr_pages=ocr_pages, unfinished=sorted(unfinished),
        )

    def recorded_roots(self, settings: dict | None = None) -> list[str]:
        """The folders this library indexes: every folder a sync was given (setting ``roots``,
        a folder inside another counted once), else, for a library written before that
        setting, the last sync's."""
        settings = self.settings() if settings is None else settings
        roots = settings.get("roots")
        if roots is None:
            roots = (settings.get("last_sync") or {}).get("roots")
        return [str(r) for r in roots or []]

    def document_count(self) -> int:
        return documents.document_count(self.query)

    def chunk_ids(self) -> np.ndarray:
        """Every chunk id, sorted (read as :meth:`member_ids` reads)."""
        with self._dblock:
            return np.fromiter(documents.all_chunk_ids(self.db.execute), np.int64)


def _wait_seconds(wait: bool | float) -> float:
    if wait is True:
        return LOCK_WAIT_S
    return max(0.0, float(wait or 0))

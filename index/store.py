"""The SQLite side of the library: schema, numbered migrations, connections, transactions.

``library.db`` is opened in WAL mode (readers see only committed transactions), with a busy
timeout, foreign keys on, and autocommit so every transaction is an explicit
``BEGIN IMMEDIATE ... COMMIT`` (:func:`transaction`). Migrations are a numbered list;
``PRAGMA user_version`` counts those run, each in one transaction with its version bump.

Tables: ``documents`` (one row per file ever seen: status ``ok``, ``failed`` or ``stale``: an
earlier version kept while the file now fails; a mail message is a row at ``FILE/KEY``);
``chunks`` (its AUTOINCREMENT id is the FAISS id in every space, never handed out twice);
``chunks_fts`` (FTS5 over the chunk text, external content, ``unicode61 remove_diacritics 2``);
``chunks_cjk`` (a contentless trigram FTS5 table for chunks in scripts without spaces between
words, filled by a trigger only for such chunks; words under three characters go by LIKE);
``spaces`` / ``space_members`` (a space's fingerprint and backend; its committed chunk ids);
``settings`` (key -> JSON); ``failures`` (files the last sync skipped, for a person to see).

SQLite errors that a user's files or disk cause (damaged file, full disk, read-only file, a
lock held too long) come out as :class:`LibraryError` naming the file and what to do
(:func:`explain`); other SQLite errors are bugs and keep their type.
"""

from __future__ import annotations

import contextlib
import errno
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from hefsearch.base.errors import HefsearchError

from .errors import LibraryBusy, LibraryError

#: bounded: writers take library.lock first, so SQLite itself only waits for a rare overlap
BUSY_TIMEOUT_MS = 5_000

#: characters of scripts written without spaces between words (for the trigram table)
NO_SPACE_SCRIPTS_GLOB = "*[\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]*"


class Database:
    """A library's connection and the few things asked of it beside plain statements.

    sqlite-utils held the connection once; nothing of it was used but ``execute``, and importing
    it cost ~70 ms of every ``hefsearch`` start (a one-shot search's budget is 400 ms)."""

    def __init__(self, conn: "_Connection"):
        self.conn = conn

    def execute(self, sql: str, parameters=None) -> sqlite3.Cursor:
        return self.conn.execute(sql) if parameters is None else self.conn.execute(sql, parameters)

    @property
    def journal_mode(self) -> str:
        return self.execute("PRAGMA journal_mode").fetchone()[0]

    def table_names(self) -> list[str]:
        return [r[0] for r in self.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


def _migration_1(db: Database) -> None:
    """The first schema: documents and chunks, their full-text tables, spaces, settings,
    failures (three parts, run in this order: the statements of the first release)."""
    _migration_1_documents(db)
    _migration_1_text_search(db)
    _migration_1_spaces(db)


def _migration_1_documents(db: Database) -> None:
    db.execute(
        """CREATE TABLE documents (
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL UNIQUE,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            sha256 TEXT,
            kind TEXT,
            status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'stale')),
            error TEXT,
            chunks INTEGER NOT NULL DEFAULT 0,
            cut_chunks INTEGER NOT NULL DEFAULT 0,
            encoding TEXT,
            indexed_at TEXT
        )"""
    )
    db.execute(
        """CREATE TABLE chunks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            text TEXT NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            page INTEGER,
            line INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            cut INTEGER NOT NULL DEFAULT 0
        )"""
    )
    db.execute("CREATE UNIQUE INDEX chunks_doc_ordinal ON chunks(doc_id, ordinal)")


def _migration_1_text_search(db: Database) -> None:
    """FTS5 over chunk text (every chunk) and a trigram table for scripts without spaces,
    kept in step by triggers."""
    db.execute(
        "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='chunks', content_rowid='id', "
        "tokenize='unicode61 remove_diacritics 2')"
    )
    db.execute(
        "CREATE VIRTUAL TABLE chunks_cjk USING fts5(text, content='', tokenize='trigram')"
    )
    glob = NO_SPACE_SCRIPTS_GLOB.replace("'", "''")
    db.execute(
        """CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
            INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
        END"""
    )
    db.execute(
        """CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END"""
    )
    db.execute(
        """CREATE TRIGGER chunks_au AFTER UPDATE OF text ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
            INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
        END"""
    )
    db.execute(
        f"""CREATE TRIGGER chunks_cjk_ai AFTER INSERT ON chunks WHEN new.text GLOB '{glob}' BEGIN
            INSERT INTO chunks_cjk(rowid, text) VALUES (new.id, new.text);
        END"""
    )
    db.execute(
        f"""CREATE TRIGGER chunks_cjk_ad AFTER DELETE ON chunks WHEN old.text GLOB '{glob}' BEGIN
            INSERT INTO chunks_cjk(chunks_cjk, rowid, text) VALUES ('delete', old.id, old.text);
        END"""
    )
    db.execute(
        f"""CREATE TRIGGER chunks_cjk_aud AFTER UPDATE OF text ON chunks WHEN old.text GLOB '{glob}' BEGIN
            INSERT INTO chunks_cjk(chunks_cjk, rowid, text) VALUES ('delete', old.id, old.text);
        END"""
    )
    db.execute(
        f"""CREATE TRIGGER chunks_cjk_aui AFTER UPDATE OF text ON chunks WHEN new.text GLOB '{glob}' BEGIN
            INSERT INTO chunks_cjk(rowid, text) VALUES (new.id, new.text);
        END"""
    )


def _migration_1_spaces(db: Database) -> None:
    db.execute(
        """CREATE TABLE spaces (
            name TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            parts TEXT NOT NULL,
            dim INTEGER NOT NULL,
            backend TEXT NOT NULL,
            backend_opts TEXT NOT NULL DEFAULT '{}',
            label TEXT NOT NULL,
            index_factory TEXT NOT NULL DEFAULT 'Flat',
            created_at TEXT NOT NULL
        )"""
    )
    db.execute(
        """CREATE TABLE space_members (
            space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE,
            chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            PRIMARY KEY (space, chunk_id)
        ) WITHOUT ROWID"""
    )
    db.execute("CREATE INDEX space_members_chunk ON space_members(chunk_id)")
    db.execute("CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute(
        """CREATE TABLE failures (
            path TEXT PRIMARY KEY,
            reason TEXT NOT NULL,
            counted_as TEXT NOT NULL,
            seen_at TEXT NOT NULL
        )"""
    )


def _migration_2(db: Database) -> None:
    """``documents.path_bytes``: the file's real name as bytes when it is not valid UTF-8
    (NULL otherwise). ``path`` then holds a display form with the bad bytes escaped (``\\xff``);
    the bytes reopen the file and match it on the next sync."""
    db.execute("ALTER TABLE documents ADD COLUMN path_bytes BLOB")


def _migration_3(db: Database) -> None:
    """``chunks.lang``: the chunk's language (ISO 639-1, py3langid), detected once when the chunk
    is stored; ``''`` when the text is too short or mixed to tell, NULL until detected (rows of
    older libraries are filled by the next sync). Searches filter on it (``--lang``) and the
    language-neutral space fits on it without detecting again."""
    db.execute("ALTER TABLE chunks ADD COLUMN lang TEXT")
    db.execute("CREATE INDEX chunks_lang ON chunks(lang)")


#: the numbered migrations; never edit a released one, append a new one
def _migration_4(db: Database) -> None:
    """``chunks.section``: the ordinal of the first chunk of the chunk's section (consecutive
    short chunks that fill the encoder's window, ``index/passages.py``), whose text a vector of
    the chunk is made with; NULL for chunks stored before (each its own section)."""
    db.execute("ALTER TABLE chunks ADD COLUMN section INTEGER")


MIGRATIONS: list[Callable[[Database], None]] = [_migration_1, _migration_2, _migration_3, _migration_4]
SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: Path, *, read_only: bool = False,
            writer_active: Callable[[], bool] = lambda: True) -> Database:
    """Open ``library.db``: WAL, busy timeout, foreign keys, explicit transactions.

    ``read_only`` opens it without writing anything (see :func:`_open_read_only`;
    ``writer_active()`` says whether a process holds the library's write lock). SQLite
    errors a user can cause (damaged file, full disk...) come out as :class:`LibraryError`.
    """
    path = Path(path)
    if read_only:
        return Database(_open_read_only(path, writer_active))
    conn = _open(str(path), path)
    db = Database(conn)
    if db.journal_mode != "wal":
        db.execute("PRAGMA journal_mode=wal")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at checkpoints, never corrupt
    return db


def _open(target: str, path: Path, *, uri: bool = False) -> "_Connection":
    try:
        conn = sqlite3.connect(target, uri=uri, isolation_level=None, check_same_thread=False,
                               timeout=BUSY_TIMEOUT_MS / 1000, factory=_Connection)
    except sqlite3.Error as e:
        raise explain(e, path) or LibraryError(f"Cannot open {path}: {e}.") from None
    conn.path = path
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn


def _open_read_only(path: Path, writer_active: Callable[[], bool]) -> "_Connection":
    """``mode=ro`` reads a live WAL database through the writer's ``-wal`` and ``-shm``, but
    needs to create or grow the ``-shm``, which a read-only folder or a full disk refuses.
    Then, when no writer is active and the ``-wal`` holds nothing (so ``library.db`` alone is
    the whole database), ``immutable=1`` reads it with no ``-shm`` at all. Such a connection
    does not see a writer that starts later (reopen to see its batches)."""
    uri = path.resolve().as_uri()
    if _wal_is_empty(path) and not _mode_ro_works(uri) and not writer_active():
        return _open(f"{uri}?mode=ro&immutable=1", path, uri=True)
    return _open(f"{uri}?mode=ro", path, uri=True)


def _wal_is_empty(path: Path) -> bool:
    wal = Path(f"{path}-wal")
    return not wal.exists() or wal.stat().st_size == 0


def _mode_ro_works(uri: str) -> bool:
    try:
        probe = sqlite3.connect(f"{uri}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        probe.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return True
    except sqlite3.Error as e:  # cannot create the -shm (read-only folder, full disk); damage
        return _primary_code(e) not in (_READONLY, _CANTOPEN, _IOERR, _FULL)
    finally:
        probe.close()


# -- SQLite errors a user can cause, as messages ---------------------------------------------
# primary result codes (https://sqlite.org/rescode.html)
_BUSY, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 8, 10, 11, 13, 14, 26
#: Python 3.10 has no ``sqlite_errorcode``: SQLite's fixed messages for the same codes
_CODE_OF_MESSAGE = {
    "database is locked": _BUSY, "attempt to write a readonly database": _READONLY,
    "disk I/O error": _IOERR, "database disk image is malformed": _CORRUPT,
    "database or disk is full": _FULL, "unable to open database file": _CANTOPEN,
    "file is not a database": _NOTADB,
}


def _primary_code(error: sqlite3.Error) -> int | None:
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    return _CODE_OF_MESSAGE.get(str(error))


def explain(error: sqlite3.Error, path: Path) -> HefsearchError | None:
    """The message for an SQLite error the user's files or disk caused; None for other
    errors (a bug: they keep their traceback)."""
    primary = _primary_code(error)
    folder = Path(path).parent
    if primary in (_CORRUPT, _NOTADB):
        return LibraryError(
            f"The library database {path} is damaged ({error}).",
            f"Move the folder {folder} aside (rename it) and index your documents again with "
            "'hefsearch index FOLDER' (same --library); the vectors and documents stored in it "
            "cannot be trusted.")
    if primary == _FULL:
        return LibraryError(f"The disk holding {path} is full.",
                            "Free some space and run the command again; nothing committed is lost.")
    if primary == _READONLY:
        return LibraryError(f"Cannot write to {path}: it or its folder is read-only ({error}).",
                            "Searching still works; to index, use a library folder you can write.")
    if primary in (_IOERR, _CANTOPEN):
        return LibraryError(f"Cannot read or write {path} ({error}).",
                            "Check that the disk is present and readable, then run the command again.")
    if primary == _BUSY:
        return LibraryBusy(
            f"The library database {path} stayed locked by another process for "
            f"{BUSY_TIMEOUT_MS / 1000:.0f} s.", "Try again when the other hefsearch command has finished.")
    return None


def is_disk_full(error: sqlite3.Error) -> bool:
    """Whether an SQLite error is SQLITE_FULL (the database or its disk is full)."""
    return _primary_code(error) == _FULL


def refuses_writes(error: BaseException) -> bool:
    """Whether ``error`` means this process cannot write the library now (full disk,
    read-only file or mount, no permission), as opposed to the library being broken. A full
    disk often shows as an SQLite I/O error: the ``-shm`` file cannot grow."""
    if isinstance(error, OSError):
        return error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)
    cause = error.__cause__
    return (isinstance(cause, sqlite3.Error)
            and _primary_code(cause) in (_FULL, _READONLY, _IOERR, _CANTOPEN))


def _raise_explained(error: sqlite3.Error, path: Path):
    explained = explain(error, path)
    if explained is None:
        raise error
    raise explained from error


def _explaining(name: str):
    """``sqlite3.Cursor.<name>`` with SQLite errors a user can cause turned into LibraryError."""
    base = getattr(sqlite3.Cursor, name)

    def method(self, *args):
        try:
            return base(self, *args)
        except sqlite3.Error as e:
            _raise_explained(e, self.connection.path)

    method.__name__ = name
    return method


class _Cursor(sqlite3.Cursor):
    """A cursor that turns SQLite errors a user can cause into :class:`LibraryError`.

    Errors surface while stepping rows as well as in ``execute``, so every entry is wrapped.
    """

    execute = _explaining("execute")
    executemany = _explaining("executemany")
    executescript = _explaining("executescript")
    fetchone = _explaining("fetchone")
    fetchmany = _explaining("fetchmany")
    fetchall = _explaining("fetchall")
    __next__ = _explaining("__next__")


class _Connection(sqlite3.Connection):
    """``execute`` and friends go through :class:`_Cursor` (the C shortcuts would not)."""

    path: Path

    def cursor(self, factory=None):
        return super().cursor(factory or _Cursor)

    def execute(self, *args):
        return self.cursor().execute(*args)

    def executemany(self, *args):
        return self.cursor().executemany(*args)

    def executescript(self, *args):
        return self.cursor().executescript(*args)


def schema_version(db: Database) -> int:
    return db.execute("PRAGMA user_version").fetchone()[0]


def migrate(db: Database, lock: threading.RLock | None = None) -> int:
    """Run the pending migrations; returns the number applied."""
    applied = 0
    while True:
        with transaction(db, lock):
            version = schema_version(db)  # read inside the write lock: two openers never race
            if version >= SCHEMA_VERSION:
                return applied
            MIGRATIONS[version](db)
            db.execute(f"PRAGMA user_version={version + 1}")
            applied += 1


@contextlib.contextmanager
def transaction(db: Database, lock: threading.RLock | None = None) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (rollback on any exception). Not re-entrant."""
    with lock if lock is not None else contextlib.nullcontext():
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            raise
        db.conn.execute("COMMIT")


@contextlib.contextmanager
def snapshot(db: Database, lock: threading.RLock | None = None) -> Iterator[None]:
    """A read transaction: every SELECT inside sees the same committed state."""
    with lock if lock is not None else contextlib.nullcontext():
        if db.conn.in_transaction:  # already inside a transaction of ours: it is the snapshot
            yield
            return
        db.conn.execute("BEGIN")
        try:
            yield
        finally:
            if db.conn.in_transaction:
                db.conn.execute("COMMIT")


def all_settings(db: Database) -> dict:
    return {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM settings")}


def put_setting(db: Database, key: str, value: Any) -> None:
    """Upsert one setting (call inside a transaction, or alone: one statement is atomic)."""
    db.execute(
        "INSERT INTO settings(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [key, json.dumps(value, ensure_ascii=False)],
    )

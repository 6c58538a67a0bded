"""The SQLite side of the library: schema, numbered migrations, connections, transactions.

``library.db`` is opened in WAL mode (readers never block the writer and see only committed
transactions) with a busy timeout, foreign keys on, and Python's autocommit mode so every
transaction is an explicit ``BEGIN IMMEDIATE ... COMMIT`` (see :func:`transaction`).

Schema (migration 1):

- ``documents``: one row per file ever seen under an indexed root: path (unique), size,
  mtime_ns, sha256, kind, status (``ok``; ``failed``: never indexed, ``error`` says why;
  ``stale``: the file now fails to extract, the previously indexed version is kept and
  ``error`` says why), chunk count, indexed_at.
- ``chunks``: ``id INTEGER PRIMARY KEY AUTOINCREMENT`` is also the FAISS id in every space, so
  an id is never handed out twice for different text (AUTOINCREMENT never reuses a committed
  id). Char span, PDF page, 1-based line of ``start``, token count and ``cut``.
- ``chunks_fts``: FTS5 over chunk text, external content (no second copy of the text), kept in
  sync by triggers, tokenizer ``unicode61 remove_diacritics 2`` (so "resume" finds "résumé").
- ``chunks_cjk``: a trigram FTS5 table over the chunks written in scripts without spaces
  between words (Han, kana, Hangul, Thai...). unicode61 makes a whole CJK run one token, so
  "发票" would never match inside "这是一张发票"; the trigram table matches substrings of three
  or more characters (shorter words are matched with LIKE on the chunk text). Only chunks
  containing such characters are added (a trigger with a GLOB over those Unicode ranges), so
  Latin-only libraries pay nothing for it. It is contentless (the text lives in ``chunks``),
  since an external-content table must index every row of its content table.
- ``spaces`` / ``space_members``: one row per vector space (fingerprint and its parts, the
  backend that produced it) and, per space, which chunk ids have a committed vector.
- ``settings``: key -> JSON value (the bundle, the default space, index factory, ...).
- ``failures``: files the last sync skipped for a reason a person should see (too large,
  unreadable, special file, symlink loop, broken link).

Migrations are a numbered list; ``PRAGMA user_version`` records how many have run, and each
runs in its own transaction together with the version bump.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import sqlite_utils

BUSY_TIMEOUT_MS = 30_000

#: characters of scripts written without spaces between words (for the trigram table)
NO_SPACE_SCRIPTS_GLOB = "*[\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]*"


def _migration_1(db: sqlite_utils.Database) -> None:
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


#: the numbered migrations; never edit a released one, append a new one
MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [_migration_1]
SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: Path) -> sqlite_utils.Database:
    """Open (creating) ``library.db``: WAL, busy timeout, foreign keys, explicit transactions."""
    conn = sqlite3.connect(
        str(path), isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
    )
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    db = sqlite_utils.Database(conn)
    if db.journal_mode != "wal":
        db.enable_wal()
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at checkpoints, never corrupt
    return db


def schema_version(db: sqlite_utils.Database) -> int:
    return db.execute("PRAGMA user_version").fetchone()[0]


def migrate(db: sqlite_utils.Database, lock: threading.RLock | None = None) -> int:
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
def transaction(db: sqlite_utils.Database, lock: threading.RLock | None = None) -> Iterator[None]:
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
def snapshot(db: sqlite_utils.Database, lock: threading.RLock | None = None) -> Iterator[None]:
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


def get_setting(db: sqlite_utils.Database, key: str, default: Any = None) -> Any:
    row = db.execute("SELECT value FROM settings WHERE key = ?", [key]).fetchone()
    return default if row is None else json.loads(row[0])


def all_settings(db: sqlite_utils.Database) -> dict:
    return {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM settings")}


def put_setting(db: sqlite_utils.Database, key: str, value: Any) -> None:
    """Upsert one setting (call inside a transaction, or alone: one statement is atomic)."""
    db.execute(
        "INSERT INTO settings(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [key, json.dumps(value, ensure_ascii=False)],
    )

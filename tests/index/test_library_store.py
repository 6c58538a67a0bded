"""The SQLite store: schema, migrations, FTS5 kept in sync by triggers, CJK trigram table,
library locations."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hefsearch.index import store
from hefsearch.index.errors import LibraryError
from hefsearch.index.library import Library, resolve_library_path


def _doc(db, path="/x/a.txt"):
    db.execute("INSERT INTO documents(path, size, mtime_ns, status) VALUES (?, 1, 1, 'ok')", [path])
    return db.execute("SELECT id FROM documents WHERE path = ?", [path]).fetchone()[0]


def _chunk(db, doc_id, ordinal, text):
    db.execute('INSERT INTO chunks(doc_id, ordinal, text, start, "end", line, tokens) VALUES (?,?,?,0,?,1,3)',
               [doc_id, ordinal, text, len(text)])


def _fts(db, table, expr):
    return sorted(r[0] for r in db.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", [expr]))


def test_migrations_numbered_and_idempotent(tmp_path):
    db = store.connect(tmp_path / "l.db")
    assert store.schema_version(db) == 0
    assert store.migrate(db) == store.SCHEMA_VERSION
    assert store.schema_version(db) == store.SCHEMA_VERSION
    assert store.migrate(db) == 0
    assert db.journal_mode == "wal"
    assert {"documents", "chunks", "chunks_fts", "chunks_cjk", "spaces", "space_members",
            "settings", "failures"} <= set(db.table_names())


def test_fts_follows_inserts_deletes_and_diacritics(tmp_path):
    db = store.connect(tmp_path / "l.db")
    store.migrate(db)
    d = _doc(db)
    _chunk(db, d, 0, "Mein Résumé für die Bewerbung")
    _chunk(db, d, 1, "Model XR-2000 manual")
    assert _fts(db, "chunks_fts", '"resume"') == [1]          # remove_diacritics 2
    assert _fts(db, "chunks_fts", '"xr 2000"') == [2]
    db.execute("DELETE FROM documents WHERE id = ?", [d])      # cascades to chunks -> FTS
    assert db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == 0
    assert _fts(db, "chunks_fts", '"resume"') == []
    db.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")


def test_cjk_chunks_go_to_the_trigram_table_only(tmp_path):
    db = store.connect(tmp_path / "l.db")
    store.migrate(db)
    d = _doc(db)
    _chunk(db, d, 0, "这是一张发票，金额为一百元。")
    _chunk(db, d, 1, "plain latin text about invoices")
    _chunk(db, d, 2, "서류를 보내 주세요")
    # unicode61 sees a whole CJK run as one token: no match inside it
    assert _fts(db, "chunks_fts", '"发票"') == []
    assert _fts(db, "chunks_cjk", '"一张发票"') == [1]
    assert _fts(db, "chunks_cjk", '"서류를"') == [3]
    assert _fts(db, "chunks_cjk", '"invoices"') == []   # Latin-only chunks are not in the trigram table
    db.execute("DELETE FROM chunks WHERE id = 1")
    assert _fts(db, "chunks_cjk", '"一张发票"') == []
    db.execute("INSERT INTO chunks_cjk(chunks_cjk, rank) VALUES ('integrity-check', 1)")


def test_settings_roundtrip(tmp_path):
    lib = Library.open(tmp_path / "lib")
    lib.set_settings(bundle="/b", hnsw_threshold=5, nested={"a": [1, 2]})
    lib.close()
    lib = Library.open(tmp_path / "lib", create=False)
    assert lib.settings() == {"bundle": "/b", "hnsw_threshold": 5, "nested": {"a": [1, 2]}}
    assert lib.hnsw_threshold() == 5
    lib.close()


def test_library_locations(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HEFSEARCH_HOME", str(home))
    assert resolve_library_path(None) == home / "library"
    assert resolve_library_path("work") == home / "work"
    assert resolve_library_path(str(tmp_path / "elsewhere")) == tmp_path / "elsewhere"
    assert resolve_library_path("./rel") == (Path.cwd() / "rel").resolve()
    monkeypatch.setenv("HEFSEARCH_LIBRARY", str(tmp_path / "envlib"))
    assert resolve_library_path(None) == tmp_path / "envlib"
    monkeypatch.setenv("HEFSEARCH_LIBRARY", "named")
    assert resolve_library_path(None) == home / "named"


def test_open_missing_library_without_create_says_how(tmp_path):
    with pytest.raises(LibraryError) as e:
        Library.open(tmp_path / "nothing", create=False)
    assert "hefsearch index" in e.value.hint
    assert not (tmp_path / "nothing").exists()


def test_newer_schema_is_refused(tmp_path):
    Library.open(tmp_path / "lib").close()
    db = store.connect(tmp_path / "lib" / "library.db")
    db.execute(f"PRAGMA user_version={store.SCHEMA_VERSION + 1}")
    db.conn.close()
    with pytest.raises(LibraryError, match="newer hefsearch"):
        Library.open(tmp_path / "lib")


def test_second_writer_is_refused_while_readers_open(tmp_path):
    from hefsearch.index.errors import LibraryBusy

    a = Library.open(tmp_path / "lib")
    b = Library.open(tmp_path / "lib")
    with a.write_lock():
        with pytest.raises(LibraryBusy, match="pid"):
            with b.write_lock(wait=False):
                pass
        c = Library.open(tmp_path / "lib")  # a reader still opens while a writer works
        c.close()
    with b.write_lock(wait=False):
        pass
    a.close()
    b.close()
    assert os.path.exists(tmp_path / "lib" / "library.lock")

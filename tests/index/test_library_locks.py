"""Locks and the read path: bounded lock waits that name the holder, read-only libraries, a full
disk on the read path, and damaged SQLite files reported as messages (never a traceback)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hefsearch.embed import Encoder
from hefsearch.index import library as library_module
from hefsearch.index import library_folder
from hefsearch.index import store
from hefsearch.index.errors import LibraryBusy, LibraryError
from hefsearch.index.library import Library
from hefsearch.index.spaces import Space
from hefsearch.index.sync import sync
from hefsearch.search import Searcher
from hefsearch.search import rerank as R
from hefsearch.cli.main import main
from hefsearch.search.request import SearchRequest
from tests.support.library_helpers import sim_library, write_corpus

REPO = Path(__file__).resolve().parents[2]


# -- helpers ---------------------------------------------------------------------------------
@pytest.fixture
def cpu_library(tmp_path, tiny_bert_bundle) -> Path:
    """A small library indexed on the CPU, closed (the folder only)."""
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=6, paragraphs=3)
    lib = Library.open(tmp_path / "lib")
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        sync(lib, [docs], [enc])
    lib.close()
    return tmp_path / "lib"


@contextlib.contextmanager
def lock_held_by_another_process(folder: Path):
    """A child process that opens the library as 'hefsearch index' and holds its write lock
    until the block ends."""
    code = textwrap.dedent(f"""
        import sys
        sys.argv = ["hefsearch", "index", "--secret-option"]
        from hefsearch.index.library import Library
        lib = Library.open({str(folder)!r})
        with lib.write_lock():
            print("locked", flush=True)
            sys.stdin.read()  # until the parent closes our stdin
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert child.stdout.readline().strip() == "locked"
        yield child
    finally:
        child.stdin.close()
        child.wait(timeout=30)


def run_cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_message_exit(result, *needles: str) -> None:
    """Exit code 2 with a human message, never a traceback."""
    text = result.output
    assert result.exit_code == 2, text
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in text
    for n in needles:
        assert n in text, text


# -- item 3: nothing waits forever ---------------------------------------------------------------
def test_write_lock_wait_is_bounded_and_names_the_holder(tmp_path, monkeypatch):
    Library.open(tmp_path / "lib").close()
    monkeypatch.setattr(library_module, "LOCK_WAIT_S", 0.5)
    with lock_held_by_another_process(tmp_path / "lib") as child:
        lib = Library.open(tmp_path / "lib")  # a reader opens while the writer works
        try:
            t0 = time.monotonic()
            with pytest.raises(LibraryBusy) as e:
                with lib.write_lock():  # the default wait: bounded
                    pass
            assert 0.4 < time.monotonic() - t0 < 5
            msg = e.value.message
            assert f"pid {child.pid}" in msg and "hefsearch index" in msg and "since" in msg
            assert "--secret-option" not in msg  # the verb only, never the arguments
            assert "Wait for it to finish" in e.value.hint
            with pytest.raises(LibraryBusy, match="hefsearch index"):
                with lib.write_lock(wait=False):
                    pass
        finally:
            lib.close()
    with Library.open(tmp_path / "lib") as lib, lib.write_lock(wait=False):
        pass  # released when the holder ended


@contextlib.contextmanager
def write_lock_held_by_a_thread(lib):
    """Another thread of this process holds ``lib``'s write lock until the block ends."""
    held, done = threading.Event(), threading.Event()

    def writer():
        with lib.write_lock():
            held.set()
            done.wait(30)

    t = threading.Thread(target=writer)
    t.start()
    try:
        held.wait(10)
        yield
    finally:
        done.set()
        t.join()


def test_write_lock_held_by_another_thread_is_bounded_too(tmp_path):
    lib = Library.open(tmp_path / "lib")
    try:
        with write_lock_held_by_a_thread(lib):
            t0 = time.monotonic()
            with pytest.raises(LibraryBusy, match="Another task of this program"):
                with lib.write_lock(wait=0.3):
                    pass
            assert time.monotonic() - t0 < 3
            assert lib.reconcile() is not None  # no repair from this thread while the other writes
    finally:
        lib.close()


def test_sqlite_lock_wait_is_bounded_too(tmp_path):
    """A connection that writes without taking library.lock (another tool, another OS):
    SQLite's own wait ends in LibraryBusy, not in a 30-second hang and a raw error."""
    lib = Library.open(tmp_path / "lib")
    other = sqlite3.connect(tmp_path / "lib" / "library.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        lib.db.execute("PRAGMA busy_timeout = 200")
        t0 = time.monotonic()
        with pytest.raises(LibraryBusy, match="stayed locked"):
            lib.set_settings(note="x")
        assert time.monotonic() - t0 < 5
    finally:
        other.execute("ROLLBACK")
        other.close()
        lib.close()


def _library_with_partial_fp32(lib, bundle) -> int:
    with Encoder.open(bundle, backend="cpu", threads=1) as enc:
        R.backfill(lib, enc, limit=1)
    return len(lib.member_ids(R.FP32_SPACE))


def test_rerank_does_not_wait_for_another_process_writing(npu_only_library, sim_bundle, monkeypatch):
    lib = npu_only_library
    before = _library_with_partial_fp32(lib, sim_bundle)
    monkeypatch.setattr(library_module, "LOCK_WAIT_S", 30.0)  # a wait would show
    searcher = Searcher(lib, rerank_budget_ms=None)  # unbounded: the candidates are computed
    try:
        with lock_held_by_another_process(lib.path):
            t0 = time.monotonic()
            res = searcher.search(SearchRequest("payment deadline", k=5, mode="vector", rerank_depth=10))
            assert time.monotonic() - t0 < 10
            assert res.hits
            assert len(lib.member_ids(R.FP32_SPACE)) == before  # not cached: the lock was taken
        searcher.search(SearchRequest("payment deadline", k=5, mode="vector", rerank_depth=10))
        assert len(lib.member_ids(R.FP32_SPACE)) > before  # cached once the lock is free
    finally:
        searcher.close()


def test_rerank_does_not_wait_for_a_backfill_thread(npu_only_library, sim_bundle, monkeypatch):
    lib = npu_only_library
    before = _library_with_partial_fp32(lib, sim_bundle)
    monkeypatch.setattr(library_module, "LOCK_WAIT_S", 30.0)
    searcher = Searcher(lib, rerank_budget_ms=None)
    try:
        with write_lock_held_by_a_thread(lib):  # a back-fill window
            t0 = time.monotonic()
            res = searcher.search(SearchRequest("late filing penalty", k=5, mode="vector", rerank_depth=10))
            assert time.monotonic() - t0 < 10 and res.hits
            assert len(lib.member_ids(R.FP32_SPACE)) == before
    finally:
        searcher.close()


# -- item 5: reading needs no write access ------------------------------------------------------
def test_read_only_open_writes_nothing_and_still_searches(cpu_library, caplog):
    (cpu_library / "library.lock").unlink()
    leftover = cpu_library / "spaces" / "cpu-fp32" / "crashed-writer.tmp"
    leftover.write_bytes(b"x")  # a repair would delete it
    with caplog.at_level(logging.INFO, logger="hefsearch.index"):
        lib = Library.open(cpu_library, create=False, read_only=True)
    try:
        assert lib.read_only
        assert not (cpu_library / "library.lock").exists()
        assert leftover.exists()
        skipped = [r for r in caplog.records if "repairs skipped" in r.getMessage()]
        assert len(skipped) == 1
        assert hits(lib, "olive oil sauce", "hybrid")
        assert lib.status().documents == 6
        with pytest.raises(LibraryError, match="read-only") as e:
            with lib.write_lock():
                pass
        assert "--library" in e.value.hint
        with pytest.raises(LibraryError, match="read-only"):  # SQLite itself refuses too
            lib.db.execute("INSERT INTO settings(key, value) VALUES ('x', '1')")
        assert not (cpu_library / "library.lock").exists()
    finally:
        lib.close()


def test_unwritable_folder_opens_read_only_by_itself(cpu_library, monkeypatch):
    monkeypatch.setattr(library_folder, "writable", lambda folder: False)
    with Library.open(cpu_library, create=False) as lib:
        assert lib.read_only and "not writable" in lib.read_only_reason
    r = run_cli("search", "--library", cpu_library, "--json", "olive oil sauce")
    assert r.exit_code == 0, r.output
    assert '"hits"' in r.output
    r = run_cli("status", "--library", cpu_library)
    assert r.exit_code == 0, r.output
    r = run_cli("backfill", "--library", cpu_library)
    assert_message_exit(r, "read-only")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root writes to read-only folders; covered by the read_only tests")
def test_chmod_read_only_library_answers_search_and_status(cpu_library):
    paths = [cpu_library, *cpu_library.rglob("*")]
    modes = {p: p.stat().st_mode for p in paths}
    try:
        for p in paths:
            p.chmod(modes[p] & ~0o222)
        r = run_cli("search", "--library", cpu_library, "--json", "olive oil sauce")
        assert r.exit_code == 0, r.output
        r = run_cli("status", "--library", cpu_library)
        assert r.exit_code == 0, r.output
    finally:
        for p in reversed(paths):
            p.chmod(modes[p])


def test_full_disk_at_open_falls_back_to_reading(cpu_library, monkeypatch, caplog):
    (cpu_library / "spaces" / "cpu-fp32" / "index.faiss").unlink()  # a repair wants to save it

    def disk_full(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Space, "save", disk_full)
    with caplog.at_level(logging.INFO, logger="hefsearch.index"):
        lib = Library.open(cpu_library, create=False)
    try:
        assert lib.read_only and "No space left" in lib.read_only_reason
        assert hits(lib, "olive oil sauce", "vector")
        assert sum("repairs skipped" in r.getMessage() for r in caplog.records) == 1
    finally:
        lib.close()
    assert not (cpu_library / "library.lock").read_text()  # the lock was released


def hits(lib, query: str, mode: str) -> list:
    """The hits of one search through a Searcher of its own, closed again."""
    with Searcher(lib) as searcher:
        return searcher.search(SearchRequest(query, k=3, mode=mode)).hits


def _cap_the_database_at_its_size(lib) -> None:
    """VACUUM packs every page, then SQLite may not grow the file: the next insert that
    needs a page fails with a genuine SQLITE_FULL, as on a full disk."""
    lib.db.execute("VACUUM")
    pages = lib.db.execute("PRAGMA page_count").fetchone()[0]
    lib.db.execute(f"PRAGMA max_page_count = {pages}")


@pytest.fixture
def larger_npu_library(tmp_path, sim_bundle):
    """Like npu_only_library with ~700 chunks: its membership table spans several pages."""
    lib = sim_library(tmp_path, sim_bundle, n_files=300, paragraphs=1)
    yield lib
    lib.close()


def test_full_disk_at_connect_reads_without_a_shm_file(cpu_library, monkeypatch):
    """On a full disk SQLite cannot create the -shm a WAL connection needs (it reports an I/O
    error): with no writer active, the library is read from library.db alone."""
    real_connect = store.connect

    def full_disk_connect(path, *, read_only=False, **kw):
        if not read_only:
            error = sqlite3.OperationalError("disk I/O error")
            raise store.explain(error, path) from error
        return real_connect(path, read_only=True, **kw)

    monkeypatch.setattr(store, "connect", full_disk_connect)
    monkeypatch.setattr(store, "_mode_ro_works", lambda uri: False)  # the -shm cannot grow
    with Library.open(cpu_library, create=False) as lib:
        assert lib.read_only and "disk I/O error" in lib.read_only_reason
        assert hits(lib, "olive oil sauce", "hybrid")
        assert not Path(f"{cpu_library / 'library.db'}-shm").exists()  # immutable: no -shm


def test_reader_without_a_shm_still_sees_an_active_writer(cpu_library, monkeypatch):
    """A writer holds the lock: the reader must read through its WAL (not immutably), or it
    would miss (or tear) the batches the writer commits."""
    monkeypatch.setattr(store, "_mode_ro_works", lambda uri: False)
    writer = Library.open(cpu_library, create=False)
    try:
        with writer.write_lock():
            wal = Path(f"{cpu_library / 'library.db'}-wal")
            assert not wal.exists() or wal.stat().st_size == 0
            reader = Library.open(cpu_library, create=False, read_only=True)
            try:
                writer.set_settings(note="committed while the reader was open")
                assert reader.settings().get("note") == "committed while the reader was open"
            finally:
                reader.close()
    finally:
        writer.close()


def test_full_disk_skips_the_rerank_cache_with_one_log_line(larger_npu_library, sim_bundle, caplog):
    lib = larger_npu_library
    before = _library_with_partial_fp32(lib, sim_bundle)
    _cap_the_database_at_its_size(lib)
    searcher = Searcher(lib, rerank_budget_ms=None)
    try:
        with caplog.at_level(logging.INFO, logger="hefsearch.search"):
            res = searcher.search(SearchRequest("firmware update", k=5, mode="vector", rerank_depth=10))
        assert res.hits
        lines = [r.getMessage() for r in caplog.records if "FP32 cache not updated" in r.getMessage()]
        assert len(lines) == 1 and "full" in lines[0]
        assert len(lib.member_ids(R.FP32_SPACE)) == before
    finally:
        searcher.close()


def test_full_disk_for_the_raw_vectors_skips_the_rerank_cache(npu_only_library, sim_bundle, monkeypatch):
    lib = npu_only_library
    before = _library_with_partial_fp32(lib, sim_bundle)

    def disk_full(self, chunk_ids, vectors):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Space, "stage", disk_full)
    searcher = Searcher(lib, rerank_budget_ms=None)
    try:
        assert searcher.search(SearchRequest("evening concert", k=5, mode="vector", rerank_depth=10)).hits
        assert len(lib.member_ids(R.FP32_SPACE)) == before
    finally:
        searcher.close()


# -- item 6: damaged database files -----------------------------------------------------------
def _garbage(folder: Path) -> None:
    (folder / "library.db").write_bytes(os.urandom(64 * 1024))


def _truncated(folder: Path) -> None:
    db = folder / "library.db"
    with open(db, "r+b") as f:
        f.truncate(db.stat().st_size // 3)


def _scribbled(folder: Path) -> None:
    """The pages of the chunks table overwritten, the rest intact: opening works, the damage
    shows only when a query reads chunks (status, search)."""
    db = folder / "library.db"
    conn = sqlite3.connect(db)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name = 'chunks'")]
    conn.close()
    assert pages
    with open(db, "r+b") as f:
        for n in pages:
            f.seek((n - 1) * page_size)
            f.write(os.urandom(page_size))


@pytest.mark.parametrize("damage", [_garbage, _truncated, _scribbled])
def test_damaged_database_is_a_message_not_a_traceback(cpu_library, damage):
    damage(cpu_library)
    db = cpu_library / "library.db"
    with pytest.raises(LibraryError) as e:
        with Library.open(cpu_library, create=False) as lib:
            lib.status()
            Searcher(lib).search(SearchRequest("olive oil sauce", k=3, mode="hybrid"))
    assert str(db) in e.value.message and "damaged" in e.value.message
    assert "aside" in e.value.hint and "hefsearch index" in e.value.hint
    for args in (["search", "--library", cpu_library, "olive oil sauce"],
                 ["status", "--library", cpu_library]):
        assert_message_exit(run_cli(*args), "is damaged", "hint:")


def test_damaged_database_through_the_real_command(cpu_library, tmp_path):
    _garbage(cpu_library)
    env = {**os.environ, "HEFSEARCH_HOME": str(tmp_path / "home")}
    env.pop("HEFSEARCH_LIBRARY", None)
    r = subprocess.run([sys.executable, "-m", "hefsearch", "search", "--library", str(cpu_library),
                        "q"], capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "is damaged" in r.stderr


def test_wal_deleted_under_a_reader_answers_or_says_so(cpu_library):
    reader = Library.open(cpu_library, create=False)
    writer = Library.open(cpu_library, create=False)
    try:
        with writer.write_lock(), writer.transaction():
            writer.db.execute("DELETE FROM failures")
            writer.set_settings(note="written after the reader opened")
        wal = Path(f"{cpu_library / 'library.db'}-wal")
        assert wal.exists()
        wal.unlink()
        try:
            assert reader.status().documents == 6
            assert Searcher(reader).search(SearchRequest("olive oil sauce", k=3, mode="keyword")).hits
        except LibraryError as e:  # the other allowed outcome: a message naming the file
            assert "library.db" in e.message
    finally:
        writer.close()
        reader.close()
    with Library.open(cpu_library, create=False) as lib:
        assert lib.status().documents == 6

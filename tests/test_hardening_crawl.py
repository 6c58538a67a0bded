"""Issue 11 hardening of crawling, syncing and ``hefsearch index``: indexing stays inside the
folders named (symlinks, /proc, secret files), any file name works, Ctrl+C is quick, a full
disk is one clear error, indexed data is only removed with its file, and compressed formats
are capped by the text they produce."""

from __future__ import annotations

import errno
import io
import json
import os
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from hefsearch.embed import Encoder
from hefsearch.base.terminal_text import printable
from hefsearch.index import sync as sync_module
from hefsearch.index import sync_prepare as prepare_module  # the extraction thread's module
from hefsearch.index.crawl import FoundFile, SkippedFile, crawl
from hefsearch.index.errors import LibraryError
from hefsearch.index.extract import ExtractionError, docx_to_text, extract, pdf_to_text
from hefsearch.index.library import Library
from hefsearch.index.spaces import RawVectors
from hefsearch.index.sync import DiskFull, SyncOptions, sync
from tests.document_builders import docx_with_body, make_docx, make_pdf
from tests.library_helpers import assert_consistent, write_corpus

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="symlinks and byte names as on POSIX")


@pytest.fixture
def encoder(tiny_bert_bundle):
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        yield enc


def skipped_by_name(items) -> dict[str, SkippedFile]:
    return {i.path.name: i for i in items if isinstance(i, SkippedFile)}


def found_names(items) -> list[str]:
    return sorted(i.path.name for i in items if isinstance(i, FoundFile))


def doc_paths(lib) -> list[str]:
    return sorted(r[0] for r in lib.query("SELECT path FROM documents"))


# --- 1. indexing stays inside what the user named -------------------------------------------------


@posix_only
def test_links_leading_outside_the_roots_are_reported_not_followed(tmp_path):
    outside = tmp_path / "elsewhere"
    (outside / "deep").mkdir(parents=True)
    (outside / "secret-plan.txt").write_text("outside text")
    (outside / "deep" / "d.txt").write_text("outside folder text")
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "inner.txt").write_text("inside")
    os.symlink(outside / "secret-plan.txt", root / "plan.txt")
    os.symlink(outside / "deep", root / "deep-link")
    os.symlink(root / "sub" / "inner.txt", root / "alias.txt")  # inside -> inside: fine

    items = list(crawl([root]))
    assert found_names(items) == ["inner.txt"]  # under its own name; the alias is left out, once
    skipped = skipped_by_name(items)
    assert skipped["plan.txt"].counted_as == "outside_link"
    assert str(outside / "secret-plan.txt") in skipped["plan.txt"].reason
    assert "--follow-links" in skipped["plan.txt"].reason
    assert skipped["deep-link"].counted_as == "outside_link" and "folder" in skipped["deep-link"].reason

    followed = list(crawl([root], follow_links=True))
    assert found_names(followed) == ["d.txt", "inner.txt", "plan.txt"]

    # a root that is itself a link is what the user named: crawled
    link_root = tmp_path / "root-link"
    os.symlink(outside, link_root)
    assert found_names(crawl([link_root])) == ["d.txt", "secret-plan.txt"]


@posix_only
@pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="needs /proc")
def test_proc_sys_dev_are_never_read_even_with_follow_links(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    os.symlink("/proc/self/environ", root / "environ.txt")
    os.symlink("/proc/self", root / "proc-self")
    os.symlink("/dev/null", root / "null.txt")
    for follow in (False, True):
        items = list(crawl([root], follow_links=follow))
        assert found_names(items) == []
        skipped = skipped_by_name(items)
        assert {n: s.counted_as for n, s in skipped.items()} == {
            "environ.txt": "system_file", "proc-self": "system_file", "null.txt": "system_file"}
        assert "/proc" in skipped["environ.txt"].reason and "never read" in skipped["environ.txt"].reason
    (item,) = list(crawl([Path("/proc/self")]))
    assert item.counted_as == "system_file"


@posix_only
def test_secret_files_are_ignored_by_default_and_can_be_re_included(tmp_path):
    root = tmp_path / "docs"
    (root / ".ssh").mkdir(parents=True)
    (root / ".ssh" / "notes.txt").write_text("ssh notes")
    for name in ["credentials.txt", "id_rsa.txt", ".env.md", "server.pem", "letter.txt"]:
        (root / name).write_text("x")
    os.symlink(root / ".ssh" / "notes.txt", root / "innocent.txt")  # a link onto a secret file
    items = list(crawl([root], include_hidden=True))
    assert found_names(items) == ["letter.txt"]
    skipped = skipped_by_name(items)
    for name in [".ssh", "credentials.txt", "id_rsa.txt", ".env.md", "server.pem", "innocent.txt"]:
        assert skipped[name].counted_as == "ignored", name
        assert "secret file" in skipped[name].reason, skipped[name].reason
    assert "'!credentials.*'" in skipped["credentials.txt"].reason

    (root / ".hefsearchignore").write_text("!credentials.*\n")
    assert found_names(crawl([root], include_hidden=True)) == ["credentials.txt", "letter.txt"]


def test_status_lists_the_secret_file_rule(tmp_path, encoder):
    from hefsearch.cli.cmd_status import status_cmd

    docs = tmp_path / "docs"
    write_corpus(docs, n_files=1)
    with Library.open(tmp_path / "lib") as lib:
        sync(lib, [docs], [encoder])
    r = CliRunner().invoke(status_cmd, ["--library", str(tmp_path / "lib")], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    assert "never indexed (secret files)" in r.output and "id_rsa*" in r.output and ".env" in r.output
    r = CliRunner().invoke(status_cmd, ["--library", str(tmp_path / "lib"), "--json"])
    assert "*.pem" in json.loads(r.output)["secret_file_rule"]


@posix_only
def test_sync_lists_links_not_followed_and_removes_what_they_leaked(tmp_path, encoder):
    outside = tmp_path / "etc-like"
    outside.mkdir()
    (outside / "passwd.txt").write_text("root:x:0:0 leaked system file text")
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=2)
    os.symlink(outside / "passwd.txt", docs / "passwd.txt")
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [encoder])
    assert r.added == 2 and not r.partial
    assert r.links == [(str(docs / "passwd.txt"), r.links[0][1])]
    assert str(outside / "passwd.txt") in r.links[0][1]
    assert not lib.query("SELECT 1 FROM chunks WHERE text LIKE '%leaked%'")
    out = io.StringIO()
    from hefsearch.app.indexing import sync_summary_dict
    from hefsearch.cli.render import print_sync_summary

    print_sync_summary(Console(file=out, width=300), r, lib.path)
    assert "Symlinks not followed" in out.getvalue() and "passwd.txt" in out.getvalue()
    assert sync_summary_dict(r, lib.path)["links_not_followed"][0]["path"] == str(docs / "passwd.txt")

    r = sync(lib, [docs], [encoder], SyncOptions(follow_links=True))
    assert r.added == 1 and lib.query("SELECT 1 FROM chunks WHERE text LIKE '%leaked%'")
    r = sync(lib, [docs], [encoder])  # the default again: what the link leaked is removed
    assert r.removed == 1 and not lib.query("SELECT 1 FROM chunks WHERE text LIKE '%leaked%'")
    assert_consistent(lib)
    lib.close()


# --- 3. Ctrl+C is quick ---------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_ctrl_c_stops_within_a_second_and_the_next_run_continues(tmp_path, encoder, monkeypatch):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=60, paragraphs=1)
    slow_file = sorted(docs.iterdir())[40]
    prepare = prepare_module.prepare

    def slow_prepare(job, *args):
        if job.path == str(slow_file):
            time.sleep(5)  # the worker is busy with one slow file when Ctrl+C comes
        return prepare(job, *args)

    monkeypatch.setattr(prepare_module, "prepare", slow_prepare)
    pressed: list[float] = []

    def progress(ev):
        if ev.phase == "index" and ev.files_done >= 10 and not pressed:
            pressed.append(time.monotonic())
            raise KeyboardInterrupt

    lib = Library.open(tmp_path / "lib")
    with pytest.raises(KeyboardInterrupt):
        sync(lib, [docs], [encoder], SyncOptions(batch_chunks=4), progress=progress)
    assert time.monotonic() - pressed[0] < 1.0
    kept = lib.document_count()
    assert 0 < kept < 60
    lib.close()

    monkeypatch.setattr(prepare_module, "prepare", prepare)
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [encoder], SyncOptions(batch_chunks=4))
    assert r.added == 60 - kept and r.unchanged == kept and lib.document_count() == 60
    assert_consistent(lib)
    lib.close()


# --- 4. any name a disk can hold -----------------------------------------------------------------


@posix_only
def test_names_that_are_not_utf8_are_indexed_shown_and_matched(tmp_path, encoder):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=1)
    try:
        raw_docs = os.fsencode(docs)
        os.mkdir(raw_docs + b"/dossier-\xff")
        with open(raw_docs + b"/dossier-\xff/caf\xe9.txt", "wb") as f:
            f.write(b"Notes about the old cafe on the corner and its espresso machine.\n")
        with open(raw_docs + b"/r\xe9sum\xe9.md", "wb") as f:
            f.write(b"# Resume\n\nTwenty years of gardening experience.\n")
        os.symlink(b"missing", raw_docs + b"/broken-\xfe.txt")  # a failure record with such a name
    except OSError:
        pytest.skip("this file system refuses names that are not UTF-8")
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [encoder])
    assert (r.added, r.failed) == (3, [])
    shown = str(docs / "dossier-\\xff" / "caf\\xe9.txt")
    assert shown in doc_paths(lib) and str(docs / "r\\xe9sum\\xe9.md") in doc_paths(lib)
    assert lib.query("SELECT path_bytes FROM documents WHERE path = ?", [shown]) == [
        (raw_docs + b"/dossier-\xff/caf\xe9.txt",)]
    assert lib.settings()["last_sync"]["added"] == 3  # bookkeeping is written, not crashed
    assert r.notes and "broken-\\xfe.txt" in r.notes[0][0]
    assert any("broken-\\xfe.txt" in p for p, _ in lib.status().notes)  # a broken link: noted, not failed
    # searchable by path, and every output is plain text
    assert lib.query("SELECT COUNT(*) FROM documents WHERE path LIKE '%caf\\xe9%'")[0][0] == 1
    from hefsearch.app.indexing import sync_summary_dict
    from hefsearch.cli.render import print_sync_summary

    json.dumps(sync_summary_dict(r, lib.path)).encode("utf-8")
    print_sync_summary(Console(file=io.StringIO()), r, lib.path)

    r = sync(lib, [docs], [encoder])
    assert (r.added, r.changed, r.unchanged, r.chunks_embedded) == (0, 0, 3, 0)
    os.unlink(raw_docs + b"/dossier-\xff/caf\xe9.txt")
    r = sync(lib, [docs], [encoder])
    assert r.removed == 1 and shown not in doc_paths(lib)
    assert_consistent(lib)
    lib.close()


@posix_only
def test_two_names_with_the_same_printable_form_do_not_share_a_row(tmp_path, encoder):
    docs = tmp_path / "docs"
    docs.mkdir()
    try:
        with open(os.fsencode(docs) + b"/caf\xe9.txt", "wb") as f:
            f.write(b"the real byte name")
    except OSError:
        pytest.skip("this file system refuses names that are not UTF-8")
    (docs / "caf\\xe9.txt").write_text("a name with a literal backslash")
    with Library.open(tmp_path / "lib") as lib:
        r = sync(lib, [docs], [encoder])
        assert r.added == 1 and len(r.failed) == 1 and "rename one of them" in r.failed[0][1]
        r = sync(lib, [docs], [encoder])
        assert r.unchanged == 1 and r.chunks_embedded == 0


def test_printable_escapes_only_what_is_not_utf8():
    assert printable("plain ✓.txt") == "plain ✓.txt"
    assert printable(os.fsdecode(b"caf\xe9.txt")) == "caf\\xe9.txt"
    assert printable("lone \ud800") == "lone \\ud800"


# --- 5. a full disk -------------------------------------------------------------------------------


def fill_disk_after(monkeypatch, writes: int) -> None:
    """The raw-vector segment write raises ENOSPC after ``writes`` successful ones."""
    original = RawVectors.write
    calls = []

    def write(self, ids, vectors):
        calls.append(1)
        if len(calls) > writes:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return original(self, ids, vectors)

    monkeypatch.setattr(RawVectors, "write", write)


def test_full_disk_is_one_clear_error_and_the_next_run_continues(tmp_path, encoder, monkeypatch):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=12, paragraphs=1)
    fill_disk_after(monkeypatch, 3)
    lib = Library.open(tmp_path / "lib")
    with pytest.raises(DiskFull) as info:
        sync(lib, [docs], [encoder], SyncOptions(batch_chunks=2))
    assert "Disk full" in info.value.message and str(lib.path) in info.value.message
    assert "run the same command again" in info.value.hint
    kept = lib.document_count()
    assert kept >= 3
    lib.close()

    monkeypatch.undo()
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [encoder], SyncOptions(batch_chunks=2))
    assert r.added == 12 - kept and lib.document_count() == 12
    assert_consistent(lib)
    lib.close()


def test_sqlite_disk_full_is_recognised_behind_a_library_error():
    err = sqlite3.OperationalError("database or disk is full")
    err.sqlite_errorcode = 13  # SQLITE_FULL
    wrapped = LibraryError("The disk holding library.db is full.")
    wrapped.__cause__ = err
    assert sync_module._disk_full_detail(wrapped) == "database or disk is full"
    assert sync_module._disk_full_detail(OSError(errno.EDQUOT, "Disk quota exceeded")) == "Disk quota exceeded"
    assert sync_module._disk_full_detail(OSError(errno.EACCES, "Permission denied")) is None


def test_index_command_says_disk_full_once_and_exits_4(tmp_path, tiny_bert_bundle, monkeypatch):
    from hefsearch.cli.main import main

    docs = tmp_path / "docs"
    write_corpus(docs, n_files=6, paragraphs=1)
    fill_disk_after(monkeypatch, 1)
    monkeypatch.setenv("HEFSEARCH_HOME", str(tmp_path / "home"))
    r = CliRunner().invoke(main, ["index", str(docs), "--library", str(tmp_path / "lib"), "--bundle",
                                  str(tiny_bert_bundle), "--backend", "cpu", "--batch", "2"])
    assert r.exit_code == 4, r.output
    assert r.output.count("Disk full") == 1 and str(tmp_path / "lib") in r.output
    assert "Traceback" not in r.output and isinstance(r.exception, SystemExit)


# --- 7. indexed data is only removed when its file is gone ----------------------------------------


def test_a_mistyped_max_size_keeps_the_library(tmp_path, encoder):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=4)
    lib = Library.open(tmp_path / "lib")
    sync(lib, [docs], [encoder])
    chunks = len(lib.chunk_ids())
    r = sync(lib, [docs], [encoder], SyncOptions(max_bytes=10))  # "--max-size 0.00001"
    assert r.removed == 0 and r.partial and len(r.stale) == 4 and r.failed == []
    assert "too large" in r.stale[0][1] and "--max-size" in r.stale[0][1]
    assert lib.document_count() == 4 and len(lib.chunk_ids()) == chunks
    reasons = [reason for _, reason in lib.status().failures]
    assert len(reasons) == 4 and all("too large" in x and "kept" in x for x in reasons)
    r = sync(lib, [docs], [encoder])  # the limit fixed: nothing to redo, nothing failing
    assert (r.unchanged, r.chunks_embedded, r.stale, r.failed) == (4, 0, [], [])
    assert lib.status().failures == []
    # a file that never indexed and is now too large is only a failure, listed once
    (docs / "empty.pdf").write_bytes(b"not a pdf")
    sync(lib, [docs], [encoder])
    sync(lib, [docs], [encoder], SyncOptions(max_bytes=5))
    assert [p for p, _ in lib.status().failures].count(str(docs / "empty.pdf")) == 1
    assert_consistent(lib)
    lib.close()


# --- 8. bounded resources for compressed formats --------------------------------------------------


@pytest.mark.timeout(60)
def test_docx_bomb_stops_at_the_text_cap_without_loading_the_body(tmp_path, monkeypatch):
    import docx

    data = docx_with_body("<w:p><w:r><w:t>lorem ipsum dolor sit amet </w:t></w:r></w:p>", 400_000)
    assert len(data) < 200_000  # ~11 MB of text in a small file
    path = tmp_path / "bomb.docx"
    path.write_bytes(data)

    def no_dom(*a, **k):
        raise AssertionError("a large body must be streamed, not loaded by python-docx")

    monkeypatch.setattr(docx, "Document", no_dom)
    t = time.perf_counter()
    with pytest.raises(ExtractionError, match=r"more than 1\.0 MiB of text .*--max-size"):
        extract(path, max_bytes=1024 * 1024)
    assert time.perf_counter() - t < 5


def test_large_docx_is_streamed_with_the_same_text(monkeypatch):
    from hefsearch.index import extract_docx as extract_module  # the DOCX parser's module

    data = make_docx(["Dear tenant,", "", "the rent rises in May."], [["Month", "Rent"], ["May", "900 EUR"]])
    expected = docx_to_text(data)
    monkeypatch.setattr(extract_module, "DOCX_DOM_LIMIT", 10)  # force the streaming path
    monkeypatch.setattr("docx.Document", lambda *a, **k: (_ for _ in ()).throw(AssertionError("DOM")))
    assert docx_to_text(data) == expected
    with pytest.raises(ExtractionError, match="DOCX unpacks to more than"):
        docx_to_text(data, max_chars=20)


def test_small_docx_and_pdf_text_over_the_cap_fail_with_a_reason():
    data = make_docx(["a paragraph of some length " * 4])
    with pytest.raises(ExtractionError, match="DOCX unpacks to more than"):
        docx_to_text(data, max_chars=50)
    pdf = make_pdf(["first page text " * 5, "second page text " * 5])
    assert pdf_to_text(pdf)[0]
    with pytest.raises(ExtractionError, match="PDF unpacks to more than"):
        pdf_to_text(pdf, max_chars=100)


def test_docx_bomb_in_a_sync_is_a_failure_not_a_flood(tmp_path, encoder):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=1)
    (docs / "bomb.docx").write_bytes(
        docx_with_body("<w:p><w:r><w:t>lorem ipsum dolor sit amet </w:t></w:r></w:p>", 100_000))
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [encoder], SyncOptions(max_bytes=512 * 1024))
    assert r.added == 1 and len(r.failed) == 1 and "DOCX unpacks to more than" in r.failed[0][1]
    assert lib.document_count() == 1
    lib.close()


def test_worker_thread_is_not_left_blocked(tmp_path, encoder):
    """After an interrupted sync no extraction thread stays blocked on the queue."""
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=50, paragraphs=1)

    def progress(ev):
        if ev.phase == "index" and ev.files_done >= 5:
            raise KeyboardInterrupt

    # an earlier test may have left its own worker inside a deliberately slow file: only this
    # sync's worker counts
    earlier = {t for t in threading.enumerate() if t.name == "hefsearch-extract"}

    def ours():
        return [t for t in threading.enumerate() if t.name == "hefsearch-extract" and t not in earlier]

    with Library.open(tmp_path / "lib") as lib:
        with pytest.raises(KeyboardInterrupt):
            sync(lib, [docs], [encoder], SyncOptions(batch_chunks=2), progress=progress)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and ours():
        time.sleep(0.05)
    assert not ours()

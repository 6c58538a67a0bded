"""Crawling, and the indexing that follows it: every file under the roots is found or reported
with its reason, nothing hangs, and indexing stays inside the folders named.

The hostile-folder test builds every kind of bad input the ingestion issue lists and checks
that each good file is found and extracted, each bad one is reported with its reason, and
nothing hangs. The feature tests cover ignore files, hidden entries, symlinks, missing and
unreadable roots, and a deterministic order. The hardening tests (the second half) keep
indexing inside the folders named (symlinks, /proc, secret files), index any file name, stop
quickly on Ctrl+C, make a full disk one clear error, remove indexed data only with its file,
and cap compressed formats by the text they produce.
"""

from __future__ import annotations

import errno
import io
import json
import os
import random
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from hefsearch.base.terminal_text import printable
from hefsearch.embed import Encoder
from hefsearch.index import sync as sync_module
from hefsearch.index import sync_prepare as prepare_module  # the extraction thread's module
from hefsearch.index.crawl import IGNORE_FILE, FoundFile, SkippedFile, crawl
from hefsearch.index.crawl_options import DEFAULT_MAX_BYTES, CrawlOptions
from hefsearch.index.errors import LibraryError
from hefsearch.readers.extract import ExtractedText, ExtractionError, docx_to_text, extract, pdf_to_text
from hefsearch.index.library import Library
from hefsearch.index.spaces import RawVectors
from hefsearch.index.sync import DiskFull, SyncOptions, sync
from tests.support.document_builders import docx_with_body, garbage_bytes, make_docx, make_pdf
from tests.support.library_helpers import assert_consistent, write_corpus

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs, symlinks and byte names as on POSIX")


BIG = 50 * 1024 * 1024
NASTY_NAME = "new\nline Ünïcødé 日本語 ✓.txt"


def build_hostile(root: Path) -> tuple[dict[str, str], dict[str, str], dict[str, tuple[str, str]]]:
    """Create the hostile folder. Returns (good name -> text it must contain,
    name -> extraction failure reason fragment, name -> (counted_as, reason fragment))."""
    root.mkdir()
    good: dict[str, str] = {}
    failing: dict[str, str] = {}
    skipped: dict[str, tuple[str, str]] = {}

    (root / "empty.txt").write_bytes(b"")
    good["empty.txt"] = ""
    (root / "binary.txt").write_bytes(random.Random(1).randbytes(8192))
    failing["binary.txt"] = "binary data"
    (root / "legacy-cp1252.txt").write_bytes("Grüße aus Köln – 5 € für naïve Cafés.".encode("cp1252"))
    good["legacy-cp1252.txt"] = "Grüße aus Köln – 5 € für naïve Cafés."
    (root / "garbage.txt").write_bytes(garbage_bytes(4096))
    failing["garbage.txt"] = "not valid UTF-8 nor a known legacy encoding"
    (root / "utf16-bom.txt").write_bytes("Fahrkarte nach München\r\n東京行きの切符".encode("utf-16"))
    good["utf16-bom.txt"] = "Fahrkarte nach München\n東京行きの切符"
    (root / "nul-bytes.md").write_bytes(b"# Router\x00 reset\n\nHold the\x00 button for 10 s.\x00")
    good["nul-bytes.md"] = "# Router reset\n\nHold the button for 10 s."
    with open(root / "one-line-50mb.txt", "wb") as f:
        f.write(b"x" * BIG)
    skipped["one-line-50mb.txt"] = ("too_large", "50.0 MiB")
    os.mkfifo(root / "pipe.txt")
    skipped["pipe.txt"] = ("special", "FIFO")
    (root / "sub").mkdir()
    (root / "sub" / "inside.rst").write_text("Photosynthesis turns light into sugar.\n", encoding="utf-8")
    good["inside.rst"] = "Photosynthesis turns light into sugar.\n"
    os.symlink("..", root / "sub" / "loop")
    skipped["loop"] = ("loop", "symlink loop")
    os.symlink("self-link.txt", root / "self-link.txt")
    skipped["self-link.txt"] = ("loop", "symlink loop")
    os.symlink("does-not-exist.txt", root / "broken.txt")
    skipped["broken.txt"] = ("broken_link", "does-not-exist.txt")
    (root / "corrupt.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >>\nthis is not a PDF body")
    failing["corrupt.pdf"] = "PDF is corrupt"
    (root / "corrupt.docx").write_bytes(b"PK\x03\x04" + random.Random(2).randbytes(600))
    failing["corrupt.docx"] = "DOCX is corrupt"
    (root / NASTY_NAME).write_text("Ticket für den Zug nach Zürich.\n", encoding="utf-8")
    good[NASTY_NAME] = "Ticket für den Zug nach Zürich.\n"
    (root / "good.pdf").write_bytes(make_pdf(["Invoice 4711 is due.", "Pay by bank transfer."]))
    good["good.pdf"] = "Invoice 4711 is due.\n\nPay by bank transfer."
    (root / "good.docx").write_bytes(make_docx(["Rental contract for the flat.", "Deposit: three months."]))
    good["good.docx"] = "Rental contract for the flat.\n\nDeposit: three months."
    (root / "page.html").write_text(
        "<html><head><title>Hiking</title><script>alert('SCRIPT')</script><style>p{}</style></head>"
        "<body><p>Pack water and a map.</p></body></html>",
        encoding="utf-8",
    )
    good["page.html"] = "Hiking\n\nPack water and a map."
    (root / "photo.heic").write_bytes(b"\x00\x00\x00\x18ftypheic" + bytes(100))  # .jpg is read (OCR)
    skipped["photo.heic"] = ("unsupported", ".heic")
    (root / ".hidden.txt").write_text("secret", encoding="utf-8")
    (root / ".git").mkdir()
    (root / ".git" / "config.txt").write_text("hidden folder", encoding="utf-8")
    return good, failing, skipped


def run_ingest(roots, **kw) -> tuple[dict[str, ExtractedText], dict[str, str], dict[str, SkippedFile], list]:
    extracted: dict[str, ExtractedText] = {}
    failed: dict[str, str] = {}
    skipped: dict[str, SkippedFile] = {}
    items = list(crawl(roots, CrawlOptions(**kw)))
    for item in items:
        if isinstance(item, FoundFile):
            try:
                extracted[item.path.name] = extract(item.path)
            except ExtractionError as e:
                failed[item.path.name] = e.message
        else:
            skipped[item.path.name] = item
    return extracted, failed, skipped, items


@posix_only
@pytest.mark.timeout(60)
def test_hostile_folder_every_file_found_or_reported(tmp_path):
    root = tmp_path / "hostile"
    good, failing, expect_skipped = build_hostile(root)
    extracted, failed, skipped, items = run_ingest([root])

    assert set(extracted) == set(good), "exactly the good files are extracted"
    for name, text in good.items():
        assert extracted[name].text == text, name
    assert extracted["legacy-cp1252.txt"].encoding == "cp1252"
    assert extracted["utf16-bom.txt"].encoding == "utf-16-le-bom"
    assert [p[0] for p in extracted["good.pdf"].pages] == [1, 2]
    assert extracted["page.html"].text.count("SCRIPT") == 0

    assert set(failed) == set(failing)
    for name, reason in failing.items():
        assert reason in failed[name], (name, failed[name])

    assert set(skipped) == set(expect_skipped)
    for name, (counted_as, reason) in expect_skipped.items():
        assert skipped[name].counted_as == counted_as, (name, skipped[name])
        assert reason in skipped[name].reason, (name, skipped[name].reason)

    names = [i.path.name for i in items]
    assert ".hidden.txt" not in names and "config.txt" not in names, "hidden entries are skipped silently"
    assert len(names) == len(set(names)), "every file is reported once (the loop is not followed)"
    assert all(i.path.is_absolute() for i in items)
    nasty = next(i for i in items if i.path.name == NASTY_NAME)
    assert nasty.path == root / NASTY_NAME and nasty.kind == "text"


@posix_only
@pytest.mark.timeout(60)
def test_fifo_is_never_opened(tmp_path):
    """A FIFO with no writer blocks open() forever; crawl must not open it, and extract must
    refuse it without blocking even if asked directly."""
    fifo = tmp_path / "notes.txt"
    os.mkfifo(fifo)
    (item,) = list(crawl([tmp_path]))
    assert isinstance(item, SkippedFile) and item.counted_as == "special"
    with pytest.raises(ExtractionError, match="not a regular file"):
        extract(fifo)


@pytest.mark.timeout(60)
def test_50mb_single_line_is_too_large_by_default_and_linear_when_allowed(tmp_path):
    big = tmp_path / "line.txt"
    with open(big, "wb") as f:
        f.write(("Grüße " * (BIG // 7)).encode("cp1252"))  # one line, legacy encoding
    (item,) = list(crawl([tmp_path]))
    assert item.counted_as == "too_large" and f"over the {DEFAULT_MAX_BYTES // 2**20}.0 MiB limit" in item.reason

    (item,) = list(crawl([tmp_path], CrawlOptions(max_bytes=64 * 2**20)))
    assert isinstance(item, FoundFile) and item.size == big.stat().st_size
    t0 = time.perf_counter()
    doc = extract(item.path)
    elapsed = time.perf_counter() - t0
    assert doc.encoding == "cp1252" and len(doc.text) == BIG // 7 * 6 and doc.text.startswith("Grüße Grüße")
    # A tenth of the file must take about a tenth of the time (generous: not quadratic).
    small = tmp_path / "tenth.txt"
    small.write_bytes(("Grüße " * (BIG // 70)).encode("cp1252"))
    t0 = time.perf_counter()
    extract(small)
    assert elapsed < 30 * max(time.perf_counter() - t0, 0.02)
    with pytest.raises(ExtractionError, match="too large"):
        extract(item.path, max_bytes=1000)

# --- crawl features ------------------------------------------------------------------------------


def names(items, cls=None):
    return [i.path.name for i in items if cls is None or isinstance(i, cls)]


def test_ignore_files_nested_with_negation_and_excludes(tmp_path):
    root = tmp_path / "docs"
    (root / "drafts").mkdir(parents=True)
    (root / "work" / "build").mkdir(parents=True)
    (root / IGNORE_FILE).write_text("drafts/\n*.log.txt\n# comment\n")
    (root / "work" / IGNORE_FILE).write_text("build/\n!keep.log.txt\n")
    for rel in ["a.txt", "drafts/d.txt", "x.log.txt", "work/keep.log.txt", "work/other.log.txt",
                "work/build/b.txt", "work/w.md", "work/notes.tmp.md"]:
        (root / rel).write_text("text", encoding="utf-8")
    items = list(crawl([root], CrawlOptions(excludes=["*.tmp.md"])))
    found = sorted(names(items, FoundFile))
    assert found == ["a.txt", "keep.log.txt", "w.md"]
    ignored = {i.path.name: i.reason for i in items if isinstance(i, SkippedFile)}
    assert set(ignored) == {"drafts", "x.log.txt", "other.log.txt", "build", "notes.tmp.md"}
    assert ignored["drafts"] == f"matches 'drafts/' in {root / IGNORE_FILE}"
    assert ignored["build"] == f"matches 'build/' in {root / 'work' / IGNORE_FILE}"
    assert ignored["notes.tmp.md"] == "matches --exclude '*.tmp.md'"
    assert all(i.counted_as == "ignored" for i in items if isinstance(i, SkippedFile))
    assert IGNORE_FILE not in names(items)


def test_hidden_included_on_request(tmp_path):
    (tmp_path / ".notes").mkdir()
    (tmp_path / ".notes" / "n.md").write_text("x")
    (tmp_path / ".top.txt").write_text("x")
    (tmp_path / IGNORE_FILE).write_text("nothing\n")
    assert list(crawl([tmp_path])) == []
    assert sorted(names(crawl([tmp_path], CrawlOptions(include_hidden=True)))) == [".top.txt", "n.md"]


@posix_only
def test_symlinks_followed_once(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "doc.txt").write_text("x")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(real, root / "link-dir")
    os.symlink(real / "doc.txt", root / "alias.txt")
    outside = tmp_path / "outside.md"
    outside.write_text("y")
    os.symlink(outside, root / "z-outside.md")
    items = list(crawl([root, real], CrawlOptions(follow_links=True)))
    found = [i for i in items if isinstance(i, FoundFile)]
    # alias.txt links to a file inside the roots: that file is indexed under its own name (here
    # reached first through the linked folder), the alias is left out and says where it points.
    assert [f.path for f in found] == [root / "z-outside.md", root / "link-dir" / "doc.txt"]
    dup = [i for i in items if isinstance(i, SkippedFile)]
    assert {(d.path.name, d.counted_as) for d in dup} == {("alias.txt", "duplicate"), ("real", "loop")}
    assert "indexed under that name" in next(d.reason for d in dup if d.path.name == "alias.txt")
    # without --follow-links the link out of the roots is reported with its target, not followed
    items = list(crawl([root, real]))
    assert [f.path for f in items if isinstance(f, FoundFile)] == [root / "link-dir" / "doc.txt"]
    (out,) = [i for i in items if isinstance(i, SkippedFile) and i.counted_as == "outside_link"]
    assert out.path == root / "z-outside.md" and str(outside) in out.reason


def test_roots_file_and_missing(tmp_path):
    f = tmp_path / ".hidden-but-explicit.md"
    f.write_text("x")
    items = list(crawl([f, tmp_path / "nope"]))
    assert isinstance(items[0], FoundFile) and items[0].kind == "markdown"
    assert items[1].counted_as == "unreadable" and "does not exist" in items[1].reason


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root ignores permissions")
def test_unreadable_folder_reported(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "a.txt").write_text("x")
    locked.chmod(0)
    try:
        (item,) = list(crawl([tmp_path]))
        assert item.counted_as == "unreadable" and item.path == locked
    finally:
        locked.chmod(0o755)


def test_crawl_order_is_deterministic(tmp_path):
    for n in ["b.txt", "a.md", "c/d.txt", "c/a.txt"]:
        (tmp_path / n).parent.mkdir(exist_ok=True)
        (tmp_path / n).write_text("x")
    first = [i.path for i in crawl([tmp_path])]
    assert first == [i.path for i in crawl([tmp_path])]
    assert [p.name for p in first] == ["a.md", "b.txt", "a.txt", "d.txt"]


@posix_only
def test_a_link_to_a_file_inside_the_folders_leaves_the_file_under_its_own_name(tmp_path):
    """/usr/share/common-licenses: GPL -> GPL-3. The real name is what 'similar GPL-3' asks for;
    a hidden or excluded target is still indexed through the link (nothing else reaches it)."""
    (tmp_path / "GPL-3").write_text("GNU GENERAL PUBLIC LICENSE Version 3")
    os.symlink("GPL-3", tmp_path / "GPL")
    (tmp_path / ".hidden-notes").write_text("notes kept under a hidden name")
    os.symlink(".hidden-notes", tmp_path / "notes")
    items = list(crawl([tmp_path]))
    assert sorted(f.path.name for f in items if isinstance(f, FoundFile)) == ["GPL-3", "notes"]
    (gpl,) = [i for i in items if isinstance(i, SkippedFile)]
    assert gpl.path.name == "GPL" and gpl.counted_as == "duplicate" and "GPL-3" in gpl.reason


# Hardening: indexing stays inside the folders named, any file name works, Ctrl+C is quick, a full
# disk is one clear error, and compressed formats are capped by the text they produce.

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

    followed = list(crawl([root], CrawlOptions(follow_links=True)))
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
        items = list(crawl([root], CrawlOptions(follow_links=follow)))
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
    items = list(crawl([root], CrawlOptions(include_hidden=True)))
    assert found_names(items) == ["letter.txt"]
    skipped = skipped_by_name(items)
    for name in [".ssh", "credentials.txt", "id_rsa.txt", ".env.md", "server.pem", "innocent.txt"]:
        assert skipped[name].counted_as == "ignored", name
        assert "secret file" in skipped[name].reason, skipped[name].reason
    assert "'!credentials.*'" in skipped["credentials.txt"].reason

    (root / ".hefsearchignore").write_text("!credentials.*\n")
    assert found_names(crawl([root], CrawlOptions(include_hidden=True))) == ["credentials.txt", "letter.txt"]


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

    r = sync(lib, [docs], [encoder], SyncOptions(crawl=CrawlOptions(follow_links=True)))
    assert r.added == 1 and lib.query("SELECT 1 FROM chunks WHERE text LIKE '%leaked%'")
    r = sync(lib, [docs], [encoder], SyncOptions(crawl=CrawlOptions()))  # the default again: the leak goes
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
    r = sync(lib, [docs], [encoder], SyncOptions(crawl=CrawlOptions(max_bytes=10)))  # "--max-size 0.00001"
    assert r.removed == 0 and r.partial and len(r.stale) == 4 and r.failed == []
    assert "too large" in r.stale[0][1] and "--max-size" in r.stale[0][1]
    assert lib.document_count() == 4 and len(lib.chunk_ids()) == chunks
    reasons = [reason for _, reason in lib.status().failures]
    assert len(reasons) == 4 and all("too large" in x and "kept" in x for x in reasons)
    r = sync(lib, [docs], [encoder], SyncOptions(crawl=CrawlOptions()))  # the limit fixed: nothing to redo
    assert (r.unchanged, r.chunks_embedded, r.stale, r.failed) == (4, 0, [], [])
    assert lib.status().failures == []
    # a file that never indexed and is now too large is only a failure, listed once
    (docs / "empty.pdf").write_bytes(b"not a pdf")
    sync(lib, [docs], [encoder])  # the limit the run before remembered
    sync(lib, [docs], [encoder], SyncOptions(crawl=CrawlOptions(max_bytes=5)))
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
    from hefsearch.readers import extract_docx as extract_module  # the DOCX parser's module

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
    r = sync(lib, [docs], [encoder], SyncOptions(crawl=CrawlOptions(max_bytes=512 * 1024)))
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


def test_the_skip_summary_says_what_was_left_out_and_why():
    """'ignored' alone told nobody what: rules and links reached twice are counted apart."""
    from hefsearch.index.crawl import skipped_text

    text = skipped_text({"ignored": 2, "duplicate": 49, "too_large": 0})
    assert text == ("49 links to files indexed under another name, "
                    "2 ignored (--exclude, .hefsearchignore, secret files)")

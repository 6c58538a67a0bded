"""Crawling: every file under the roots is found or reported with its reason, nothing hangs.

The hostile-folder test builds every kind of bad input the ingestion issue lists and checks
that each good file is found and extracted, each bad one is reported with its reason, and
nothing hangs. The feature tests cover ignore files, hidden entries, symlinks, missing and
unreadable roots, and a deterministic order.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import pytest

from hefsearch.index.crawl import DEFAULT_MAX_BYTES, IGNORE_FILE, FoundFile, SkippedFile, crawl
from hefsearch.index.extract import ExtractedText, ExtractionError, extract
from tests.document_builders import garbage_bytes, make_docx, make_pdf

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and symlinks as on POSIX")


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
    items = list(crawl(roots, **kw))
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

    (item,) = list(crawl([tmp_path], max_bytes=64 * 2**20))
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
    items = list(crawl([root], excludes=["*.tmp.md"]))
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
    assert sorted(names(crawl([tmp_path], include_hidden=True))) == [".top.txt", "n.md"]


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
    items = list(crawl([root, real], follow_links=True))
    found = [i for i in items if isinstance(i, FoundFile)]
    # alias.txt links to a file inside the roots: that file is indexed under its own name (here
    # reached first through the linked folder), the alias is left out and says where it points.
    assert [f.path for f in found] == [root / "z-outside.md", root / "link-dir" / "doc.txt"]
    dup = [i for i in items if isinstance(i, SkippedFile)]
    assert {(d.path.name, d.counted_as) for d in dup} == {("alias.txt", "ignored"), ("real", "loop")}
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
    assert gpl.path.name == "GPL" and gpl.counted_as == "ignored" and "GPL-3" in gpl.reason

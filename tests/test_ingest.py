"""Ingestion: safe crawling, text extraction and token-aware chunking.

The hostile-folder test builds every kind of bad input the issue lists and checks that each
good file is found and extracted, each bad one is reported with its reason, and nothing hangs.
Chunking runs against real tokenizers (the tiny generated BERT/XLM-R bundles and the real
all-MiniLM-L6-v2), never a fake.
"""

from __future__ import annotations

import io
import logging
import os
import random
import re
import sys
import time
import zipfile
from pathlib import Path

import pytest

from hefsearch.index.chunk import Chunk, chunk_text
from hefsearch.index.crawl import DEFAULT_MAX_BYTES, IGNORE_FILE, FoundFile, SkippedFile, crawl
from hefsearch.index.extract import (
    SUPPORTED_SUFFIXES,
    ExtractedText,
    ExtractionError,
    decode_text,
    extract,
    html_to_text,
)

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and symlinks as on POSIX")


def make_pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF: one Helvetica text page per item (latin-1 text, lines split on \\n)."""

    def esc(line: str) -> bytes:
        return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")

    n = len(pages)
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(n)) + b"] /Count %d >>" % n,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for i, text in enumerate(pages):
        body = b"BT /F1 11 Tf 14 TL 72 740 Td "
        body += b" ".join(b"(" + esc(line) + b") Tj T*" for line in text.split("\n")) + b" ET"
        objs.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i)
        )
        objs.append(b"<< /Length %d >>\nstream\n" % len(body) + body + b"\nendstream")
    out = b"%PDF-1.4\n"
    offsets = []
    for i, obj in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return out


def make_docx(paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    import docx

    document = docx.Document()
    for p in paragraphs:
        document.add_paragraph(p)
    if table:
        t = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                t.cell(r, c).text = value
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def garbage_bytes(n: int, seed: int = 0) -> bytes:
    """High bytes only: no control bytes (so not 'binary'), but no encoding reads them as text."""
    r = random.Random(seed)
    return bytes(r.randrange(0x80, 0x100) for _ in range(n))


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
    (root / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0" + bytes(100))
    skipped["photo.jpg"] = ("unsupported", ".jpg")
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


# --- extraction units ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, text, encoding",
    [
        ("Grüße, €".encode("utf-8-sig"), "Grüße, €", "utf-8-bom"),
        ("Grüße\r\n日本".encode("utf-16-be"), "Grüße\n日本", "utf-16-be"),  # no BOM: NUL pattern
        (b"\xfe\xff" + "Grüße".encode("utf-16-be"), "Grüße", "utf-16-be-bom"),
        ("Zürich".encode("utf-32"), "Zürich", "utf-32-le-bom"),
        ("Café".encode("latin-1"), "Café", "cp1252"),
        ("Привет, как дела? Это тестовый документ о поездах.".encode("cp1251"), "Привет, как дела? Это тестовый документ о поездах.", "cp1251"),
        ("Zażółć gęślą jaźń. Proszę zapłacić fakturę do końca miesiąca.".encode("cp1250"), "Zażółć gęślą jaźń. Proszę zapłacić fakturę do końca miesiąca.", "cp1250"),
        ("これは日本語のテキストです。東京へ行きます。".encode("shift_jis"), "これは日本語のテキストです。東京へ行きます。", None),
        (b"line one\rline two\r\n", "line one\nline two\n", "utf-8"),
        (b"a\x00b\x00c", "abc", "utf-8"),
    ],
)
def test_decode_text_encodings(data, text, encoding):
    got, enc = decode_text(data)
    assert got == text
    if encoding:
        assert enc == encoding


def test_mostly_utf8_with_one_broken_byte_stays_utf8():
    data = ("Größe ändern, Übersicht öffnen. " * 20).encode() + b"\xff" + "Schluß".encode()
    text, enc = decode_text(data)
    assert "Größe ändern" in text and text.endswith("\ufffdSchluß") and enc.startswith("utf-8")


@pytest.mark.parametrize(
    "data, reason",
    [
        (bytes(range(256)) * 8, "binary data"),
        (b"\x00" * 100, "binary data"),
        (garbage_bytes(2000, seed=5), "not valid UTF-8 nor a known legacy encoding"),
        (b"\xef\xbb\xbf" + b"\xff\xfe\xfd", "byte order mark"),
    ],
)
def test_decode_text_rejects(data, reason):
    with pytest.raises(ExtractionError, match=reason):
        decode_text(data)


@pytest.mark.parametrize("parser", ["lxml", "html.parser"])
def test_html_readable_text(parser):
    pytest.importorskip(parser) if parser == "lxml" else None
    html = b"""<!doctype html><html><head><title>Train &amp; travel</title>
    <style>body { color: red }</style><script>var secret = 'SCRIPT';</script></head>
    <body><h1>Tickets</h1><p>Buy your   ticket
       <b>before</b> boarding.</p><div>Line one<br>line two</div>
    <ul>
      <li>Munich</li>
      <li>Vienna</li>
    </ul><table><tr><td>Zone A</td><td>3 EUR</td></tr></table>
    <noscript>NOSCRIPT</noscript><!-- COMMENT --></body></html>"""
    text = html_to_text(html, parser)
    assert text == (
        "Train & travel\n\nTickets\n\nBuy your ticket before boarding.\n\nLine one\nline two"
        "\n\nMunich\nVienna\n\nZone A | 3 EUR"
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("parser", ["lxml", "html.parser"])
def test_html_nested_40k_deep_is_linear(parser):
    """bs4's insert_before/after is O(subtree) and made this quadratic (5 minutes at this depth);
    the explicit-stack walk takes about a second."""
    n = 40_000
    text = html_to_text(("<div>" * n + "deep <b>text</b>" + "</div>" * n).encode(), parser)
    assert text == "deep text"


def test_html_legacy_charset_from_meta(tmp_path):
    page = tmp_path / "alt.htm"
    page.write_bytes('<meta charset="windows-1252"><p>Grüße aus Köln für 5 €</p>'.encode("cp1252"))
    doc = extract(page)
    assert doc.kind == "html" and doc.text == "Grüße aus Köln für 5 €"


def test_pdf_pages_and_spans(tmp_path, caplog):
    pdf = tmp_path / "doc.pdf"
    pdf.write_bytes(make_pdf(["First page about invoices.", "", "Third page: Grüße (ok)."]))
    doc = extract(pdf)
    assert doc.kind == "pdf"
    assert [p[0] for p in doc.pages] == [1, 2, 3]
    for number, start, end in doc.pages:
        assert doc.text[start:end] == ["First page about invoices.", "", "Third page: Grüße (ok)."][number - 1]


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"%PDF-1.7\n" + bytes(range(256)) * 40, "PDF is corrupt"),
        (make_pdf(["Some text here."])[:200], "PDF is corrupt"),
        (b"GIF89a not a pdf at all", "no %PDF header"),
        (make_pdf([""]), "no text layer"),
    ],
)
def test_pdf_failures_are_reasons_not_log_spam(tmp_path, caplog, data, reason):
    pdf = tmp_path / "bad.pdf"
    pdf.write_bytes(data)
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(ExtractionError, match=re.escape(reason)):
            extract(pdf)
    assert not [r for r in caplog.records if r.name.startswith("pypdf") and r.levelno >= logging.WARNING]


def test_docx_paragraphs_and_tables(tmp_path):
    path = tmp_path / "letter.docx"
    path.write_bytes(make_docx(["Dear tenant,", "", "the rent rises in May."], [["Month", "Rent"], ["May", "900 EUR"]]))
    doc = extract(path)
    assert doc.kind == "docx"
    assert doc.text == "Dear tenant,\n\nthe rent rises in May.\n\nMonth | Rent\nMay | 900 EUR"


@pytest.mark.parametrize("kind", ["truncated", "not_zip", "zip_without_word"])
def test_docx_corrupt(tmp_path, kind):
    good = make_docx(["hello"])
    if kind == "truncated":
        data = good[: len(good) // 2]
    elif kind == "not_zip":
        data = b"This is plain text saved as .docx"
    else:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("readme.txt", "not a word file")
        data = buf.getvalue()
    path = tmp_path / "bad.docx"
    path.write_bytes(data)
    with pytest.raises(ExtractionError, match="DOCX is corrupt"):
        extract(path)


def test_unsupported_suffix_refused(tmp_path):
    path = tmp_path / "x.odt"
    path.write_text("hi")
    with pytest.raises(ExtractionError, match="unsupported"):
        extract(path)
    assert SUPPORTED_SUFFIXES[".htm"] == "html"


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
    # alias.txt is seen first (name order); the same file through the linked folder is a duplicate.
    assert [f.path for f in found] == [root / "alias.txt", root / "z-outside.md"]
    dup = [i for i in items if isinstance(i, SkippedFile)]
    assert {(d.path.name, d.counted_as) for d in dup} == {("doc.txt", "ignored"), ("real", "loop")}
    # without --follow-links the link out of the roots is reported with its target, not followed
    items = list(crawl([root, real]))
    assert [f.path for f in items if isinstance(f, FoundFile)] == [root / "alias.txt"]
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


# --- chunking ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bert(tiny_bert_bundle):
    from hefsearch.embed.encoder import Encoder

    with Encoder.open(tiny_bert_bundle) as enc:
        yield enc


@pytest.fixture(scope="module")
def xlmr(tiny_xlmr_bundle):
    from hefsearch.embed.encoder import Encoder

    with Encoder.open(tiny_xlmr_bundle) as enc:
        yield enc


@pytest.fixture(scope="module")
def minilm(minilm_bundle):
    from hefsearch.embed.encoder import Encoder

    with Encoder.open(minilm_bundle) as enc:
        yield enc


def sentence(r: random.Random, words: int) -> str:
    vocab = ("train ticket station invoice payment router reset light sugar recipe flour rent "
             "contract hiking trail doctor appointment tax deadline raspberry board power").split()
    return " ".join(r.choice(vocab) for _ in range(words)).capitalize() + "."


def corpus_text(seed: int = 0, paragraphs: int = 40) -> str:
    r = random.Random(seed)
    paras = []
    for _ in range(paragraphs):
        lines = [" ".join(sentence(r, r.randint(3, 25)) for _ in range(r.randint(1, 4))) for _ in range(r.randint(1, 2))]
        paras.append("\n".join(lines))
    return "\n\n".join(paras)


def check_chunks(doc: ExtractedText, chunks: list[Chunk], count, max_tokens: int) -> None:
    """The contract: fits, exact spans, ordinals, forward progress, nothing lost."""
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    covered = bytearray(len(doc.text))
    prev_start = -1
    for c in chunks:
        assert c.text == doc.text[c.start:c.end]
        assert c.text and c.text == c.text.strip()
        assert c.tokens == count(c.text) <= max_tokens
        assert c.start > prev_start
        prev_start = c.start
        covered[c.start:c.end] = b"\x01" * (c.end - c.start)
    lost = [i for i, ch in enumerate(doc.text) if not covered[i] and not ch.isspace()]
    assert not lost, f"text not in any chunk at {lost[:5]}"


@pytest.mark.parametrize("which", ["bert", "xlmr"])
@pytest.mark.parametrize("overlap", [0, 8])
def test_chunks_fit_window_and_spans(request, which, overlap):
    enc = request.getfixturevalue(which)
    text = corpus_text(1) + "\n\n" + "\n\n".join(
        ["Wo ist der nächste Bahnhof? Die Rechnung ist fällig.", "最寄りの駅はどこですか？切符を買います。",
         "Где находится ближайший вокзал?", "x" * 3000, " ".join(["Supercalifragilistic"] * 400)]
    )
    doc = ExtractedText(text, "text")
    chunks = chunk_text(doc, enc.count_tokens, enc.max_tokens, overlap_tokens=overlap)
    check_chunks(doc, chunks, enc.count_tokens, enc.max_tokens)
    if overlap == 0:
        assert all(b.start >= a.end for a, b in zip(chunks, chunks[1:]))
    assert any(c.cut for c in chunks), "the 3000-char word had to be cut"
    assert sum(c.tokens for c in chunks) / len(chunks) > 0.5 * enc.max_tokens, "chunks are reasonably full"


def test_prefers_paragraph_then_sentence_then_word(bert):
    count, limit = bert.count_tokens, bert.max_tokens
    r = random.Random(3)
    # Paragraphs of two short sentences (each paragraph well under half the window).
    paras = [f"{sentence(r, 6)} {sentence(r, 5)}" for _ in range(30)]
    doc = ExtractedText("\n\n".join(paras), "text")
    chunks = chunk_text(doc, count, limit, overlap_tokens=0)
    assert len(chunks) > 3
    for c in chunks:
        assert c.end == len(doc.text) or doc.text[c.end:c.end + 2] == "\n\n", "ends at a paragraph"
        assert not c.cut
    # One paragraph of many sentences: ends at sentence ends.
    doc = ExtractedText(" ".join(sentence(r, r.randint(4, 9)) for _ in range(60)), "text")
    chunks = chunk_text(doc, count, limit, overlap_tokens=0)
    assert len(chunks) > 3 and all(c.text.endswith(".") and not c.cut for c in chunks)
    # One endless sentence: cut at spaces, flagged.
    doc = ExtractedText(" ".join(["platform"] * 500), "text")
    chunks = chunk_text(doc, count, limit, overlap_tokens=0)
    assert len(chunks) > 3
    assert all(c.cut for c in chunks[:-1]) and not chunks[-1].cut
    assert all(doc.text[c.end] == " " for c in chunks[:-1]), "cut between words, not inside one"


def test_paragraph_preferred_only_when_chunk_stays_half_full(bert):
    count, limit = bert.count_tokens, bert.max_tokens
    r = random.Random(4)
    tiny = "Tiny paragraph."
    rest = " ".join(sentence(r, 6) for _ in range(40))
    doc = ExtractedText(tiny + "\n\n" + rest, "text")
    first = chunk_text(doc, count, limit, overlap_tokens=0)[0]
    assert first.end > len(tiny) + 2, "does not stop after a tiny first paragraph"
    assert first.tokens >= limit // 2


def test_overlap_repeats_tail_within_budget(bert):
    count, limit = bert.count_tokens, bert.max_tokens
    base = count("")
    r = random.Random(5)
    doc = ExtractedText(" ".join(sentence(r, r.randint(3, 7)) for _ in range(80)), "text")
    chunks = chunk_text(doc, count, limit, overlap_tokens=12)
    assert len(chunks) > 4
    for a, b in zip(chunks, chunks[1:]):
        assert a.start < b.start < a.end, "consecutive chunks overlap inside one paragraph"
        shared = doc.text[b.start:a.end]
        assert count(shared) - base <= 12
        assert b.start >= a.start + (a.end - a.start) // 2, "overlap never exceeds half a chunk"
        assert doc.text[b.start - 1] == " ", "overlap starts at a word/sentence"
    # No overlap across a paragraph break.
    paras = ["\n\n".join(" ".join(sentence(r, 6) for _ in range(3)) for _ in range(20))]
    doc = ExtractedText(paras[0], "text")
    chunks = chunk_text(doc, count, limit, overlap_tokens=12)
    for a, b in zip(chunks, chunks[1:]):
        if doc.text[a.end:a.end + 2] == "\n\n":
            assert b.start >= a.end


def test_pdf_page_of_each_chunk(bert, tmp_path):
    r = random.Random(6)
    pages = ["\n".join(sentence(r, 8) for _ in range(12)) for _ in range(4)]
    pdf = tmp_path / "p.pdf"
    pdf.write_bytes(make_pdf(pages))
    doc = extract(pdf)
    chunks = chunk_text(doc, bert.count_tokens, bert.max_tokens, overlap_tokens=8)
    check_chunks(doc, chunks, bert.count_tokens, bert.max_tokens)
    assert {c.page for c in chunks} == {1, 2, 3, 4}
    for c in chunks:
        number, start, end = next(p for p in doc.pages if p[1] <= c.start <= p[2])
        assert c.page == number
    assert all(c.page is None for c in chunk_text(ExtractedText("plain text.", "text"), bert.count_tokens, 64))


def test_cjk_sentences_without_spaces(minilm):
    count = minilm.count_tokens
    ja = "東京から大阪まで新幹線で行きます。切符は駅の窓口で買えます！料金はいくらですか？" * 6
    zh = "光合作用把光能转化为化学能。植物在叶绿体中制造葡萄糖！这个过程需要水和二氧化碳？" * 6
    for text in (ja, zh):
        doc = ExtractedText(text, "text")
        chunks = chunk_text(doc, count, 48, overlap_tokens=0)
        check_chunks(doc, chunks, count, 48)
        assert len(chunks) > 2
        assert all(c.text[-1] in "。！？" and not c.cut for c in chunks), [c.text[-3:] for c in chunks]
    # A CJK "sentence" longer than the window is cut between characters (a word break there).
    doc = ExtractedText("漢字" * 200, "text")
    chunks = chunk_text(doc, count, 32, overlap_tokens=4)
    check_chunks(doc, chunks, count, 32)
    assert all(c.cut for c in chunks[:-1])


def test_real_tokenizer_efficiency_linear(minilm):
    """Tokenizer work stays a small multiple of the text (no O(n^2) recounting)."""
    counted = [0, 0]

    def count(text: str) -> int:
        counted[0] += 1
        counted[1] += len(text)
        return minilm.count_tokens(text)

    text = corpus_text(7, paragraphs=300)
    doc = ExtractedText(text, "text")
    chunks = chunk_text(doc, count, minilm.max_tokens, overlap_tokens=32)
    check_chunks(doc, chunks, minilm.count_tokens, minilm.max_tokens)
    assert counted[1] <= 4 * len(text), counted
    # One 200 kB line of words, no punctuation: still a few passes, not one per chunk over the rest.
    counted[:] = [0, 0]
    line = " ".join(random.Random(8).choice(["alpha", "beta", "gamma", "delta"]) for _ in range(35_000))
    chunks = chunk_text(ExtractedText(line, "text"), count, minilm.max_tokens, overlap_tokens=32)
    assert counted[1] <= 5 * len(line), counted
    assert all(c.tokens <= minilm.max_tokens for c in chunks)


def test_degenerate_inputs(bert):
    count = bert.count_tokens
    assert chunk_text(ExtractedText("", "text"), count, 64) == []
    assert chunk_text(ExtractedText(" \n\n\t ", "text"), count, 64) == []
    (only,) = chunk_text(ExtractedText("  Hello.  ", "text"), count, 64)
    assert (only.start, only.end, only.text, only.cut) == (2, 8, "Hello.", False)
    with pytest.raises(ValueError, match="no room"):
        chunk_text(ExtractedText("Hello.", "text"), count, count(""))


# --- the sample corpus shipped in the repo --------------------------------------------------------

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample-corpus"


def sample_queries() -> list[tuple[str, list[str], str]]:
    lines = (SAMPLE / "queries.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "query\texpected\tnote"
    rows = [line.split("\t") for line in lines[1:] if line.strip()]
    return [(q, expected.split("|"), note) for q, expected, note in rows]


def test_sample_corpus_extracts_completely():
    items = list(crawl([SAMPLE]))
    found = [i for i in items if isinstance(i, FoundFile)]
    skipped = [i for i in items if isinstance(i, SkippedFile)]
    assert [(s.path.name, s.counted_as) for s in skipped] == [("queries.tsv", "ignored")]
    assert 28 <= len(found) <= 40
    assert {f.kind for f in found} == {"text", "markdown", "html", "pdf", "docx"}
    assert sum(f.size for f in found) < 300 * 1024
    texts = {f.path.name: extract(f.path).text for f in found}
    assert all(len(t.encode()) > 600 for t in texts.values()), "every document has a few paragraphs"
    everything = "".join(texts.values())
    for script in (r"[\u3040-\u30ff]", r"[\u4e00-\u9fff]", r"[\uac00-\ud7af]", r"[\u0400-\u04ff]", "ß", "ñ", "ł", "ç"):
        assert re.search(script, everything), script  # ja, zh, ko, ru, de, es, pl, fr at least
    for query, expected, note in sample_queries():
        assert all(name in texts for name in expected), (query, expected)
        if note.startswith("keyword"):
            assert query in texts[expected[0]]
    assert sum("cross-lingual" in note for _, _, note in sample_queries()) >= 10


def test_sample_corpus_english_queries_find_their_document(minilm):
    """The English-only all-MiniLM-L6-v2 answers the en->en sample queries from the corpus,
    which checks that the documents and queries fit each other (multilingual queries need the
    multilingual model and are exercised by the search tests)."""
    import numpy as np

    docs, names_ = [], []
    for item in crawl([SAMPLE]):
        if isinstance(item, FoundFile):
            doc = extract(item.path)
            for c in chunk_text(doc, minilm.count_tokens, minilm.max_tokens):
                docs.append(c.text)
                names_.append(item.path.name)
    vectors = minilm.encode_passages(docs)
    english = [(q, expected) for q, expected, note in sample_queries() if note.startswith("en->en")]
    assert len(english) >= 4
    queries = minilm.encode_queries([q for q, _ in english])
    for (query, expected), qv in zip(english, queries):
        best = names_[int(np.argmax(vectors @ qv))]
        assert best in expected, (query, best)


@pytest.mark.parametrize("which", ["bert", "xlmr"])
def test_chunking_random_texts_keep_the_contract(request, which):
    """Random mixes of words, CJK, punctuation, blank lines, long words, accents and emoji,
    with windows down to a few tokens of room and overlaps larger than allowed."""
    enc = request.getfixturevalue(which)
    pieces = ["word", "Straße", "東京", "。", "！", ". ", "? ", "\n", "\n\n", " \n \n ", "  ", "\t",
              "x" * 300, "e\u0301", "🙂", "“", ".”", "Mr.", "3.14", "—", "漢字かな", " ", " ", "abc def"]
    r = random.Random(11)
    base = enc.count_tokens("")
    for _ in range(40):
        text = "".join(r.choice(pieces) for _ in range(r.randint(0, 300)))
        limit = r.choice([base + 3, base + 10, 32, enc.max_tokens])
        doc = ExtractedText(text, "text")
        chunks = chunk_text(doc, enc.count_tokens, limit, overlap_tokens=r.choice([0, 4, 100]))
        check_chunks(doc, chunks, enc.count_tokens, limit)

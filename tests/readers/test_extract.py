"""Text extraction: encodings, HTML, PDF and DOCX become readable text or a reason, never a
crash or log spam; memory follows the text, not the markup; and every container is hostile until
proven otherwise.

Extraction memory is measured in a child process (Linux peak RSS, ``VmHWM``, reset just before
extracting; the file's bytes, read by the extractor, count), so the test process's own memory
does not. Before, the hostile round's 11 MB file of a million nested ``<div>`` took ~670 MB (a
BeautifulSoup tree: ~60 bytes of memory per byte of file); the bound here is 3 bytes per byte
of file, measured at 2.0 (``bench/hostile_extract.py`` prints the whole hostile corpus).

Containers: zip bombs, entity expansion, deeply nested MIME, a 500 MB base64 attachment, an mbox
with a malformed "From " line, an EPUB whose spine points outside the archive, a
decompression-bomb image. Each is refused within the memory and size caps with a line a person
understands, and the rest of the folder is indexed.
"""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from hefsearch.embed import Encoder
from hefsearch.readers.extract import SUPPORTED_SUFFIXES, ExtractionError, decode_text, extract, html_to_text
from hefsearch.readers.ocr import available as ocr_available
from hefsearch.readers.extract_mail import read_message, split_mbox
from hefsearch.index.library import Library
from hefsearch.index.sync import SyncOptions, sync
from hefsearch.index.crawl_options import CrawlOptions
from tests.support.container_builders import (LazyMbox, billion_laughs_odt, make_eml, make_epub, make_mbox, make_odt,
                                      nested_mime, png_bomb, xlsx_zip_bomb)
from tests.support.document_builders import garbage_bytes, make_docx, make_pdf

#: the peak-memory tests reset Linux's peak RSS (``/proc/self/clear_refs``)
peak_rss = pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux peak-RSS reset")


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
    path = tmp_path / "x.xyz"
    path.write_text("hi")
    with pytest.raises(ExtractionError, match="unsupported"):
        extract(path)
    assert SUPPORTED_SUFFIXES[".htm"] == "html"


# Memory follows the text, not the markup: HTML is parsed as a stream (no tree).

#: peak memory of an extraction, in bytes per byte of the file
BYTES_PER_FILE_BYTE = 3

CHILD = """
import json, sys, time
from pathlib import Path
from hefsearch.readers.extract import extract
import bs4, lxml.etree  # imported before measuring: not the extraction's memory

def hwm():
    return next(int(l.split()[1]) for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM:"))

path = Path(sys.argv[1])
extract(Path(sys.argv[2]))  # warm: first-use allocations of the parsers
data = path.read_bytes()
Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
before = hwm()
text = extract(path).text
print(json.dumps({"kb": hwm() - before, "text": text[:100], "chars": len(text)}))
"""


def peak_extraction(path: Path, tmp_path: Path) -> dict:
    small = tmp_path / "small.html"
    small.write_text("<p>warm <b>up</b></p>")
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(small)], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@peak_rss
@pytest.mark.parametrize("name, markup, text", [
    # the hostile round's file: 11 MB
    ("nested-div.html", "<div>" * 1_000_000 + "deep <b>text</b>" + "</div>" * 1_000_000, "deep text"),
    # inline nesting with whitespace between the tags: a million strings a tree would keep
    ("nested-span.html", "<span>\n" * 300_000 + "deep" + "</span>" * 300_000, "deep"),
])
def test_nested_html_extracts_in_memory_bounded_by_the_file(tmp_path, name, markup, text):
    path = tmp_path / name
    path.write_text(markup)
    size = path.stat().st_size
    got = peak_extraction(path, tmp_path)
    assert got["text"] == text
    assert got["kb"] * 1024 <= BYTES_PER_FILE_BYTE * size, f"{got['kb'] / 1024:.0f} MB for a {size / 2**20:.0f} MB file"


@peak_rss
def test_a_long_text_in_one_line_costs_a_few_times_its_size(tmp_path):
    """One 8 MB paragraph: the whitespace is collapsed piece by piece (one re.sub over the whole
    text lists every match: ~20 bytes per byte of text). The file, a copy the binary check
    makes, the line's pieces and the line: 6 bytes per byte at most (measured 4.9)."""
    path = tmp_path / "one-line.html"
    path.write_text("<p>" + "lorem ipsum dolor sit amet " * 300_000 + "</p>")
    got = peak_extraction(path, tmp_path)
    assert got["chars"] == len(("lorem ipsum dolor sit amet " * 300_000).strip())
    assert got["kb"] * 1024 <= 6 * path.stat().st_size


@pytest.mark.parametrize("parser", ["lxml", "html.parser"])
def test_streaming_keeps_the_text_a_tree_gave(parser):
    """Structure, whitespace, pre, cells, title, entities: the same text as the tree walk it
    replaced (compared on 600 real pages and 1500 random ones while writing it)."""
    html = (b"<html><head><title> Tr\xc3\xa4in &amp; travel </title><style>p{}</style></head><body>"
            b"<p>one  <i>two</i>\n three</p>\n  \n<div><div>deep</div></div>"
            b"<pre>a\n  b\n\nc</pre><table><tr><td>x</td><td></td><td>y</td></tr><tr><th>h</th></tr></table>"
            b"<ul><li>i1<li>i2</ul>x<br><br>y&nbsp;&nbsp;z<template><title>no</title>t</template>"
            b"<script>var s = '<p>no</p>';</script><!-- c --> end</body></html>")
    assert html_to_text(html, parser) == (
        "Träin & travel\n\none two three\n\ndeep\n\na\nb\n\nc\n\nx |  | y\nh\n\ni1\ni2\n\nx\n\ny z end")


@peak_rss
def test_a_big_sheet_streams_in_memory_bounded_by_its_text(tmp_path):
    """A 30 MB sheet (a 3 MB XLSX) is read row by row: its peak stays a few bytes per character
    of text and below the size of its XML (a tree of it takes ~10x that)."""
    import random

    from tests.support.container_builders import xlsx_zip_bomb

    rng = random.Random(0)
    words = tuple("".join(rng.choice("abcdefghij") for _ in range(8)).encode() for _ in range(5000))
    path = tmp_path / "big.xlsx"
    path.write_bytes(xlsx_zip_bomb(30, words))  # packs ~10x, under the bomb ratio
    got = peak_extraction(path, tmp_path)
    assert got["chars"] > 5_000_000 and got["text"].startswith("Sheet: S")
    assert got["kb"] * 1024 < 8 * got["chars"] and got["kb"] * 1024 < 30 * 2**20


# Containers: each bomb or trap is refused within the caps, the rest of the folder indexed.

MAX = 20 * 2**20  # the crawler's default --max-size


def _refused(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ExtractionError) as e:
        extract(path, max_bytes=MAX)
    return e.value.message


def test_zip_bomb_is_refused_from_its_declared_sizes(tmp_path):
    data = xlsx_zip_bomb(64)
    assert len(data) < 1 << 20  # 64 MB of XML in a file of a few hundred KB
    message = _refused(tmp_path, "bomb.xlsx", data)
    assert "zip bomb" in message and "sheet1.xml" in message


def test_entity_expansion_is_not_expanded(tmp_path):
    message = _refused(tmp_path, "laughs.odt", billion_laughs_odt(10))
    assert "entity" in message.lower() and "content.xml" in message


def test_a_few_entities_stay_unexpanded_and_the_text_is_read(tmp_path):
    path = tmp_path / "small-laughs.odt"
    path.write_bytes(billion_laughs_odt(2))  # 10 'lol': under libxml2's amplification limit
    text = extract(path, max_bytes=MAX).text
    assert "start" in text and "end" in text and "lol" * 10 not in text


def test_deeply_nested_mime_is_refused_and_shallow_nesting_read():
    with pytest.raises(ExtractionError, match="MIME"):
        read_message(nested_mime(5_000))
    assert "deep text" in read_message(nested_mime(15)).text


def test_500_mb_base64_attachment_is_skipped_without_being_held():
    """The message is refused as the stream passes the cap; the next message is read."""
    after = b"From b@example.org Fri Mar  1 09:31:00 2024\nSubject: next\n\nsmall body\n"
    stream = LazyMbox(500 * 2**20, then=after)
    out = list(split_mbox(stream, MAX))
    assert stream.read_bytes > 500 * 2**20  # all of it went by
    assert [(n, raw is None) for n, raw, _ in out] == [(1, True), (2, False)]
    assert "larger than 20.0 MiB" in out[0][2] and b"small body" in out[1][1]
    # memory does not follow the attachment: the same peak for 4 and 20 MB
    peaks = []
    for size in (4, 20):
        tracemalloc.start()
        list(split_mbox(LazyMbox(size * 2**20, then=after), 2 * 2**20))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 8 * 2**20 and peaks[1] < 2 * peaks[0] + 2**20


def test_a_bad_attachment_is_named_and_the_message_kept():
    msg = read_message(make_eml("Hi", "see attached", attachments=[
        ("broken.pdf", b"%PDF-1.4 " + b"x" * 3000, "application/pdf"),
        ("notes.txt", b"the attached kiwi", "text/plain")]), max_chars=MAX)
    assert "see attached" in msg.text and "Attachment: broken.pdf" in msg.text and "kiwi" in msg.text
    assert len(msg.notes) == 1 and msg.notes[0].startswith("attachment broken.pdf: PDF is corrupt")


def test_malformed_from_lines():
    body = make_eml("One", "From here on the letter goes on without quoting.\nFrom the start.")
    box = (b"From a@example.org Fri Mar  1 09:30:00 2024\n" + body + b"\n"
           b"From b@example.org Fri Mar  1 09:31:00 2024\n" + make_eml("Two", "second"))
    import io

    raws = [raw for _, raw, _ in split_mbox(io.BytesIO(box), MAX)]
    assert len(raws) == 2 and b"From here on" in raws[0]  # a body line is not a separator
    with pytest.raises(ExtractionError, match="not an mbox"):
        list(split_mbox(io.BytesIO(b"From nobody\n" + body), MAX))


def test_epub_spine_outside_the_archive_is_refused(tmp_path):
    for href in ("../../../../etc/passwd", "../../secret.xhtml", "http://example.org/ch.xhtml"):
        message = _refused(tmp_path, "book.epub", make_epub([("One", "text")], hrefs=[href]))
        assert "outside the archive" in message


def test_decompression_bomb_image_is_refused_from_its_header(tmp_path):
    data = png_bomb(100_000)
    assert len(data) < 1000
    _refused(tmp_path, "warm.png", png_bomb(50_000))  # Pillow's imports are not the image's memory
    tracemalloc.start()
    message = _refused(tmp_path, "bomb.png", data)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert "decompression bomb" in message and peak < 2 * MAX  # decoded: 10,000 MB (the read buffer: MAX)


@pytest.fixture
def encoder(tiny_bert_bundle):
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        yield enc


def test_a_hostile_folder_is_refused_file_by_file_and_the_rest_indexed(tmp_path, encoder):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bomb.xlsx").write_bytes(xlsx_zip_bomb(64))
    (docs / "laughs.odt").write_bytes(billion_laughs_odt(10))
    (docs / "deep.eml").write_bytes(nested_mime(5_000))
    (docs / "book.epub").write_bytes(make_epub([("One", "text")], hrefs=["../../etc/passwd"]))
    (docs / "bomb.png").write_bytes(png_bomb())
    (docs / "bad.mbox").write_bytes(b"hello\n" + make_mbox([make_eml("x", "y")]))
    (docs / "good.odt").write_bytes(make_odt(["Title", "The capybara is indexed."]))
    (docs / "good.mbox").write_bytes(make_mbox([make_eml("ok", "The wombat is indexed.", message_id="<w@x>")]))
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [encoder], SyncOptions(crawl=CrawlOptions(max_bytes=MAX)))
    failed = dict(r.failed)
    # without Tesseract an image is never decoded (reported as needing OCR), so it cannot fail
    refused = ("bomb.xlsx", "laughs.odt", "book.epub", "bad.mbox") + (("bomb.png",) if ocr_available() else ())
    assert set(failed) == {str(docs / n) for n in refused} | {
        str(docs / "deep.eml" / "sha-" ) + p.split("/sha-")[1] for p in failed if "/deep.eml/" in p}
    assert any("/deep.eml/" in p and "MIME" in reason for p, reason in r.failed)
    texts = " ".join(t for (t,) in lib.query("SELECT text FROM chunks"))
    assert "capybara" in texts and "wombat" in texts
    lib.close()

"""Text extraction: encodings, HTML, PDF and DOCX become readable text or a reason, never a
crash or log spam."""

from __future__ import annotations

import io
import logging
import re
import zipfile

import pytest

from hefsearch.index.extract import SUPPORTED_SUFFIXES, ExtractionError, decode_text, extract, html_to_text
from tests.document_builders import garbage_bytes, make_docx, make_pdf


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

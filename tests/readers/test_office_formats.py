"""EPUB, OpenDocument, PPTX and XLSX: text in spine, page, slide and sheet order, each section
named at its start and spanned as a page (so a hit names its chapter, slide or sheet)."""

from __future__ import annotations

import io
import zipfile

import pytest

from hefsearch.readers.extract_epub import extract_epub
from hefsearch.readers.extract_office import extract_odf, extract_pptx, extract_xlsx
from tests.support.container_builders import make_epub, make_odp, make_ods, make_odt, make_pptx, make_xlsx


def _section(doc, number: int) -> str:
    _, start, end = next(s for s in doc.pages if s[0] == number)
    return doc.text[start:end]


def _rewrite(data: bytes, name: str, change) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            dst.writestr(info.filename, change(body) if info.filename == name else body)
    return out.getvalue()


def test_pptx_slides_in_show_order_not_file_order():
    data = make_pptx([["first file"], ["second file"]])
    # the show lists slide 2 first: its order wins over the part names
    data = _rewrite(data, "ppt/presentation.xml", lambda b: b.replace(b'r:id="rId1"', b'r:id="rIdX"')
                    .replace(b'r:id="rId2"', b'r:id="rId1"').replace(b'r:id="rIdX"', b'r:id="rId2"'))
    doc = extract_pptx(data)
    assert _section(doc, 1) == "Slide 1\n\nsecond file" and _section(doc, 2) == "Slide 2\n\nfirst file"


def test_xlsx_sheets_named_in_workbook_order_with_shared_and_inline_values():
    doc = extract_xlsx(make_xlsx({"Budget": [["Item", "Cost"], ["Rent", "950"]], "Notes": [["call the bank"]]}))
    assert _section(doc, 1) == "Sheet: Budget\n\nItem | Cost\nRent | 950"
    assert _section(doc, 2) == "Sheet: Notes\n\ncall the bank"


def test_epub_chapters_in_spine_order():
    data = make_epub([("One", "alpha text"), ("Two", "beta text")])
    data = _rewrite(data, "OEBPS/content.opf", lambda b: b.replace(
        b'<itemref idref="c1"/><itemref idref="c2"/>', b'<itemref idref="c2"/><itemref idref="c1"/>'))
    doc = extract_epub(data)
    assert _section(doc, 1).startswith("Chapter 1\n\nTwo") and "beta text" in _section(doc, 1)
    assert "alpha text" in _section(doc, 2)


@pytest.mark.parametrize("toc", ["nav", "ncx"])
def test_epub_chapters_are_named_as_the_book_names_them_and_its_contents_page_is_no_chapter(toc):
    data = make_epub([("One", "alpha text"), ("Two", "beta text")], toc=toc)
    doc = extract_epub(data)
    assert _section(doc, 1) == "Part 1: One\n\nOne\n\nalpha text"
    assert _section(doc, 2) == "Part 2: Two\n\nTwo\n\nbeta text"
    assert "Contents" not in doc.text and len(doc.pages) == 2


def test_a_chapter_heading_that_repeats_its_title_is_said_once():
    data = make_epub([("One", "alpha text")], toc="nav")
    data = _rewrite(data, "OEBPS/nav.xhtml", lambda b: b.replace(b"Part 1: One", b"One"))
    assert _section(extract_epub(data), 1) == "One\n\nalpha text"


def test_opendocument_text_sheets_and_slides():
    odt = extract_odf(make_odt(["Title", "A paragraph with  two spaces."]))
    assert odt.pages is None and "A paragraph with" in odt.text
    ods = extract_odf(make_ods({"Jan": [["Rent", "950"]], "Feb": [["Power", "61"]]}))
    assert _section(ods, 1) == "Sheet: Jan\n\nRent | 950" and _section(ods, 2) == "Sheet: Feb\n\nPower | 61"
    odp = extract_odf(make_odp([["Intro"], ["Results"]]))
    assert _section(odp, 2) == "Slide 2: page2\n\nResults"


def test_ods_repeated_cells_are_read_once():
    """number-columns-repeated="1000000" (a classic ODS bomb) costs one cell, not a million."""
    doc = extract_odf(make_ods({"S": [["x"]]}, repeat=1_000_000))
    assert doc.text == "Sheet: S\n\nx"

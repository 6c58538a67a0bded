"""The table of file formats (hefsearch.readers.formats) is the one list: extraction, the TUI's
ways of opening a hit and its filters, the search filters and ``index --help`` follow it."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from hefsearch.readers import formats
from hefsearch.readers.extract import ExtractedText, ExtractionError, extract
from hefsearch.readers import ocr
from tests.support.container_builders import (make_eml, make_epub, make_mbox, make_odp, make_ods, make_odt, make_pptx,
                                      make_xlsx, render_page)
from tests.support.document_builders import make_docx, make_pdf

_RENT = "The rent rises in May."
_PAGE = ["THE RENT RISES IN MAY."]
SAMPLES = {
    ".txt": b"The rent rises in May.\n",
    ".rst": b"Rent\n====\n\nThe rent rises in May.\n",
    ".md": b"# Rent\n\nThe rent rises in May.\n",
    ".html": b"<html><body><p>The rent rises in May.</p></body></html>",
    ".htm": b"<p>The rent rises in May.</p>",
    ".pdf": make_pdf(["The rent rises in May."]),
    ".docx": make_docx(["The rent rises in May."]),
    ".odt": make_odt(["Rent", _RENT]),
    ".ods": make_ods({"Rent": [[_RENT]]}),
    ".odp": make_odp([[_RENT]]),
    ".pptx": make_pptx([[_RENT]]),
    ".xlsx": make_xlsx({"Rent": [[_RENT]]}),
    ".epub": make_epub([("Rent", _RENT)]),
    ".eml": make_eml("Rent", _RENT),
    ".mbox": make_mbox([make_eml("Rent", _RENT)]),
    ".mbx": make_mbox([make_eml("Rent", _RENT)]),
    # images: read by OCR (the text compared case-insensitively)
    ".png": render_page(_PAGE, size=48),
    ".jpg": render_page(_PAGE, size=48, fmt="JPEG"),
    ".jpeg": render_page(_PAGE, size=48, fmt="JPEG"),
    ".tif": render_page(_PAGE, size=48, fmt="TIFF"),
    ".tiff": render_page(_PAGE, size=48, fmt="TIFF"),
    ".webp": render_page(_PAGE, size=48, fmt="WEBP"),
}


def test_every_suffix_of_the_table_is_extracted_as_its_kind(tmp_path):
    assert set(SAMPLES) == set(formats.SUPPORTED_SUFFIXES)  # a new row needs a sample here
    for suffix, data in SAMPLES.items():
        path = tmp_path / f"letter{suffix}"
        path.write_bytes(data)
        if formats.SUPPORTED_SUFFIXES[suffix] == "image" and not ocr.available():
            with pytest.raises(ocr.OcrMissing):
                extract(path)
            continue
        doc = extract(path)
        assert doc.kind == formats.SUPPORTED_SUFFIXES[suffix], suffix
        assert "rent rises in may" in doc.text.lower(), suffix


def test_extract_dispatches_through_the_table(tmp_path, monkeypatch):
    """A row added to the table is all extract() needs to read a new kind."""
    monkeypatch.setitem(formats.BY_KIND, "shout", formats.Format(
        "shout", (".shout",), "tests.readers.test_formats:_shout", formats.EDITOR, "text"))
    path = tmp_path / "a.shout"
    path.write_bytes(b"quiet words")
    doc = extract(path, kind="shout")
    assert (doc.text, doc.kind) == ("QUIET WORDS", "shout")
    with pytest.raises(ExtractionError, match="no extractor for kind 'whisper'"):
        extract(path, kind="whisper")


def _shout(data: bytes, max_chars: int | None = None) -> ExtractedText:
    return ExtractedText(text=data.decode().upper())


def test_every_reader_runs_within_its_documents_budget(tmp_path, monkeypatch):
    """The row's reader is called inside a budget named as the row says (its messages name the
    format); a streamed kind's budget is each document's own, so none is open around it."""
    import inspect

    from hefsearch.readers import budget

    for row in formats.FORMATS:  # every reader takes the Reader's arguments
        assert list(inspect.signature(row.reader_function()).parameters)[:2] == ["data", "max_chars"], row.kind
    seen = []
    monkeypatch.setattr(sys.modules[__name__], "_shout", lambda data, max_chars=None: (
        seen.append((budget.current() and budget.current().what, max_chars)) or ExtractedText(text="x")))
    path = tmp_path / "a.shout"
    path.write_bytes(b"quiet words")
    for row, expected in ((formats.Format("shout", (".shout",), "tests.readers.test_formats:_shout",
                                          formats.EDITOR, "text", name="SHOUT file"), "SHOUT file"),
                          (formats.Format("shout", (".shout",), "tests.readers.test_formats:_shout",
                                          formats.EDITOR, "text", streamed=True), None)):
        monkeypatch.setitem(formats.BY_KIND, "shout", row)
        extract(path, kind="shout", max_bytes=1000)
        assert seen.pop() == (expected, 1000)
    assert budget.current() is None  # closed after the document


def test_the_tui_opens_and_filters_what_the_table_says():
    from hefsearch.tui.launch import NoDesktop, plan_open
    from hefsearch.tui.present import KIND_FILTERS

    listed = [k for kinds in KIND_FILTERS.values() if kinds for k in kinds]
    assert sorted(listed) == sorted(formats.KINDS) and KIND_FILTERS["all"] is None
    desktop, console = {"EDITOR": "nano", "DISPLAY": ":0"}, {"EDITOR": "nano"}
    for f in formats.FORMATS:
        name = f"/docs/a{f.suffixes[0]}" if f.suffixes else "/docs/a.1"  # man pages: found by content
        plan = plan_open(name, line=3, kind=f.kind, env=desktop, platform="linux")
        assert (plan.argv[0] == "xdg-open") == (f.opens_with == formats.OPENER), f.kind
        if f.opens_with == formats.OPENER:  # without a desktop: said, and the TUI's reader instead
            with pytest.raises(NoDesktop):
                plan_open(name, line=3, kind=f.kind, env=console, platform="linux")
        else:
            assert plan_open(name, line=3, kind=f.kind, env=console, platform="linux").terminal


def test_search_filters_and_index_help_list_the_tables_suffixes():
    from hefsearch.cli.main import main
    from hefsearch.search.filters import normalise_types

    for suffix in formats.SUPPORTED_SUFFIXES:
        assert normalise_types([suffix.upper()]) == (suffix[1:],)
    assert normalise_types(list(formats.KINDS)) == formats.KINDS
    out = CliRunner().invoke(main, ["index", "--help"], terminal_width=200).output
    assert "Supported: " + formats.suffix_list() + "," in " ".join(out.split())

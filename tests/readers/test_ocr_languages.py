"""OCR keeps accents: a page read with every language in one run loses them ("nino", "pina"),
so a page whose text is in another installed language is read again in it, and the next page of
the same document starts in that language (:func:`hefsearch.readers.ocr.ocr_image`)."""

from __future__ import annotations

import pytest

from hefsearch.readers import ocr
from hefsearch.readers.budget import reading

pytestmark = pytest.mark.skipif(not ocr.available(), reason="Tesseract is not installed (.ci/run installs it)")

SPANISH = ["El niño comió piña en el año pasado.", "La información de su pensión está en el anexo.",
           "¿Podría confirmar la dirección de envío?"]
ACCENTED = ["niño", "comió", "piña", "año", "información", "pensión", "está", "¿Podría", "dirección", "envío"]


def serif_page(lines: list[str], size: int = 28) -> bytes:
    """A page in DejaVu Serif (where one run loses Spanish accents), as bench/ocr_languages.py renders it."""
    from hefsearch.bench.ocr_languages import render

    try:
        return render(lines, size, "DejaVuSerif.ttf", cjk=False)
    except OSError:
        pytest.skip("fonts-dejavu-core is not installed (.ci/run installs it)")


@pytest.fixture
def runs(monkeypatch):
    """The language packs of each Tesseract run."""
    seen: list[tuple[str, ...]] = []
    real = ocr.run_tesseract

    def counted(exe, langs, png, what, timeout_s, memory_bytes):
        seen.append(tuple(langs))
        return real(exe, langs, png, what, timeout_s, memory_bytes)

    monkeypatch.setattr(ocr, "run_tesseract", counted)
    return seen


def test_a_page_in_another_language_is_read_again_in_it_and_keeps_its_accents(runs):
    _, installed = ocr._tesseract()
    if "spa" not in installed:
        pytest.skip("tesseract-ocr-spa is not installed")
    page = serif_page(SPANISH)
    one_run = ocr.run_tesseract(*ocr._tesseract()[:1], installed, page, "page", 120, 1536 << 20)
    runs.clear()
    text = ocr.ocr_image(page)
    kept = [w for w in ACCENTED if w in text]
    assert kept == ACCENTED, text
    assert sum(w in one_run for w in ACCENTED) < len(ACCENTED), "one run kept every accent: the test shows nothing"
    assert runs == [installed, ("spa", installed[0])]


def test_the_next_page_of_a_document_starts_in_its_language(runs):
    _, installed = ocr._tesseract()
    if "spa" not in installed:
        pytest.skip("tesseract-ocr-spa is not installed")
    with reading("PDF", ocr=True):
        first = ocr.ocr_image(serif_page(SPANISH))
        second = ocr.ocr_image(serif_page(SPANISH[::-1]))
        third = ocr.ocr_image(serif_page(["The invoice lists the amount due and the payment",
                                          "deadline of the fourteenth of March."]))
    assert all(w in first and w in second for w in ACCENTED)
    assert "invoice" in third
    # page 2: one run in Spanish; page 3 is English: read again with every language
    assert runs[2:] == [("spa", installed[0]), ("spa", installed[0]), installed]

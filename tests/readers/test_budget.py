"""One budget for every document (readers/budget.py): its limits and how to raise them, and each
hostile document of the fourth hardening round at a few per cent of its size (the builders
take the full size: bench/hostile_budget.py): an XLSX shared-strings bomb, an EPUB of empty
chapters, a PDF of many pages sharing one scanned image, a large RGBA PNG, and Pillow's
warnings in the product's words."""

from __future__ import annotations

import io
import itertools
import warnings

import pytest

from hefsearch.readers import budget as budget_module
from hefsearch.readers.budget import Budget, Limits, OverBudget, reading
from hefsearch.readers.extract_epub import extract_epub
from hefsearch.readers.extract_office import extract_xlsx
from hefsearch.readers.extract_pdf import extract_pdf, extract_pdf_ocr
from tests.support.container_builders import (big_png, epub_empty_chapters, make_epub, make_xlsx, pdf_sharing_one_image,
                                      xlsx_shared_strings_bomb)


@pytest.fixture
def limits(monkeypatch):
    """Set HEFSEARCH_DOCUMENT_LIMITS for the test: limits("parts=3")."""
    def set_(text: str) -> None:
        monkeypatch.setenv("HEFSEARCH_DOCUMENT_LIMITS", text)
    return set_


@pytest.fixture
def clock(monkeypatch):
    """The budget's clock, moved by hand: clock.now += 10."""
    class Clock:
        now = 1000.0

    c = Clock()
    monkeypatch.setattr(budget_module.time, "monotonic", lambda: c.now)
    return c


# -- the limits ---------------------------------------------------------------------------------
def test_limits_are_raised_by_the_environment_and_a_typo_is_ignored(limits, caplog):
    assert Limits.from_env() == Limits()
    limits("seconds=600, memory_mb=1_024,ocr-pages=2000,bogus=3,parts=-1,ocr_seconds=x")
    got = Limits.from_env()
    assert (got.seconds, got.memory_mb, got.ocr_pages) == (600.0, 1024, 2000)
    assert (got.parts, got.ocr_seconds) == (Limits().parts, Limits().ocr_seconds)  # bad values: defaults
    assert "bogus=3" in caplog.text and "parts=-1" in caplog.text


@pytest.mark.parametrize("spend, limit", [
    (lambda b: [b.add_part() for _ in range(4)], "parts"),
    (lambda b: [b.add_page() for _ in range(3)], "ocr_pages"),
    (lambda b: b.hold(2 * 2**20), "memory_mb"),
])
def test_each_limit_names_itself_and_how_to_raise_it(limits, spend, limit):
    limits("parts=3,ocr_pages=2,memory_mb=1")
    with pytest.raises(OverBudget) as e:
        spend(Budget("book.epub"))
    assert e.value.limit == limit and f"HEFSEARCH_DOCUMENT_LIMITS={limit}=" in e.value.message


def test_the_time_is_the_documents_and_ocr_has_its_own(clock):
    reading_, ocr = Budget("a.pdf"), Budget("a.pdf", ocr=True)
    clock.now += Limits().seconds + 1
    with pytest.raises(OverBudget, match="took more than 120 s") as e:
        reading_.check_time()
    assert e.value.limit == "seconds"
    ocr.check_time()  # OCR has longer
    clock.now += Limits().ocr_seconds
    with pytest.raises(OverBudget, match="OCR of a.pdf"):
        ocr.check_time()


def test_a_reader_called_by_another_shares_its_budget():
    with reading("message", 100) as outer:
        with reading("attachment") as inner:
            assert inner is outer
        with reading("scan", ocr=True) as ocr:  # OCR is counted apart
            assert ocr is not outer and ocr.ocr
    with pytest.raises(Exception, match="more than"):
        with reading("message", 10) as b:
            b.add_text(11)


# -- XLSX: a shared-string table of millions of entries -----------------------------------------
def test_xlsx_shared_strings_are_read_only_as_far_as_the_sheets_use_them(monkeypatch):
    from hefsearch.readers.extract_office import SharedStrings

    read = []
    real = SharedStrings._read_one
    monkeypatch.setattr(SharedStrings, "_read_one", lambda self: read.append(1) or real(self))
    doc = extract_xlsx(xlsx_shared_strings_bomb(200_000))  # full size: 10,000,000 (19 MB, 1 GB at peak before)
    assert doc.text == "Sheet: S\n\nused" and len(read) == 1  # every entry was read, each its own object
    doc = extract_xlsx(xlsx_shared_strings_bomb(5_000, use_last=True))
    assert doc.text.startswith("Sheet: S\n\n") and len(doc.text) == len("Sheet: S\n\n") + 1
    assert len(read) == 1 + 5_000


def test_xlsx_shared_strings_are_held_by_their_real_cost_and_refused_past_the_memory_budget(limits):
    strings = [f"word{i}" for i in range(5000)]  # more than one block of 4096
    sheet = [[s] for s in strings]
    doc = extract_xlsx(make_xlsx({"S": sheet}))
    assert doc.text.splitlines()[-1] == "word4999" and doc.text.count("\n") == 5001  # blocks joined right
    with reading("XLSX") as b:
        extract_xlsx(make_xlsx({"S": sheet}))
    assert b.held == 4 * 4096 + sum(len(s) for s in strings[:4096])  # a full block: 4 bytes an entry + its text
    limits("memory_mb=1")
    big = [[f"w{i:06d}" * 18] for i in range(12_000)]  # 12,000 entries of 120 characters: 1.4 MB held
    with pytest.raises(OverBudget, match="XLSX \\(its shared strings\\) needs more than 1 MB"):
        extract_xlsx(make_xlsx({"S": big}))


# -- EPUB: thousands of empty chapters ----------------------------------------------------------
def test_chapters_without_text_make_no_section_and_keep_the_others_numbers():
    doc = extract_epub(epub_empty_chapters(500))  # full size: 5,000 (5,000 "Chapter N" chunks before)
    assert doc.text == "" and doc.pages == []
    doc = extract_epub(make_epub([("One", "first"), ("", ""), ("Three", "third"), ("Part Two", "")]))
    assert [p for p, _, _ in doc.pages] == [1, 3]  # the fourth is a heading alone
    assert doc.text.startswith("Chapter 1\n\nOne") and "Chapter 3\n\nThree" in doc.text and "Chapter 2" not in doc.text


def test_a_book_past_its_parts_keeps_the_chapters_read_and_says_so(limits):
    limits("parts=3")
    doc = extract_epub(make_epub([(f"T{i}", f"text {i}") for i in range(10)]))
    assert [p for p, _, _ in doc.pages] == [1, 2, 3]
    assert doc.notes == ["EPUB has more than 3 parts, its limit (HEFSEARCH_DOCUMENT_LIMITS=parts=12 raises it); "
                         "kept the first 3 of 10 chapters"]


def test_a_book_past_its_time_keeps_the_chapters_read(clock, monkeypatch):
    import hefsearch.readers.extract_epub as epub

    real = epub.html_text_and_body

    def slow(data):  # each chapter takes 50 s
        clock.now += 50
        return real(data)

    monkeypatch.setattr(epub, "html_text_and_body", slow)
    doc = extract_epub(make_epub([(f"T{i}", f"text {i}") for i in range(10)]))
    assert [p for p, _, _ in doc.pages] == [1, 2]  # the third ended past 120 s and is dropped
    assert "took more than 120 s" in doc.notes[0] and "kept the first 2 of 10 chapters" in doc.notes[0]


# -- PDF: thousands of pages sharing one scanned image ------------------------------------------
def test_ocr_reads_no_more_pages_than_its_limit_and_a_shared_image_once(limits):
    limits("ocr_pages=5")
    data = pdf_sharing_one_image(30)  # full size: 5,000 pages (hours of Tesseract before)
    assert extract_pdf(data).ocr_pages == [1, 2, 3, 4, 5]  # what the OCR phase will read
    calls = []

    def fake_ocr(image: bytes, what: str) -> str:
        calls.append(what)
        return "A SCANNED PAGE"

    notes: list[str] = []
    doc = extract_pdf_ocr(data, None, fake_ocr, notes)
    assert doc.ocr_pages == [1, 2, 3, 4, 5] and [p for p, _, _ in doc.pages if doc.text[_:_ + 1]][:5]
    assert doc.text.count("A SCANNED PAGE") == 5 and calls == ["page 1"]
    assert notes == ["PDF has more than 5 pages to read by OCR, its limit "
                     "(HEFSEARCH_DOCUMENT_LIMITS=ocr_pages=20 raises it); kept the first 5 pages read by OCR"]


def test_ocr_stops_at_its_time_and_keeps_what_it_read(clock, monkeypatch):
    import hefsearch.readers.extract_pdf as pdf

    monkeypatch.setattr(pdf, "_once_per_image", lambda ocr: ocr)  # every page read, as if each its own image
    data = pdf_sharing_one_image(8)
    texts = (f"PAGE TEXT {i}" for i in itertools.count(1))

    def slow_ocr(image: bytes, what: str) -> str:
        clock.now += 700  # a slow page: the OCR budget is 1800 s
        return next(texts)

    notes: list[str] = []
    doc = extract_pdf_ocr(data, None, slow_ocr, notes)
    assert doc.ocr_pages == [1, 2, 3]
    assert "took more than 1800 s" in notes[0] and "kept the first 3 pages read by OCR" in notes[0]


# -- images: decoded within the memory budget, Pillow's warnings in our words ------------------
def _decode(data: bytes, notes: list[str] | None = None):
    from hefsearch.readers.image_decode import decoded_grey
    from hefsearch.readers.ocr import MAX_SIDE, checked_image

    notes = [] if notes is None else notes
    with reading("image", ocr=True) as b:
        return decoded_grey(checked_image(data), data, MAX_SIDE, b, notes), b


def test_a_large_rgba_png_is_decoded_in_bands_within_a_small_memory_budget(limits):
    limits("memory_mb=24")  # the whole image is 4500 x 4500 x 4 = 77 MB decoded, and its grey copy
    grey, b = _decode(big_png(4500, "RGBA", "BANDED TEXT"))  # full size: 10,000 x 10,000 (993 MB before)
    assert grey.mode == "L" and max(grey.size) <= 4000
    assert grey.crop((0, 0, 800, 60)).getextrema()[0] < 100  # the dark letters, reduced
    assert grey.getpixel((grey.size[0] - 1, grey.size[1] - 1)) == 255  # transparent reads as white
    assert b.held < 24 * 2**20


def test_an_image_that_cannot_be_reduced_on_load_is_refused_past_the_memory_budget(limits):
    from PIL import Image

    limits("memory_mb=20")
    buf = io.BytesIO()
    Image.new("RGB", (3000, 3000), "white").save(buf, format="TIFF")  # 36 MB decoded, no band decoding
    with pytest.raises(OverBudget, match=r"image \(3000x3000 RGB pixels, decoded\) needs more than 20 MB"):
        _decode(buf.getvalue())


def test_a_jpeg_is_reduced_as_it_is_decoded(limits):
    from PIL import Image

    limits("memory_mb=10")  # 6000 x 4000 would be 96 MB decoded whole; a quarter of it grey is 6 MB
    buf = io.BytesIO()
    Image.new("RGB", (6000, 4000), "white").save(buf, format="JPEG")
    grey, _ = _decode(buf.getvalue())
    assert grey.mode == "L" and grey.size == (3000, 2000)


def test_band_decoding_gives_the_pixels_a_whole_decode_gives(monkeypatch):
    import numpy as np
    from PIL import Image

    from hefsearch.readers import image_decode

    rng = np.random.default_rng(0)
    monkeypatch.setattr(image_decode, "BAND_BYTES", 5000)  # bands of a few rows
    for mode, bands in (("RGBA", 4), ("RGB", 3), ("L", 1), ("LA", 2), ("P", 3)):
        pixels = rng.integers(0, 256, (301, 257, bands), dtype=np.uint8)
        pixels[:, :100] = 200  # flat areas: the encoder picks other row filters there
        img = Image.fromarray(pixels.squeeze(), {"P": "RGB"}.get(mode, mode))
        img = img.quantize(64) if mode == "P" else img
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        for factor in (1, 3):
            banded = image_decode._png_in_bands(buf.getvalue(), factor, Budget("x"))
            whole = image_decode._grey(Image.open(io.BytesIO(buf.getvalue())))
            whole = whole.reduce(factor) if factor > 1 else whole
            assert np.array_equal(np.asarray(banded), np.asarray(whole)), (mode, factor)


def test_pillows_warnings_never_reach_the_user_raw():
    from PIL import Image

    big = big_png(8000, "L")  # 64 MP: over Pillow's warning threshold, under our limit
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning escaping fails the test
        grey, _ = _decode(big)
    assert max(grey.size) <= 4000
    palette = Image.new("P", (64, 64))
    palette.putpalette([0, 0, 0, 255, 255, 255] * 128)
    buf = io.BytesIO()
    palette.save(buf, format="PNG", transparency=bytes([0, 255] + [255] * 254))
    notes: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _decode(buf.getvalue(), notes)
    assert all("/" not in n and "\n" not in n and len(n) <= 150 for n in notes)


# -- in an index run: reported with the reason and what was kept, and the run goes on ---------
def test_an_index_run_reports_each_document_over_budget_and_goes_on(tmp_path, tiny_bert_bundle, limits):
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "empty.epub").write_bytes(epub_empty_chapters(3))
    (docs / "long.epub").write_bytes(make_epub([(f"Title {i}", f"The heron of chapter {i}.") for i in range(6)]))
    (docs / "note.txt").write_text("A note about the garden.")
    limits("parts=4")
    lib = Library.open(tmp_path / "lib")
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        r = sync(lib, [docs], [enc])
    assert r.failed == []
    assert [(p.rsplit("/", 1)[1], n) for p, n in r.notes] == [
        ("long.epub", "EPUB has more than 4 parts, its limit (HEFSEARCH_DOCUMENT_LIMITS=parts=16 raises it); "
                      "kept the first 4 of 6 chapters")]
    pages = lib.query("SELECT c.page, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
                      "WHERE d.path LIKE '%long.epub' ORDER BY c.page")
    assert [p for p, _ in pages] == [1, 2, 3, 4] and "chapter 3" in pages[3][1]
    assert lib.query("SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.doc_id "
                     "WHERE d.path LIKE '%empty.epub'") == [(0,)]  # no "Chapter N" chunk
    assert lib.query("SELECT COUNT(*) FROM chunks WHERE text LIKE '%garden%'") == [(1,)]
    lib.close()


def test_every_document_of_the_sample_corpus_reads_whole_with_room_under_the_default_limits():
    from pathlib import Path

    from hefsearch.readers.extract import extract, kind_of

    corpus = Path(__file__).resolve().parents[2] / "data" / "sample-corpus"
    files = [p for p in sorted(corpus.iterdir()) if kind_of(p) not in (None, "image")]  # images: OCR's own test
    assert len(files) > 30
    defaults = Limits()
    for path in files:
        with reading(path.name) as b:
            doc = extract(path, max_bytes=20 * 2**20)
        assert doc.notes == [], path.name
        assert b.parts * 100 <= defaults.parts and b.held * 100 <= defaults.memory_mb * 2**20, path.name
        assert b.pages == 0 and len(doc.ocr_pages or ()) * 100 <= defaults.ocr_pages, path.name


def test_an_image_near_the_pixel_limit_is_named_in_our_words(monkeypatch):
    from hefsearch.readers import ocr
    from hefsearch.readers.extract_image import extract_image

    monkeypatch.setattr(ocr, "_tesseract", lambda: ("tesseract", ("eng",)))  # the engine is not the point
    monkeypatch.setattr(ocr, "run_tesseract", lambda exe, langs, png, what, t, m: "SOME TEXT")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        doc = extract_image(big_png(8000, "L"))  # 64 MP: Pillow's DecompressionBombWarning before
    assert doc.text == "SOME TEXT"
    assert doc.notes == ["image is 8,000x8,000 pixels, near the 100 MP limit for images; read reduced to 4,000x4,000"]

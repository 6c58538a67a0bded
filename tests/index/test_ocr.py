"""OCR of images and of PDF pages without a text layer: read after the files with text, with a
progress line of its own and an ETA, each page within its time and memory budget (a page that
fails is reported and the rest indexed), a hit naming the page, the pages counted by status."""

from __future__ import annotations

import pytest

from hefsearch.embed import Encoder
from hefsearch.readers import ocr
from hefsearch.readers.extract_pdf import extract_pdf, extract_pdf_ocr
from hefsearch.index.library import Library
from hefsearch.index.sync import sync
from tests.support.container_builders import make_image_pdf, render_page
from tests.support.document_builders import make_pdf

pytestmark = pytest.mark.skipif(not ocr.available(), reason="Tesseract is not installed (.ci/run installs it)")


@pytest.fixture
def encoder(tiny_bert_bundle):
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        yield enc


def _mixed_pdf() -> bytes:
    """Page 1 with a text layer, page 2 a scan (the scan's PDF pages appended)."""
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for data in (make_pdf(["A typed page about the heron."]), make_image_pdf(["A SCANNED PAGE ABOUT", "THE PELICAN"],
                                                                             size=48)):
        for page in PdfReader(io.BytesIO(data)).pages:
            writer.add_page(page)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_pdf_pages_without_text_are_listed_then_read_by_ocr():
    doc = extract_pdf(_mixed_pdf())
    assert doc.ocr_pages == [2] and "heron" in doc.text and "PELICAN" not in doc.text
    notes: list[str] = []
    doc = extract_pdf_ocr(_mixed_pdf(), None, ocr.ocr_image, notes)
    page2 = next(s for s in doc.pages if s[0] == 2)
    assert "PELICAN" in doc.text[page2[1]:page2[2]] and "heron" in doc.text and not notes


def test_ocr_runs_after_the_text_files_with_its_own_progress(tmp_path, encoder):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a-scan.png").write_bytes(render_page(["THE FLAMINGO LIST"], size=48))
    (docs / "b-mixed.pdf").write_bytes(_mixed_pdf())
    for i in range(3):
        (docs / f"c-note{i}.txt").write_text(f"Note {i} about the garden.")
    events = []
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [encoder], progress=events.append)
    assert r.failed == [] and r.ocr_pages == 2
    # the text files are committed first (chunk ids grow in commit order), though named last
    ids = {path.rsplit("/", 1)[1]: (lo, hi) for path, lo, hi in lib.query(
        "SELECT d.path, MIN(c.id), MAX(c.id) FROM chunks c JOIN documents d ON d.id = c.doc_id GROUP BY d.path")}
    assert max(ids[f"c-note{i}.txt"][1] for i in range(3)) < min(ids["a-scan.png"][0], ids["b-mixed.pdf"][0])
    ocr_events = [e for e in events if e.phase == "ocr"]
    assert ocr_events and ocr_events[0].ocr_total == 2 and ocr_events[-1].ocr_done == 2
    assert any(e.eta_s is not None for e in ocr_events[1:])
    rows = lib.query("SELECT c.page FROM chunks c JOIN documents d ON d.id = c.doc_id "
                     "WHERE d.path LIKE '%b-mixed.pdf' AND c.text LIKE '%PELICAN%'")
    assert rows == [(2,)]  # the hit names its page
    assert lib.status().ocr_pages == 2
    lib.close()


def test_a_page_over_its_budget_is_reported_and_the_rest_indexed(tmp_path, encoder, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "scan.png").write_bytes(render_page(["THE FLAMINGO LIST"], size=48))
    (docs / "mixed.pdf").write_bytes(_mixed_pdf())
    (docs / "note.txt").write_text("A note about the garden.")
    monkeypatch.setattr(ocr, "PAGE_TIMEOUT_S", 0.001)
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [encoder])
    failed = dict(r.failed)
    assert "took more than" in failed[str(docs / "scan.png")]
    # the PDF keeps its text page; its scanned page is named as not read
    assert str(docs / "mixed.pdf") not in failed
    assert any(p == str(docs / "mixed.pdf") and reason.startswith("page 2: OCR of page 2 took more than")
               for p, reason in r.notes)
    texts = " ".join(t for (t,) in lib.query("SELECT text FROM chunks"))
    assert "garden" in texts and "heron" in texts
    lib.close()


def test_a_page_over_its_memory_budget_fails_cleanly():
    with pytest.raises(ocr.ExtractionError, match="budget"):
        ocr.ocr_image(render_page(["MEMORY"]), memory_bytes=8 * 2**20)


def test_a_compressed_scan_is_read_through_for_ocr(tmp_path, encoder):
    """scan.pdf.gz: the text pass reads it through, and so must the OCR pass (it was handed the
    gzip bytes)."""
    import gzip

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "scan.pdf.gz").write_bytes(gzip.compress(_mixed_pdf()))
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [encoder])
    assert r.failed == [] and r.ocr_pages == 1
    assert lib.query("SELECT COUNT(*) FROM chunks WHERE text LIKE '%PELICAN%'") == [(1,)]
    lib.close()


def test_ocr_progress_names_the_page_being_read(tmp_path, encoder):
    from hefsearch.index.sync_prepare import prepare_ocr
    from hefsearch.index.sync_types import Job

    pdf = tmp_path / "b-mixed.pdf"
    pdf.write_bytes(_mixed_pdf())
    job = Job(str(pdf), pdf.stat().st_size, 0, "pdf", None, None, ocr_pages=[2])
    heard: list[str] = []
    prepare_ocr(job, encoder, 32, 20 << 20, heard.append)
    assert job.error is None and heard == ["page 2, 1 of 1 by OCR"]


def _scan(pages: list[str]) -> bytes:
    """A PDF of scanned pages only, one image each."""
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for line in pages:
        writer.add_page(PdfReader(io.BytesIO(make_image_pdf([line], size=48))).pages[0])
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_a_stopped_scan_keeps_the_pages_read_and_the_next_run_reads_only_the_rest(tmp_path, encoder, monkeypatch):
    import threading

    from hefsearch.readers import ocr as ocr_module
    from hefsearch.index.ocr_cache import FOLDER

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "scan.pdf").write_bytes(_scan(["THE FIRST PAGE OSTRICH", "THE SECOND PAGE EMU"]))
    real = ocr_module.ocr_image
    calls: list[str] = []
    second_page, release = threading.Event(), threading.Event()

    def stopping_at_page_two(data, what="image", **kw):
        calls.append(what)
        if what == "page 2" and not release.is_set():
            second_page.set()  # OCR of page 2 is in flight when the run is stopped
            release.wait(30)
            raise ocr_module.ExtractionError("stopped")
        return real(data, what, **kw)

    def progress(ev):
        if second_page.is_set():
            raise KeyboardInterrupt

    monkeypatch.setattr(ocr_module, "ocr_image", stopping_at_page_two)
    lib = Library.open(tmp_path / "lib")
    with pytest.raises(KeyboardInterrupt):
        sync(lib, [docs], [encoder], progress=progress)
    release.set()
    assert calls == ["page 1", "page 2"] and len(list((tmp_path / "lib" / FOLDER).iterdir())) == 1

    calls.clear()
    r = sync(lib, [docs], [encoder])
    assert r.failed == [] and r.ocr_pages == 2
    assert calls == ["page 2"]  # page 1 was read by the stopped run
    assert [p for (p,) in lib.query("SELECT c.page FROM chunks c WHERE c.text LIKE '%OSTRICH%'")] == [1]
    assert not (tmp_path / "lib" / FOLDER).exists()  # a completed run leaves no cache behind
    lib.close()

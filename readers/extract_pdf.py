"""PDF documents: the text layer of every page, with each page's character span."""

from __future__ import annotations

import io
import logging
import warnings
from contextlib import contextmanager

from .budget import Budget, OverBudget, reading
from .extract_base import ExtractedText, ExtractionError, clean_text, describe, join_numbered


def extract_pdf(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``pdf`` kind (see :mod:`hefsearch.readers.formats`). Pages without
    a text layer but with an image are listed in ``ocr_pages`` (the sync reads them by OCR
    after the files with text, :func:`extract_pdf_ocr`), as many as the document's OCR page
    limit allows. Each page is a part of the document's budget (:mod:`hefsearch.readers.budget`):
    past its parts or time, the pages read are kept and ``notes`` says so."""
    notes: list[str] = []
    with reading("PDF", max_chars) as budget:
        texts, needs_ocr = _page_texts(data, budget, notes=notes)
    text, pages = join_numbered(texts)
    return ExtractedText(text=text, pages=pages, ocr_pages=needs_ocr, notes=notes)


def extract_pdf_ocr(data: bytes, max_chars: int | None, ocr, notes: list[str]) -> ExtractedText:
    """The PDF with its pages without text read by ``ocr(image_bytes, what) -> str`` (each of
    the page's images, largest first; an image shown on several pages is read once); a page
    that fails is noted in ``notes`` and left empty. OCR has its own budget of pages and time
    (:class:`hefsearch.readers.budget.Limits`): past it the rest of the pages are left without
    OCR, and ``notes`` says how far it read."""
    with reading("PDF", max_chars, ocr=True) as budget:
        texts, needs_ocr = _page_texts(data, budget, ocr=_once_per_image(ocr), notes=notes)
        notes.extend(n for n in budget.notes if n not in notes)
    text, pages = join_numbered(texts)
    doc = ExtractedText(text=text, pages=pages, ocr_pages=needs_ocr)
    if not text.strip():
        raise ExtractionError(f"PDF has no text layer and OCR read no text on its {len(needs_ocr)} page(s)")
    return doc


def _once_per_image(ocr):
    """``ocr`` remembering the text of each image it read (by its bytes' hash): a scan's
    pages sharing one image cost one OCR run."""
    import hashlib

    seen: dict[bytes, str] = {}

    def read(image: bytes, what: str) -> str:
        key = hashlib.sha256(image).digest()
        if key not in seen:
            seen[key] = ocr(image, what)
        return seen[key]

    return read


#: a page whose text layer has fewer letters or digits than this is read by OCR when it has an image
MIN_LAYER_CHARS = 3
#: images OCR'd on one page (a page of 500 tiny images is not a scan)
MAX_IMAGES_PER_PAGE = 4


def _page_images(page) -> list[bytes]:
    """The page's images, largest first, as encoded bytes (JPEG, PNG...); [] on any trouble."""
    try:
        images = list(page.images)
    except Exception:  # noqa: BLE001 - a broken image dictionary
        return []
    out = []
    for img in images[: MAX_IMAGES_PER_PAGE * 4]:
        try:
            out.append(img.data)
        except Exception:  # noqa: BLE001
            continue
    return sorted(out, key=len, reverse=True)[:MAX_IMAGES_PER_PAGE]


def _has_image(page) -> bool:
    try:
        res = page.get("/Resources") or {}
        xobjects = res.get_object().get("/XObject") if hasattr(res, "get_object") else res.get("/XObject")
        if not xobjects:
            return False
        return any(x.get_object().get("/Subtype") == "/Image" for x in xobjects.get_object().values())
    except Exception:  # noqa: BLE001 - a broken resource dictionary: no OCR
        return False



@contextmanager
def _quiet_pypdf():
    """pypdf logs a warning per malformed object; a bad PDF would flood the terminal."""
    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def pdf_to_text(data: bytes, max_chars: int | None = None) -> tuple[str, list[tuple[int, int, int]]]:
    """Text of every page joined by blank lines, with (page, start, end) char spans. Stops with
    an ExtractionError once the text exceeds ``max_chars`` (compressed content streams)."""
    doc = extract_pdf(data, max_chars)
    return doc.text, doc.pages or []


def _page_texts(data: bytes, budget: Budget, ocr=None, notes: list[str] | None = None
                ) -> tuple[list[str], list[int]]:
    """Each page's text, and the pages (from 1) that have no text layer but an image; with
    ``ocr``, those pages' text is OCR's. Within ``budget``: its text cap refuses the PDF, its
    parts and time stop the pages there, its OCR pages and time stop OCR there."""
    with _quiet_pypdf():
        pages = _open_pages(data)
        texts: list[str] = []
        needs_ocr: list[int] = []
        failed = 0
        first_error = ""
        ocr_stopped = False
        for number, page in enumerate(pages, start=1):
            try:
                budget.add_part()
            except OverBudget as e:
                if ocr is None or e.limit != "ocr_seconds":  # out of parts, or of time to read
                    if number == 1:
                        raise
                    _note(notes, budget.kept(e, number - 1, len(pages), "pages"))
                    break
                if not ocr_stopped:  # out of OCR time: the text layers are still read
                    ocr_stopped = _note(notes, budget.kept(e, len(needs_ocr), None, "pages read by OCR"))
            try:
                texts.append(clean_text(page.extract_text() or "").strip())
            except Exception as e:  # noqa: BLE001 - one bad page must not lose the others
                failed += 1
                first_error = first_error or describe(e)
                texts.append("")
            if sum(ch.isalnum() for ch in texts[-1][:64]) < MIN_LAYER_CHARS and _has_image(page):
                if ocr is None:
                    if len(needs_ocr) < budget.limits.ocr_pages:  # OCR reads no more than that
                        needs_ocr.append(number)
                elif not ocr_stopped:
                    try:
                        budget.add_page()
                        needs_ocr.append(number)
                        texts[-1] = _ocr_page(page, number, ocr, notes)
                    except OverBudget as e:
                        ocr_stopped = _note(notes, budget.kept(e, len(needs_ocr), None, "pages read by OCR"))
            budget.add_text(len(texts[-1]) + 2)
    if failed == len(pages):
        raise ExtractionError(f"PDF is corrupt: no page could be read ({first_error})")
    if not any(texts) and not needs_ocr:
        raise ExtractionError(
            f"PDF has no text layer ({len(pages)} page(s)) and no images to read by OCR",
        )
    return texts, needs_ocr


def _open_pages(data: bytes) -> list:
    """The PDF's pages (pypdf), opened with an empty password when encrypted; ExtractionError
    for anything that is not a readable PDF."""
    from pypdf import PdfReader

    if b"%PDF" not in data[:1024]:
        raise ExtractionError("PDF is corrupt: no %PDF header (not a PDF file)")
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                ok = reader.decrypt("")
            except Exception as e:  # noqa: BLE001 - pypdf raises many types for bad crypto
                raise ExtractionError(f"PDF is encrypted and cannot be opened: {e}") from None
            if not ok:
                raise ExtractionError("PDF is password-protected", hint="save an unprotected copy to index it")
        pages = list(reader.pages)
    except ExtractionError:
        raise
    except Exception as e:  # noqa: BLE001 - hostile input; any parser failure means corrupt
        raise ExtractionError(f"PDF is corrupt: {describe(e)}") from None
    if not pages:
        raise ExtractionError("PDF is corrupt: it has no pages")
    return pages


def _note(notes: list[str] | None, note: str) -> bool:
    if notes is not None:
        notes.append(note)
    return True


def _ocr_page(page, number: int, ocr, notes: list[str] | None) -> str:
    from .ocr import OcrMissing

    parts = []
    for i, image in enumerate(_page_images(page)):
        try:
            parts.append(ocr(image, f"page {number}"))
        except OcrMissing:
            raise
        except ExtractionError as e:
            if notes is not None:
                notes.append(f"page {number}: {e.message}")
    return "\n\n".join(p for p in parts if p).strip()

"""PDF documents: the text layer of every page, with each page's character span."""

from __future__ import annotations

import io
import logging
import warnings
from contextlib import contextmanager

from .extract_base import ExtractedText, ExtractionError, clean_text, describe, too_much_text


def extract_pdf(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``pdf`` kind (see :mod:`hefsearch.index.formats`)."""
    text, pages = pdf_to_text(data, max_chars=max_chars)
    return ExtractedText(text=text, pages=pages)



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
    from pypdf import PdfReader

    if b"%PDF" not in data[:1024]:
        raise ExtractionError("PDF is corrupt: no %PDF header (not a PDF file)")
    with _quiet_pypdf():
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
        texts: list[str] = []
        failed = 0
        first_error = ""
        total = 0
        for page in pages:
            try:
                texts.append(clean_text(page.extract_text() or "").strip())
            except Exception as e:  # noqa: BLE001 - one bad page must not lose the others
                failed += 1
                first_error = first_error or describe(e)
                texts.append("")
            total += len(texts[-1]) + 2
            if max_chars is not None and total > max_chars:
                raise too_much_text("PDF", max_chars)
    if failed == len(pages):
        raise ExtractionError(f"PDF is corrupt: no page could be read ({first_error})")
    if not any(texts):
        raise ExtractionError(
            f"PDF has no text layer ({len(pages)} page(s), probably scanned images)",
            hint="run OCR on it first (e.g. ocrmypdf) to make it searchable",
        )
    spans: list[tuple[int, int, int]] = []
    parts: list[str] = []
    pos = 0
    for number, page_text in enumerate(texts, start=1):
        if parts:
            parts.append("\n\n")
            pos += 2
        parts.append(page_text)
        spans.append((number, pos, pos + len(page_text)))
        pos += len(page_text)
    return "".join(parts), spans

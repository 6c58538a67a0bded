"""Images (PNG, JPEG, TIFF, WebP): the text OCR reads in them (:mod:`hefsearch.readers.ocr`), as
one page, so a hit names it like a PDF page. The sync reads images after the files with text."""

from __future__ import annotations

from .extract_base import ExtractedText, ExtractionError


def extract_image(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``image`` kind."""
    from .budget import reading
    from .ocr import ocr_image

    with reading("image", max_chars, ocr=True) as budget:  # its memory and time, one OCR page
        budget.add_page()
        text = ocr_image(data, "image")
    if not text.strip():
        raise ExtractionError("OCR read no text in this image (a photo without writing?)")
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars]
    return ExtractedText(text=text, pages=[(1, 0, len(text))], ocr_pages=[1], notes=budget.notes)

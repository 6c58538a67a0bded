"""What every extractor shares: the error a user reads, the text an extractor returns, and
the helpers its messages use."""

from __future__ import annotations

from dataclasses import dataclass, field

from hefsearch.base.errors import HefsearchError


class ExtractionError(HefsearchError):
    """A file could not be turned into text; ``message`` is the reason shown to the user."""

    title = "cannot read document"


@dataclass
class ExtractedText:
    text: str  # the plain text; NUL bytes removed, newlines normalised to "\n"
    kind: str = ""  # the format's kind (formats.FORMATS), set by extract()
    pages: list[tuple[int, int, int]] | None = None  # (page from 1, char_start, char_end), PDFs
    encoding: str | None = None  # detected encoding for text files
    ocr_pages: list[int] | None = None  # pages (from 1) without a text layer, to read by OCR
    #: what the run reports beside the document: a part left out, a budget that cut it short
    notes: list[str] = field(default_factory=list)


def clean_text(text: str) -> str:
    """Drop NULs and normalise line endings, so char spans and line numbers mean the same everywhere."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def too_much_text(kind: str, max_chars: int) -> ExtractionError:
    return ExtractionError(
        f"{kind} unpacks to more than {max_chars / 2**20:.1f} MiB of text (the --max-size limit "
        "applies to the text of compressed formats too); not indexed",
        hint="raise --max-size if this document is genuine")


def describe(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def join_numbered(texts: list[str]) -> tuple[str, list[tuple[int, int, int]]]:
    """Pages, slides or chapters -> the document's text (blank-line separated) and their
    (number from 1, start, end) spans, so a hit names its page."""
    spans: list[tuple[int, int, int]] = []
    parts: list[str] = []
    pos = 0
    for number, text in enumerate(texts, start=1):
        if parts:
            parts.append("\n\n")
            pos += 2
        parts.append(text)
        spans.append((number, pos, pos + len(text)))
        pos += len(text)
    return "".join(parts), spans

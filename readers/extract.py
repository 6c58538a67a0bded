"""Plain text out of a user's document, or a human reason why not.

One entry point, :func:`extract`: it reads the file and hands its bytes to the reader of its
kind, as the table of formats (:mod:`hefsearch.readers.formats`) names it, within the document's
budget; each format's reader lives in a module of its own (``extract_text``, ``extract_pdf``...). Every format goes through :func:`read_regular_file`, which opens without
blocking and refuses anything that is not a regular file, so a FIFO or device that slipped past
the crawler (or replaced a file since) cannot hang us. All work is linear in the size of the
file, and the parsers are well-kept libraries (charset-normalizer, lxml, pypdf, python-docx).

Compressed formats (DOCX, PDF streams) can unpack to far more text than their size: the text
one file may produce is capped at ``max_bytes`` characters too (the ``--max-size`` limit), and a
large DOCX body is streamed, never loaded whole, so a 300 KB "zip bomb" stops at the cap with a
reason instead of taking minutes and gigabytes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .extract_base import ExtractedText, ExtractionError, too_much_text
from .extract_docx import DOCX_DOM_LIMIT, MAX_DOCX_UNPACKED, docx_to_text
from .extract_html import LXML_MAX_DEPTH, html_parser, html_to_text
from .extract_pdf import pdf_to_text
from .extract_text import BINARY_CONTROL_SHARE, decode_text, looks_like_text
from .formats import BY_KIND, SUPPORTED_SUFFIXES

__all__ = ["BINARY_CONTROL_SHARE", "DOCX_DOM_LIMIT", "LXML_MAX_DEPTH", "MAX_DOCX_UNPACKED", "SUPPORTED_SUFFIXES",
           "ExtractedText", "ExtractionError", "decode_text", "docx_to_text", "extract", "html_parser",
           "html_to_text", "kind_of", "looks_like_text", "pdf_to_text", "read_regular_file", "too_much_text"]


def kind_of(path: Path) -> str | None:
    """The document kind for ``path``'s suffix (case-insensitive; a compressed file's by the
    name it holds: ``notes.txt.gz`` is text), or None if unsupported."""
    from .filetypes import inner_name

    return SUPPORTED_SUFFIXES.get(Path(inner_name(path)).suffix.lower())


def extract(path: Path, *, kind: str | None = None, max_bytes: int | None = None) -> ExtractedText:
    """Extract the text of one document.

    :param path: the file; its suffix picks the format unless ``kind`` is given.
    :param max_bytes: refuse files larger than this (the crawler already applies its limit),
        and compressed formats that unpack to more than this many characters of text.
    :raises ExtractionError: with a reason a user understands (corrupt, binary, undecodable, ...).
    """
    path = Path(path)
    kind = kind or kind_of(path)
    if kind is None:
        raise ExtractionError(
            f"{path.name}: unsupported file type '{path.suffix or '(none)'}'",
            hint="supported: " + ", ".join(sorted(SUPPORTED_SUFFIXES)),
        )
    data = read_regular_file(path, max_bytes=max_bytes)
    data = decompressed(path, data, max_bytes)
    fmt = BY_KIND.get(kind)
    if fmt is None:
        raise ExtractionError(f"{path.name}: no extractor for kind '{kind}'")
    doc = fmt.read(data, max_chars=max_bytes)
    doc.kind = kind
    return doc


def decompressed(path: Path, data: bytes, max_bytes: int | None) -> bytes:
    """``data`` decompressed when ``path`` ends in .gz/.bz2/.xz (the --max-size cap applies to
    the decompressed bytes: a gzip bomb stops there, with a reason), else ``data``."""
    from .filetypes import CompressionBomb, CorruptCompressed, compression_of, decompress

    suffix = compression_of(path)
    if suffix is None:
        return data
    try:
        return decompress(data, suffix, max_bytes)
    except CompressionBomb:
        raise too_much_text(suffix[1:], max_bytes) from None
    except CorruptCompressed as e:
        raise ExtractionError(f"{path.name}: {e.message}") from None


def read_regular_file(path: Path, *, max_bytes: int | None = None, head: int | None = None) -> bytes:
    """Read a regular file completely (or only its first ``head`` bytes), never opening a
    FIFO, socket or device (checked before opening) and never blocking if one was swapped in
    since (non-blocking open, checked again)."""
    special = "not a regular file (FIFO, socket or device); not read"
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ExtractionError(special)
    except OSError as e:
        raise ExtractionError(f"cannot open: {e.strerror or e}") from None
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise ExtractionError(f"cannot open: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ExtractionError(special)
        too_large = f"too large: more than {max_bytes} bytes"
        if max_bytes is not None and st.st_size > max_bytes and head is None:
            raise ExtractionError(too_large)
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            if head is not None:
                return f.read(head)
            data = f.read() if max_bytes is None else f.read(max_bytes + 1)
        if max_bytes is not None and len(data) > max_bytes:  # it grew since the crawl
            raise ExtractionError(too_large)
        return data
    except OSError as e:
        raise ExtractionError(f"cannot read: {e.strerror or e}") from None
    finally:
        if fd >= 0:
            os.close(fd)

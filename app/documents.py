"""A document shown outside hefsearch (the TUI opens a hit in an editor or the system's
program): how each format is best shown, and the text hefsearch indexed from a file, for the
formats an editor cannot show as they are (compressed files, manual pages' roff).
"""

from __future__ import annotations

from pathlib import Path

from hefsearch.base.errors import HefsearchError


def display_form(path: str, kind: str | None) -> str:
    """How to show the document at ``path`` (of ``kind``, when known): "opener" (a binary
    format: the system's program), "text" (compressed, or a manual page: the text hefsearch
    indexed, see :func:`indexed_text`), or "file" (the file itself, in an editor). The table of
    formats decides (:mod:`hefsearch.readers.formats`)."""
    from hefsearch.readers.filetypes import compression_of
    from hefsearch.readers.formats import OPENER_KINDS, OPENER_SUFFIXES

    if kind in OPENER_KINDS or Path(path).suffix.lower() in OPENER_SUFFIXES:
        return "opener"
    if kind == "man" or compression_of(path):
        return "text"
    return "file"


def indexed_text(path: str, kind: str | None) -> tuple[str, str] | None:
    """The text hefsearch indexes from ``path`` (decompressed, a manual page rendered) and the
    document's own name (``chsh.1`` for ``chsh.1.gz``); None when the file cannot be read now."""
    from hefsearch.readers.extract import extract
    from hefsearch.readers.filetypes import inner_name

    try:
        text = extract(Path(path), kind=kind).text
    except (HefsearchError, OSError):
        return None
    return inner_name(path), text

"""The file formats hefsearch reads: one row each, and every list of formats elsewhere is
derived from this table (never written out again):

- :func:`hefsearch.readers.extract.extract` runs the row's reader by kind;
- the crawler and the watcher take :data:`SUPPORTED_SUFFIXES` (plus the library's
  ``extra_suffixes``, which map a suffix onto one of these kinds);
- ``hefsearch index --help`` and calibration's hint list :func:`suffix_list`;
- the TUI opens a hit in an editor or with the system opener (:data:`OPENER_KINDS`,
  :data:`OPENER_SUFFIXES`) and offers the families of :func:`kind_families` as filters;
- the ``--type``/``--kind`` search filters accept the suffixes and kinds.

Adding a format is one row here plus its :class:`Reader` in a module of its own, named here as
``module:function`` so that listing formats imports no parser. :meth:`Format.read` runs the
reader within the document's budget (:mod:`hefsearch.readers.budget`), named as the row says.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .extract_base import ExtractedText

#: how a hit is opened from the TUI
EDITOR = "editor"  # text: $VISUAL/$EDITOR at the hit's line
OPENER = "opener"  # binary formats: the system opener (xdg-open, open)


class Reader(Protocol):
    """A format's reader: the file's bytes in, its text out. It reports to the document's
    budget (``budget.current()``: parts, text, memory held, time) and raises ``ExtractionError``
    with a reason a user reads; past a limit of parts it keeps what it read and notes it."""

    def __call__(self, data: bytes, max_chars: int | None = None) -> "ExtractedText": ...


@dataclass(frozen=True)
class Format:
    #: stored as ``documents.kind``; what ``--kind`` and ``--ext SUFFIX=KIND`` name
    kind: str
    #: lower case, with the dot; the first is the one people know it by
    suffixes: tuple[str, ...]
    #: "module:function" of its :class:`Reader`
    reader: str
    #: EDITOR or OPENER
    opens_with: str
    #: the family it belongs to (text, office ...: several kinds share one), a filter offers
    family: str
    #: read as a stream of documents (an mbox): the --max-size cap and the budget are per message
    streamed: bool = False
    #: what its budget's messages call one ("PDF has more than 10,000 parts"); the kind if empty
    name: str = ""
    #: read by OCR: its budget is OCR's (pages and OCR time)
    ocr: bool = False

    def reader_function(self) -> Reader:
        """The reader, imported now (the parsers load only for a file of this kind)."""
        module, _, name = self.reader.partition(":")
        return getattr(importlib.import_module(module), name)

    def read(self, data: bytes, max_chars: int | None = None) -> "ExtractedText":
        """``data`` read by this row's reader within the document's budget (the active one when
        a reader calls another, as a message for its attachments; a streamed kind's is each
        document's own, opened by its reader)."""
        from .budget import reading

        if self.streamed:
            return self.reader_function()(data, max_chars=max_chars)
        with reading(self.name or self.kind, max_chars, ocr=self.ocr):
            return self.reader_function()(data, max_chars=max_chars)


_ODF = "hefsearch.readers.extract_office:extract_odf"  # one reader for the three OpenDocument kinds

FORMATS: tuple[Format, ...] = (
    Format("text", (".txt", ".rst"), "hefsearch.readers.extract_text:extract_plain", EDITOR, "text"),
    Format("markdown", (".md",), "hefsearch.readers.extract_text:extract_plain", EDITOR, "text"),
    Format("html", (".html", ".htm"), "hefsearch.readers.extract_html:extract_html", EDITOR, "html",
           name="HTML page"),
    Format("pdf", (".pdf",), "hefsearch.readers.extract_pdf:extract_pdf", OPENER, "pdf", name="PDF"),
    Format("docx", (".docx",), "hefsearch.readers.extract_docx:extract_docx", OPENER, "docx", name="DOCX"),
    # manual pages have no suffix of their own (ls.1, chsh.1.gz, printf.3p): found by content
    Format("man", (), "hefsearch.readers.extract_man:extract_man", EDITOR, "text", name="manual page"),
    Format("odt", (".odt",), _ODF, OPENER, "office", name="OpenDocument file"),
    Format("ods", (".ods",), _ODF, OPENER, "office", name="OpenDocument file"),
    Format("odp", (".odp",), _ODF, OPENER, "office", name="OpenDocument file"),
    Format("pptx", (".pptx",), "hefsearch.readers.extract_office:extract_pptx", OPENER, "office", name="PPTX"),
    Format("xlsx", (".xlsx",), "hefsearch.readers.extract_office:extract_xlsx", OPENER, "office", name="XLSX"),
    Format("epub", (".epub",), "hefsearch.readers.extract_epub:extract_epub", OPENER, "ebook", name="EPUB"),
    # mail: each message is a document of its own inside its file (index/containers.py)
    Format("eml", (".eml",), "hefsearch.readers.extract_mail:extract_eml", EDITOR, "mail", name="message"),
    Format("mbox", (".mbox", ".mbx"), "hefsearch.readers.extract_mail:extract_mbox", EDITOR, "mail", streamed=True),
    # read by OCR, after the files with text (readers/ocr.py)
    Format("image", (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"),
           "hefsearch.readers.extract_image:extract_image", OPENER, "image", ocr=True),
)

#: kind -> its row
BY_KIND: dict[str, Format] = {f.kind: f for f in FORMATS}
#: the document kinds, in table order
KINDS: tuple[str, ...] = tuple(BY_KIND)
#: suffix -> kind, every built-in suffix
SUPPORTED_SUFFIXES: dict[str, str] = {s: f.kind for f in FORMATS for s in f.suffixes}
#: kinds and suffixes opened with the system opener rather than an editor
OPENER_KINDS: frozenset[str] = frozenset(f.kind for f in FORMATS if f.opens_with == OPENER)
OPENER_SUFFIXES: frozenset[str] = frozenset(s for f in FORMATS if f.opens_with == OPENER for s in f.suffixes)
#: kinds read as a stream of documents, whatever the file's size (the cap is per document)
STREAMED_KINDS: frozenset[str] = frozenset(f.kind for f in FORMATS if f.streamed)
#: kinds whose files hold member documents (each message of a mail file; index/containers.py)
CONTAINER_KINDS: frozenset[str] = frozenset({"eml", "mbox"})


def suffix_list(sep: str = " ") -> str:
    """'.txt .rst .md .html .htm .pdf .docx ...': every built-in suffix in table order."""
    return sep.join(SUPPORTED_SUFFIXES)


def type_names() -> list[str]:
    """What ``--type`` accepts besides the kinds: the suffixes without their dot, sorted."""
    return sorted(s.lstrip(".") for s in SUPPORTED_SUFFIXES)


def kind_families() -> dict[str, tuple[str, ...] | None]:
    """Family -> the kinds in it, ``all`` first (None: every kind)."""
    out: dict[str, tuple[str, ...] | None] = {"all": None}
    for f in FORMATS:
        out[f.family] = (*(out.get(f.family) or ()), f.kind)
    return out

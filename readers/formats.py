"""The file formats hefsearch reads: one row each, and every list of formats elsewhere is
derived from this table (never written out again):

- :func:`hefsearch.readers.extract.extract` picks the row's extractor by kind;
- the crawler and the watcher take :data:`SUPPORTED_SUFFIXES` (plus the library's
  ``extra_suffixes``, which map a suffix onto one of these kinds);
- ``hefsearch index --help`` and calibration's hint list :func:`suffix_list`;
- the TUI opens a hit in an editor or with the system opener (:data:`OPENER_KINDS`,
  :data:`OPENER_SUFFIXES`) and offers the file-type filters :func:`tui_filters`;
- the ``--type``/``--kind`` search filters accept the suffixes and kinds.

Adding a format is one row here plus its extractor: a function ``(data: bytes, max_chars:
int | None) -> ExtractedText`` in a module of its own, named here as ``module:function`` so that
listing formats imports no parser.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

#: how a hit is opened from the TUI
EDITOR = "editor"  # text: $VISUAL/$EDITOR at the hit's line
OPENER = "opener"  # binary formats: the system opener (xdg-open, open)


@dataclass(frozen=True)
class Format:
    #: stored as ``documents.kind``; what ``--kind`` and ``--ext SUFFIX=KIND`` name
    kind: str
    #: lower case, with the dot; the first is the one people know it by
    suffixes: tuple[str, ...]
    #: "module:function" turning the file's bytes into ``ExtractedText``
    extractor: str
    #: EDITOR or OPENER
    opens_with: str
    #: the TUI's file-type filter that lists it (several kinds may share one)
    filter: str
    #: read as a stream of documents (an mbox): the --max-size cap is per message, not per file
    streamed: bool = False

    def extract_function(self) -> Callable:
        """The extractor, imported now (the parsers load only for a file of this kind)."""
        module, _, name = self.extractor.partition(":")
        return getattr(importlib.import_module(module), name)


FORMATS: tuple[Format, ...] = (
    Format("text", (".txt", ".rst"), "hefsearch.readers.extract_text:extract_plain", EDITOR, "text"),
    Format("markdown", (".md",), "hefsearch.readers.extract_text:extract_plain", EDITOR, "text"),
    Format("html", (".html", ".htm"), "hefsearch.readers.extract_html:extract_html", EDITOR, "html"),
    Format("pdf", (".pdf",), "hefsearch.readers.extract_pdf:extract_pdf", OPENER, "pdf"),
    Format("docx", (".docx",), "hefsearch.readers.extract_docx:extract_docx", OPENER, "docx"),
    # manual pages have no suffix of their own (ls.1, chsh.1.gz, printf.3p): found by content
    Format("man", (), "hefsearch.readers.extract_man:extract_man", EDITOR, "text"),
    Format("odt", (".odt",), "hefsearch.readers.extract_office:extract_odf", OPENER, "office"),
    Format("ods", (".ods",), "hefsearch.readers.extract_office:extract_odf", OPENER, "office"),
    Format("odp", (".odp",), "hefsearch.readers.extract_office:extract_odf", OPENER, "office"),
    Format("pptx", (".pptx",), "hefsearch.readers.extract_office:extract_pptx", OPENER, "office"),
    Format("xlsx", (".xlsx",), "hefsearch.readers.extract_office:extract_xlsx", OPENER, "office"),
    Format("epub", (".epub",), "hefsearch.readers.extract_epub:extract_epub", OPENER, "ebook"),
    # mail: each message is a document of its own inside its file (index/containers.py)
    Format("eml", (".eml",), "hefsearch.readers.extract_mail:extract_eml", EDITOR, "mail"),
    Format("mbox", (".mbox", ".mbx"), "hefsearch.readers.extract_mail:extract_mbox", EDITOR, "mail", streamed=True),
    # read by OCR, after the files with text (readers/ocr.py)
    Format("image", (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"), "hefsearch.readers.extract_image:extract_image",
           OPENER, "image"),
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


def tui_filters() -> dict[str, tuple[str, ...] | None]:
    """The TUI's file-type filters: label -> the kinds it keeps (``all``: None, every kind)."""
    out: dict[str, tuple[str, ...] | None] = {"all": None}
    for f in FORMATS:
        out[f.filter] = (*(out.get(f.filter) or ()), f.kind)
    return out

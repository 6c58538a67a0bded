"""HTML pages: the readable text, parsed as a stream (lxml's parser with a target, else the
standard library's), decoded chunk by chunk, with no tree."""

from __future__ import annotations

import codecs
import re
import sys

from .extract_base import ExtractedText, ExtractionError, describe
from .extract_text import decode_text, reject_binary


def extract_html(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``html`` kind (see :mod:`hefsearch.readers.formats`), within the
    page's budget (:mod:`hefsearch.readers.budget`: its time is checked as it is parsed)."""
    from .budget import reading

    with reading("HTML page", max_chars):
        return ExtractedText(text=html_to_text(data))


_HTML_DROP = frozenset(("script", "style", "noscript", "template", "head", "svg", "canvas", "iframe", "object"))
_HTML_BLOCK = frozenset((
    "p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "blockquote",
    "pre", "table", "ul", "ol", "dl", "form", "fieldset", "figure", "address", "details",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "title", "caption",
))
_HTML_LINE = frozenset(("li", "tr", "dt", "dd", "figcaption", "summary", "option"))
_HTML_CELL = frozenset(("td", "th"))
_HTML_HEADING = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))
_ANY_SPACE = re.compile(r"\s+")


def html_parser() -> str:
    """lxml when installed (fast), else the standard library parser."""
    try:
        import lxml  # noqa: F401
    except ImportError:
        return "html.parser"
    return "lxml"


def html_to_text(data: bytes, parser: str | None = None) -> str:
    """Readable text of an HTML page: no scripts, styles or markup; blocks become paragraphs
    (blank lines), list items and <br> new lines, table cells are separated by " | ".

    Streaming: the parser (lxml's libxml2, else the standard library's) calls
    :class:`_HtmlText` for each tag and string, and only the text, a stack of the open tags'
    names and a few counters are kept; no tree is built. Memory is therefore bounded by the
    file and the text it yields (an 11 MB file of 1M nested ``<div>``: 21 MB at peak with the
    file's bytes, instead of 555 MB for a BeautifulSoup tree; ``bench/hostile_extract.py``)."""
    return html_text_and_body(data, parser)[0]


def html_text_and_body(data: bytes, parser: str | None = None) -> tuple[str, bool]:
    """:func:`html_to_text`, and whether the page has text of its own besides its title and
    headings (a book's chapter that is a heading alone makes no section)."""
    reject_binary(data)
    data = data.replace(b"\x00", b"")
    try:
        sink = _parse_html(data, parser or html_parser())
    except ExtractionError:  # the document's budget ran out while it was parsed
        raise
    except Exception as e:  # noqa: BLE001 - hostile input; any parser failure is a bad file
        raise ExtractionError(f"HTML could not be parsed: {describe(e)}") from None
    text, title = sink.finish()
    if title and not text.startswith(title):
        text = f"{title}\n\n{text}" if text else title
    return text, sink.body_text


#: the WHATWG encoding standard reads these labels as windows-1252 (browsers do)
_AS_CP1252 = {"iso-8859-1", "iso8859-1", "latin-1", "latin1", "l1", "ascii", "us-ascii", "cp819", "ibm819"}
#: elements that never have content or an end tag (html.parser reports no end for them)
_HTML_VOID = frozenset(("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
                        "source", "track", "wbr", "basefont", "bgsound", "frame", "keygen"))
_FEED_CHARS = 1 << 16


def _parse_html(data: bytes, parser: str) -> "_HtmlText":
    """The page parsed into an :class:`_HtmlText`, decoded chunk by chunk as it is fed (the
    whole page is never held as text): with its byte-order mark's encoding, else the charset
    it declares (``<meta charset>``, an XML declaration), else UTF-8; a page that is none of
    these is decoded whole by the text-file detection (legacy code pages, on a sample), else
    as windows-1252 with replacements."""
    from bs4.dammit import EncodingDetector

    data, bom = EncodingDetector.strip_byte_order_mark(data)
    declared = EncodingDetector.find_declared_encoding(data, is_html=True)
    for label in (bom, declared, "utf-8"):
        if not label:
            continue
        encoding = "cp1252" if label.lower() in _AS_CP1252 else label
        try:
            codecs.getincrementaldecoder(encoding)
        except LookupError:
            continue
        try:
            return _parse_chunks(parser, lambda: _decoded(data, encoding))
        except UnicodeDecodeError:
            continue  # not that encoding after all: the next
    try:
        markup = decode_text(data)[0]
    except ExtractionError:
        markup = data.decode("cp1252", "replace")
    return _parse_chunks(parser, lambda: (markup[i : i + _FEED_CHARS] for i in range(0, len(markup), _FEED_CHARS)))


def _decoded(data: bytes, encoding: str):
    """``data`` as text, one chunk at a time (a fresh decoder per pass)."""
    decoder = codecs.getincrementaldecoder(encoding)()
    for i in range(0, max(len(data), 1), _FEED_CHARS):
        yield decoder.decode(data[i : i + _FEED_CHARS], final=i + _FEED_CHARS >= len(data))


class _TooDeep(Exception):
    """Raised by the target when lxml's parse nests deeper than LXML_MAX_DEPTH."""


#: elements open at once from which a page is parsed again by html.parser: libxml2 keeps about
#: 40 bytes per open element (1M nested <div>: 41 MB), html.parser nothing, and no page a person
#: wrote comes near (browsers flatten the tree at 512)
LXML_MAX_DEPTH = 10_000


def _parse_chunks(parser: str, chunks) -> "_HtmlText":
    """An :class:`_HtmlText` of the text chunks ``chunks()`` yields (called again for a second
    pass: a page nested beyond LXML_MAX_DEPTH is parsed again with html.parser)."""
    sink = _HtmlText(max_depth=LXML_MAX_DEPTH if parser == "lxml" else None)
    try:
        _feed(parser, sink, chunks())
    except _TooDeep:
        sink = _HtmlText()
        _feed("html.parser", sink, chunks())
    return sink


def _feed(parser: str, sink: "_HtmlText", chunks) -> None:
    """Drive ``parser`` (lxml or html.parser) over the text ``chunks``, calling ``sink``."""
    if parser == "lxml":
        from lxml import etree

        p = etree.HTMLParser(target=sink, recover=True, no_network=True, remove_comments=True, remove_pis=True)
    else:
        p = _StdlibFeeder(sink)
    from .budget import current

    budget = current()  # the page's time, checked between chunks (64 K characters)
    for chunk in chunks:
        if chunk:
            p.feed(chunk)
            if budget is not None:
                budget.check_time()
    p.close()


class _HtmlText:
    """A parser target (lxml's ``target=`` interface; :class:`_StdlibFeeder` adapts
    html.parser) that writes the page's readable text while the page is parsed: text inside
    ``_HTML_DROP`` elements is skipped; blocks end paragraphs, list items and ``<br>`` lines,
    cells are joined by " | "; whitespace collapses as a browser shows it, ``pre`` keeps its
    line breaks; each line is stripped (of spaces and of the pipes of empty cells) and blank
    lines fold into one. Only the open tags' names (interned: 8 bytes a level), the line being
    read and the text so far are held, so memory follows the text, never the markup: a
    million nested blocks end a million empty lines and keep nothing."""

    #: finished lines joined into one string this often (a list of millions of short strings
    #: costs ~50 bytes each)
    JOIN_EVERY = 4096

    def __init__(self, max_depth: int | None = None):
        self.max_depth = max_depth
        self.open: list[str] = []  # names of the open elements
        self.drop = 0  # open elements whose content is not text
        self.pre = 0
        self.title: str | None = None
        self._title_parts: list[str | None] | None = None
        self._template = 0  # open <template>s: their strings are not the title's (bs4's TemplateString)
        self._line: list[str] = []  # pieces of the line being read
        self._line_blocks: list[str] = []  # earlier pieces of it, joined JOIN_EVERY at a time
        self._space = False  # a collapsed space is due before the line's next text
        self._blank = 0  # blank lines since the last line with text
        self._written = False  # a line with text was written
        self._pieces: list[str] = []
        self._blocks: list[str] = []
        self._headings = 0  # open <h1>-<h6>
        #: text outside the title and the headings was seen
        self.body_text = False

    # the parser's callbacks ---------------------------------------------------------------
    def start(self, tag, attrib=None) -> None:
        if not isinstance(tag, str):  # lxml: a comment or processing instruction
            return
        name = sys.intern(tag.lower())
        if self._title_parts is not None:
            self._title_parts.append(None)  # a tag inside the title ends one of its strings
        if name in _HTML_VOID:
            if not self.drop and name == "br":
                self._end_line()
            elif not self.drop and name in _HTML_BLOCK:
                self._paragraph()
            return
        self.open.append(name)
        if self.max_depth is not None and len(self.open) > self.max_depth:
            raise _TooDeep()
        if name == "template":
            self._template += 1
        if name == "title" and self.title is None and self._title_parts is None:
            self._title_parts = []
        if name in _HTML_DROP:
            self.drop += 1
        if self.drop:
            return
        if name in ("pre", "textarea"):
            self.pre += 1
        self._headings += name in _HTML_HEADING
        if name in _HTML_BLOCK:
            self._paragraph()
        elif name in _HTML_LINE:
            self._end_line()
        elif name in _HTML_CELL:
            self._cell()

    def end(self, tag) -> None:
        if not isinstance(tag, str):
            return
        name = tag.lower()
        if self._title_parts is not None:
            self._title_parts.append(None)
        if name in _HTML_VOID or name not in self.open:  # a stray end tag
            return
        while self.open:
            top = self.open.pop()
            self._closed(top)
            if top == name:
                return

    def data(self, text: str) -> None:
        if self._title_parts is not None and not self._template:
            self._title_parts.append(text)
        if self.drop or not text:
            return
        if not self._headings and not self.body_text and not text.isspace():
            self.body_text = True
        if self.pre and "\n" in text:
            first, *rest = text.split("\n")
            self._text(first)
            for part in rest:
                self._end_line()
                self._text(part)
        else:
            self._text(text)

    def close(self) -> None:
        while self.open:
            self._closed(self.open.pop())

    # -------------------------------------------------------------------------------------------
    def finish(self) -> tuple[str, str]:
        """(the page's text, the first <title>'s text)."""
        self.close()
        self._end_line()
        return "".join(self._blocks + self._pieces), self.title or ""

    def _closed(self, name: str) -> None:
        if name == "title" and self._title_parts is not None:
            strings = "".join(p if p is not None else "\0" for p in self._title_parts).split("\0")
            self.title = " ".join(t.strip() for t in strings if t.strip())  # as bs4's get_text(" ", strip=True)
            self._title_parts = None
        if name == "template":
            self._template -= 1
        if name in _HTML_DROP:
            self.drop -= 1
            return
        if self.drop:
            return
        if name in ("pre", "textarea"):
            self.pre -= 1
        self._headings -= name in _HTML_HEADING
        if name in _HTML_BLOCK:
            self._paragraph()

    def _text(self, text: str) -> None:
        """A string of the page: whitespace runs become one space, which is held back until
        more text follows (so the line never needs stripping, i.e. copying, at its end)."""
        text = _ANY_SPACE.sub(" ", text)  # one piece at a time: re.sub lists every match
        if text.startswith(" "):
            self._space, text = True, text[1:]
        if not text:
            return
        self._flush_space()
        if text.endswith(" "):
            self._add(text[:-1])
            self._space = True
        else:
            self._add(text)

    def _cell(self) -> None:
        self._flush_space()
        self._add(" | ")

    def _flush_space(self) -> None:
        if self._space and (self._line or self._line_blocks):  # none at the start of a line
            self._add(" ")
        self._space = False

    def _add(self, piece: str) -> None:
        self._line.append(piece)
        if len(self._line) >= self.JOIN_EVERY:  # a line of a million cells: one string, not a million
            self._line_blocks.append("".join(self._line))
            self._line = []

    def _paragraph(self) -> None:
        self._end_line()
        self._end_line()  # the blank line after it

    def _end_line(self) -> None:
        line = ("".join(self._line_blocks + self._line).strip().strip("|").strip()
                if self._line or self._line_blocks else "")
        self._line, self._line_blocks, self._space = [], [], False
        if not line:
            self._blank += 1
            return
        if self._written:
            self._pieces.append("\n\n" if self._blank else "\n")
        self._pieces.append(line)
        self._written, self._blank = True, 0
        if len(self._pieces) > self.JOIN_EVERY:
            self._blocks.append("".join(self._pieces))
            self._pieces = []


def _StdlibFeeder(sink: "_HtmlText"):
    """html.parser (the standard library's) calling :class:`_HtmlText`, for machines without lxml."""
    from html.parser import HTMLParser

    class Feeder(HTMLParser):
        def handle_starttag(self, tag, attrs):
            sink.start(tag)

        def handle_startendtag(self, tag, attrs):
            sink.start(tag)
            sink.end(tag)

        def handle_endtag(self, tag):
            sink.end(tag)

        def handle_data(self, data):
            sink.data(data)

        def unknown_decl(self, data):
            if data.upper().startswith("CDATA["):
                sink.data(data[6:])

    return Feeder(convert_charrefs=True)

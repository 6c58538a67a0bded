"""Plain text out of a user's document, or a human reason why not.

One entry point, :func:`extract`. Every format goes through :func:`read_regular_file`, which
opens without blocking and refuses anything that is not a regular file, so a FIFO or device that
slipped past the crawler (or replaced a file since) cannot hang us. All work is linear in the
size of the file: byte statistics and decoding run in C, charset detection samples the data, and
the parsers are well-kept libraries (charset-normalizer, beautifulsoup4, pypdf, python-docx).

Compressed formats (DOCX, PDF streams) can unpack to far more text than their size: the text
one file may produce is capped at ``max_bytes`` characters too (the ``--max-size`` limit), and a
large DOCX body is streamed, never loaded whole, so a 300 KB "zip bomb" stops at the cap with a
reason instead of taking minutes and gigabytes.
"""

from __future__ import annotations

import codecs
import io
import logging
import os
import re
import stat
import sys
import warnings
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hefsearch.embed.errors import HefsearchError

SUPPORTED_SUFFIXES: dict[str, str] = {
    ".txt": "text",
    ".md": "markdown",
    ".rst": "text",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
}

# A .docx is a ZIP; refuse one that would inflate beyond this (a zip bomb, not a letter).
MAX_DOCX_UNPACKED = 512 * 1024 * 1024
# A DOCX body (word/document.xml) larger than this is streamed instead of loaded by python-docx,
# whose tree costs tens of bytes of memory per byte of XML (a Pi has 4 GB).
DOCX_DOM_LIMIT = 4 * 1024 * 1024
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
# Share of control bytes (other than tab, newlines, form feed, escape) above which a file is
# binary. Random or compressed data has about 10%; real text, even legacy text, has ~0%.
BINARY_CONTROL_SHARE = 0.05
# Charset detection and the mess check look at this much text, so they cost O(1) per file.
_SAMPLE_CHARS = 64 * 1024

_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27))
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Legacy code pages in rough order of how common they are in old documents.
_COMMON_LEGACY = (
    "cp1252", "cp1251", "cp1250", "cp1253", "cp1254", "cp1257", "cp1255", "cp1256",
    "cp932", "shift_jis", "gb18030", "gb2312", "big5", "cp949", "euc_kr", "euc_jp", "koi8_r",
    "iso8859_2", "iso8859_5", "iso8859_7", "iso8859_9", "iso8859_15",
)
_WIDE_ENCODINGS = ["utf_16", "utf_16_be", "utf_16_le", "utf_32", "utf_32_be", "utf_32_le"]


class ExtractionError(HefsearchError):
    """A file could not be turned into text; ``message`` is the reason shown to the user."""

    title = "cannot read document"


@dataclass
class ExtractedText:
    text: str  # the plain text; NUL bytes removed, newlines normalised to "\n"
    kind: str  # "text", "markdown", "html", "pdf", "docx"
    pages: list[tuple[int, int, int]] | None = None  # (page from 1, char_start, char_end), PDFs
    encoding: str | None = None  # detected encoding for text files


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
    data = _decompressed(path, data, max_bytes)
    if kind in ("text", "markdown"):
        text, encoding = decode_text(data)
        return ExtractedText(text=text, kind=kind, encoding=encoding)
    if kind == "html":
        return ExtractedText(text=html_to_text(data), kind=kind)
    if kind == "pdf":
        text, pages = pdf_to_text(data, max_chars=max_bytes)
        return ExtractedText(text=text, kind=kind, pages=pages)
    if kind == "docx":
        return ExtractedText(text=docx_to_text(data, max_chars=max_bytes), kind=kind)
    raise ExtractionError(f"{path.name}: no extractor for kind '{kind}'")


def _decompressed(path: Path, data: bytes, max_bytes: int | None) -> bytes:
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


# --- plain text -------------------------------------------------------------------------------


def decode_text(data: bytes) -> tuple[str, str | None]:
    """Bytes of a text file -> (text, encoding name). Raises ExtractionError for binary data or
    bytes that are neither UTF-8/16/32 nor a recognisable legacy encoding."""
    if not data:
        return "", None
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom):].decode(encoding)
            except UnicodeDecodeError as e:
                raise ExtractionError(f"starts with a {encoding} byte order mark but is not valid {encoding}: {e.reason} at byte {e.start + len(bom)}") from None
            return _clean(text), encoding + "-bom"
    wide = _guess_bomless_utf16(data)
    if wide is not None:
        return _clean(wide[0]), wide[1]
    data = _reject_binary(data)
    try:
        return _clean(data.decode("utf-8")), "utf-8"
    except UnicodeDecodeError:
        pass
    mostly_utf8 = _mostly_utf8(data)
    if mostly_utf8 is not None:
        return _clean(mostly_utf8), "utf-8 (some invalid bytes replaced)"
    text, encoding = _decode_legacy(data)
    return _clean(text), encoding


def looks_like_text(sample: bytes) -> bool:
    """Whether the first bytes of a file without a known suffix are text: a byte-order mark or
    BOM-less UTF-16, else no NUL and few control bytes (UTF-8 or a legacy code page; binary and
    compressed data have NULs or about 10% control bytes)."""
    if not sample.strip():
        return False
    if any(sample.startswith(bom) for bom, _ in _BOMS):
        return True
    if len(sample) % 2:  # a cut sample: BOM-less UTF-16 is judged on whole code units
        sample = sample[:-1] or sample
    if _guess_bomless_utf16(sample) is not None:
        return True
    return b"\x00" not in sample and _control_share(sample) <= BINARY_CONTROL_SHARE


def _clean(text: str) -> str:
    """Drop NULs and normalise line endings, so char spans and line numbers mean the same everywhere."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _guess_bomless_utf16(data: bytes) -> tuple[str, str] | None:
    """UTF-16 without a byte order mark: NULs in every other byte of mostly-ASCII text."""
    n = len(data)
    if n < 4 or n % 2:
        return None
    sample = data[: 2 * _SAMPLE_CHARS]
    half = len(sample) // 2
    even_nuls = sample[0::2].count(0)
    odd_nuls = sample[1::2].count(0)
    for nuls, other, encoding in ((odd_nuls, even_nuls, "utf-16-le"), (even_nuls, odd_nuls, "utf-16-be")):
        if nuls >= 0.4 * half and other <= 0.02 * half:
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError:
                return None
            if _control_share(text[:_SAMPLE_CHARS].encode("utf-8", "replace")) <= BINARY_CONTROL_SHARE:
                return text, encoding
    return None


def _control_share(data: bytes) -> float:
    if not data:
        return 0.0
    return (len(data) - len(data.translate(None, _CONTROL_BYTES))) / len(data)


def _reject_binary(data: bytes) -> bytes:
    """Return ``data`` without stray NULs, or raise if it looks like binary data."""
    nuls = data.count(0)
    stripped = data.replace(b"\x00", b"") if nuls else data
    if nuls and not stripped.strip():
        raise ExtractionError(f"binary data: {nuls} NUL bytes and no text")
    share = _control_share(stripped)
    if share > BINARY_CONTROL_SHARE:
        raise ExtractionError(
            f"binary data, not text ({share:.0%} control bytes)",
            hint="if this is a document in another format, convert it to .txt, .pdf or .docx",
        )
    return stripped


def _mostly_utf8(data: bytes) -> str | None:
    """UTF-8 with a few broken bytes (a truncated or patched file) stays UTF-8, with U+FFFD for
    the broken bytes. Pure ASCII plus a few high bytes is a legacy file instead ("café" in cp1252)."""
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - data.count(b"\xef\xbf\xbd")
    multibyte = len(data) - len(text)  # extra bytes of valid multi-byte sequences
    if bad <= max(1, len(data) // 1000) and multibyte > 4 * bad:
        return text
    return None


def _decode_legacy(data: bytes) -> tuple[str, str]:
    """Pick a legacy code page with charset-normalizer, preferring cp1252 when it reads as well."""
    from charset_normalizer import from_bytes
    from charset_normalizer.md import mess_ratio

    results = from_bytes(_detection_sample(data), cp_exclusion=_WIDE_ENCODINGS)
    best = results.best()
    try:
        western = data.decode("cp1252")
    except UnicodeDecodeError:
        western = None
    if western is not None:
        # charset-normalizer often ranks cp1250/cp1257 first for short German or French text
        # (they decode the common letters identically); cp1252 is the likely truth in the West.
        mess = mess_ratio(western[:_SAMPLE_CHARS], maximum_threshold=1.0)
        if (best is None and mess <= 0.1) or (best is not None and mess <= best.chaos + 0.02):
            return western, "cp1252"
    if best is None:
        raise ExtractionError(
            "not valid UTF-8 nor a known legacy encoding",
            hint="re-save the file as UTF-8",
        )
    encoding = _prefer_common(results, best)
    return data.decode(encoding, errors="replace"), encoding


def _prefer_common(results, best) -> str:
    """Among candidates that read about as well as the best one (short texts often tie), take
    the code page people actually used (cp1251 over mac_cyrillic, say)."""
    top_coherence = max(r.coherence for r in results)
    near = [r for r in results if r.chaos <= best.chaos + 0.02 and r.coherence >= top_coherence - 0.05]
    for preferred in _COMMON_LEGACY:
        for r in near:
            if preferred in r.could_be_from_charset:
                return preferred
    return best.encoding


def _detection_sample(data: bytes, limit: int = 1024 * 1024) -> bytes:
    """Head and tail of a large file for charset detection (which decodes its input once per
    candidate encoding). Cut at newlines: 0x0A is never part of a multi-byte character in the
    legacy CJK encodings, so the sample stays decodable."""
    if len(data) <= limit:
        return data
    head = data[: limit // 2]
    tail = data[-limit // 2:]
    cut = head.rfind(b"\n")
    head = head[: cut + 1] if cut > 0 else head
    cut = tail.find(b"\n")
    tail = tail[cut + 1:] if 0 <= cut < len(tail) - 1 else tail
    return head + tail


# --- HTML -------------------------------------------------------------------------------------

_HTML_DROP = frozenset(("script", "style", "noscript", "template", "head", "svg", "canvas", "iframe", "object"))
_HTML_BLOCK = frozenset((
    "p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "blockquote",
    "pre", "table", "ul", "ol", "dl", "form", "fieldset", "figure", "address", "details",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "title", "caption",
))
_HTML_LINE = frozenset(("li", "tr", "dt", "dd", "figcaption", "summary", "option"))
_HTML_CELL = frozenset(("td", "th"))
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
    _reject_binary(data)
    data = data.replace(b"\x00", b"")
    try:
        sink = _parse_html(data, parser or html_parser())
    except Exception as e:  # noqa: BLE001 - hostile input; any parser failure is a bad file
        raise ExtractionError(f"HTML could not be parsed: {_describe(e)}") from None
    text, title = sink.finish()
    if title and not text.startswith(title):
        text = f"{title}\n\n{text}" if text else title
    return text


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
    for chunk in chunks:
        if chunk:
            p.feed(chunk)
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


# --- PDF --------------------------------------------------------------------------------------


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


def too_much_text(kind: str, max_chars: int) -> ExtractionError:
    return ExtractionError(
        f"{kind} unpacks to more than {max_chars / 2**20:.1f} MiB of text (the --max-size limit "
        "applies to the text of compressed formats too); not indexed",
        hint="raise --max-size if this document is genuine")


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
            raise ExtractionError(f"PDF is corrupt: {_describe(e)}") from None
        if not pages:
            raise ExtractionError("PDF is corrupt: it has no pages")
        texts: list[str] = []
        failed = 0
        first_error = ""
        total = 0
        for page in pages:
            try:
                texts.append(_clean(page.extract_text() or "").strip())
            except Exception as e:  # noqa: BLE001 - one bad page must not lose the others
                failed += 1
                first_error = first_error or _describe(e)
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


def _describe(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."


# --- DOCX -------------------------------------------------------------------------------------


def docx_to_text(data: bytes, max_chars: int | None = None) -> str:
    """Body paragraphs and tables of a Word document in reading order, paragraphs separated by
    blank lines, table cells by " | ". A large body is streamed (:func:`_docx_stream_text`);
    more than ``max_chars`` characters of text is an ExtractionError."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            unpacked = sum(info.file_size for info in zf.infolist())
            if unpacked > MAX_DOCX_UNPACKED:
                raise ExtractionError(f"DOCX would unpack to {unpacked // 2**20} MB; refusing "
                                      f"(limit {MAX_DOCX_UNPACKED // 2**20} MB)")
            body = _docx_body_part(zf)
            if body is not None and body.file_size > DOCX_DOM_LIMIT:
                return _docx_stream_text(zf, body, max_chars)
    except ExtractionError:
        raise
    except zipfile.BadZipFile:
        raise ExtractionError("DOCX is corrupt: not a ZIP archive") from None
    except Exception as e:  # noqa: BLE001
        raise ExtractionError(f"DOCX is corrupt: {_describe(e)}") from None
    text = _docx_dom_text(data)
    if max_chars is not None and len(text) > max_chars:
        raise too_much_text("DOCX", max_chars)
    return text


def _docx_dom_text(data: bytes) -> str:
    """A small DOCX through python-docx (its body is at most DOCX_DOM_LIMIT bytes of XML)."""
    try:
        import docx
        from docx.table import Table

        document = docx.Document(io.BytesIO(data))
        blocks: list[str] = []
        for item in document.iter_inner_content():
            if isinstance(item, Table):
                blocks.extend(_table_rows(item))
            else:
                blocks.append(item.text)
    except Exception as e:  # noqa: BLE001 - hostile input; any parser failure means corrupt
        raise ExtractionError(f"DOCX is corrupt: {_describe(e)}") from None
    return "\n\n".join(b.strip() for b in (_clean(b) for b in blocks) if b.strip())


def _docx_body_part(zf: zipfile.ZipFile) -> zipfile.ZipInfo | None:
    """The main document part, as the package relationships name it (usually
    word/document.xml); None when there is none (python-docx then says what is wrong)."""
    import xml.etree.ElementTree as ET

    name = "word/document.xml"
    try:
        rels = zf.getinfo("_rels/.rels")
        if rels.file_size <= 1024 * 1024:
            for rel in ET.fromstring(zf.read(rels)):
                if rel.get("Type", "").endswith("/officeDocument") and rel.get("Target"):
                    name = rel.get("Target").lstrip("/")
                    break
    except (KeyError, ET.ParseError):
        pass
    try:
        return zf.getinfo(name)
    except KeyError:
        return None


def _docx_stream_text(zf: zipfile.ZipFile, body: zipfile.ZipInfo, max_chars: int | None) -> str:
    """The same text as python-docx gives, by one streaming pass over the body XML: each
    element is dropped as soon as it has ended, so memory stays flat however long the document,
    and reading stops as soon as the text passes ``max_chars``."""
    from lxml import etree

    blocks: list[str] = []
    frames: list[tuple[str, list[str]]] = []  # open p / tc / tr / tbl, each with its parts
    total = 0
    run_chars = {_W + "tab": "\t", _W + "ptab": "\t", _W + "br": "\n", _W + "cr": "\n",
                 _W + "noBreakHyphen": "-"}
    containers = {_W + "p": "p", _W + "tc": "tc", _W + "tr": "tr", _W + "tbl": "tbl"}
    with zf.open(body) as xml:
        events = etree.iterparse(xml, events=("start", "end"), resolve_entities=False,
                                 no_network=True, huge_tree=False, remove_comments=True)
        for event, elem in events:
            tag = elem.tag
            kind = containers.get(tag)
            if event == "start":
                if kind is not None:
                    frames.append((kind, []))
                continue
            if tag == _W + "t" and frames and frames[-1][0] == "p":
                piece = elem.text or ""
            elif tag in run_chars and frames and frames[-1][0] == "p" and elem.getparent().tag == _W + "r":
                piece = run_chars[tag]
            else:
                piece = ""
            if piece:
                frames[-1][1].append(piece)
                total += len(piece)
                if max_chars is not None and total > max_chars:
                    raise too_much_text("DOCX", max_chars)
            if kind is not None:
                _close_docx_frame(frames, blocks)
            elem.clear(keep_tail=True)
            parent = elem.getparent()
            if parent is not None:  # drop what has been read, or a long body fills memory
                while elem.getprevious() is not None:
                    del parent[0]
    return "\n\n".join(b.strip() for b in (_clean(b) for b in blocks) if b.strip())


def _close_docx_frame(frames: list[tuple[str, list[str]]], blocks: list[str]) -> None:
    """An element of structure ended: turn its parts into text for the enclosing one."""
    kind, parts = frames.pop()
    if kind == "p":
        text = "".join(parts)
    elif kind == "tc":
        text = " ".join("\n".join(parts).split())
    elif kind == "tr":
        text = " | ".join(c for c in parts if c)
    else:  # tbl
        text = "\n".join(r for r in parts if r)
    if not frames:
        blocks.append(text)
    elif frames[-1][0] == "p":  # a text box inside a paragraph
        frames[-1][1].append(" " + text if text else "")
    else:
        frames[-1][1].append(text)


def _table_rows(table) -> list[str]:
    rows = []
    for row in table.rows:
        seen: set[int] = set()
        cells = []
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell repeats for every grid column it spans
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        rows.append(" | ".join(c for c in cells if c))
    return ["\n".join(r for r in rows if r)]

"""Word documents (DOCX): body paragraphs and tables in reading order; a large body is
streamed, never loaded whole, so a 300 KB "zip bomb" stops at the --max-size cap."""

from __future__ import annotations

import io
import zipfile

from .extract_base import ExtractedText, ExtractionError, clean_text, describe, too_much_text

# A .docx is a ZIP; refuse one that would inflate beyond this (a zip bomb, not a letter).
MAX_DOCX_UNPACKED = 512 * 1024 * 1024
# A DOCX body (word/document.xml) larger than this is streamed instead of loaded by python-docx,
# whose tree costs tens of bytes of memory per byte of XML (a Pi has 4 GB).
DOCX_DOM_LIMIT = 4 * 1024 * 1024
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def extract_docx(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``docx`` kind (see :mod:`hefsearch.readers.formats`), within the
    document's budget (:mod:`hefsearch.readers.budget`: its time is checked as the body streams)."""
    from .budget import reading

    with reading("DOCX", max_chars):
        return ExtractedText(text=docx_to_text(data, max_chars=max_chars))



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
        raise ExtractionError(f"DOCX is corrupt: {describe(e)}") from None
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
        raise ExtractionError(f"DOCX is corrupt: {describe(e)}") from None
    return "\n\n".join(b.strip() for b in (clean_text(b) for b in blocks) if b.strip())


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


#: run elements that stand for a character
_RUN_CHARS = {_W + "tab": "\t", _W + "ptab": "\t", _W + "br": "\n", _W + "cr": "\n", _W + "noBreakHyphen": "-"}
#: the elements whose text is gathered until they end: paragraph, table cell, row, table
_CONTAINERS = {_W + "p": "p", _W + "tc": "tc", _W + "tr": "tr", _W + "tbl": "tbl"}


def _docx_stream_text(zf: zipfile.ZipFile, body: zipfile.ZipInfo, max_chars: int | None) -> str:
    """The same text as python-docx gives, by one streaming pass over the body XML: each
    element is dropped as soon as it has ended, so memory stays flat however long the document,
    and reading stops as soon as the text passes ``max_chars``."""
    from lxml import etree

    from .budget import current

    blocks: list[str] = []
    frames: list[tuple[str, list[str]]] = []  # open p / tc / tr / tbl, each with its parts
    total = 0
    budget = current()
    with zf.open(body) as xml:
        events = etree.iterparse(xml, events=("start", "end"), resolve_entities=False,
                                 no_network=True, huge_tree=False, remove_comments=True)
        for event, elem in events:
            if budget is not None:
                budget.tick()
            kind = _CONTAINERS.get(elem.tag)
            if event == "start":
                if kind is not None:
                    frames.append((kind, []))
                continue
            piece = _run_piece(elem, frames)
            if piece:
                frames[-1][1].append(piece)
                total += len(piece)
                if max_chars is not None and total > max_chars:
                    raise too_much_text("DOCX", max_chars)
            if kind is not None:
                _close_docx_frame(frames, blocks)
            _forget(elem)
    return "\n\n".join(b.strip() for b in (clean_text(b) for b in blocks) if b.strip())


def _run_piece(elem, frames: list[tuple[str, list[str]]]) -> str:
    """The text an ended element adds to the open paragraph: a run's text, or the character a
    tab, break or hyphen element stands for; "" outside a paragraph."""
    if not frames or frames[-1][0] != "p":
        return ""
    if elem.tag == _W + "t":
        return elem.text or ""
    if elem.tag in _RUN_CHARS and elem.getparent().tag == _W + "r":
        return _RUN_CHARS[elem.tag]
    return ""


def _forget(elem) -> None:
    """An ended element and its read siblings dropped, or a long body fills memory."""
    elem.clear(keep_tail=True)
    parent = elem.getparent()
    if parent is not None:
        while elem.getprevious() is not None:
            del parent[0]


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

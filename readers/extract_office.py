"""OpenDocument (ODT, ODS, ODP), PowerPoint (PPTX) and Excel (XLSX) files: their text in page,
slide and sheet order, each slide or sheet a numbered section whose first line names it
("Slide 3", "Sheet: Budget"), so a hit names where it is.

Read through the archive and XML limits of :mod:`hefsearch.readers.extract_zip` (the stdlib
zip + lxml streaming path of the DOCX reader): python-pptx and openpyxl build whole trees and
odfpy a DOM, while these formats' text is a few elements each; a streamed pass keeps memory
bounded by one paragraph or row, expands no entity, and honours the --max-size cap on text.
A spreadsheet's repeated cells (``number-columns-repeated``, a classic ODS bomb) are read once.
Every sheet or slide is a part of the document's budget (:mod:`hefsearch.readers.budget`): past
its parts or its time, the ones read are kept and the run says so. An XLSX's shared strings
are read only as far as its sheets use them, and held as one string per few thousand entries
(each entry costs 4 bytes and its characters, counted against the memory budget).
"""

from __future__ import annotations

import io

from array import array

from .budget import Budget, OverBudget, reading
from .extract_base import ExtractedText, ExtractionError, clean_text
from .extract_zip import (BlockTags, drop_read, iter_xml, joined, local_name, open_archive, part_name, read_part,
                          read_sections, text_blocks, xml_root)

_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
#: a slide's text: its paragraphs <a:p>, their runs' <a:t>, tabs and line breaks
_PPTX_PARAGRAPHS = BlockTags(block=frozenset({"p"}), text=frozenset({"t"}), tab=frozenset({"tab"}),
                             line_break=frozenset({"br"}))


def _text(node) -> str:
    return " ".join("".join(node.itertext()).split())


# -- OpenDocument ----------------------------------------------------------------------------
def extract_odf(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``odt``, ``ods`` and ``odp`` kinds: content.xml in order; a
    spreadsheet's tables and a presentation's pages are sections."""
    what = "OpenDocument file"
    zf = open_archive(data, what)
    try:  # which elements are sections: a spreadsheet's tables, a presentation's pages
        mimetype = read_part(zf, "mimetype", what, 200).decode("ascii", "replace")
    except ExtractionError:
        mimetype = ""
    sheets, slides = mimetype.endswith(".spreadsheet"), mimetype.endswith(".presentation")
    with reading(what, max_chars) as budget:
        return _odf_read(zf, what, sheets, slides, budget)


def _odf_read(zf, what: str, sheets: bool, slides: bool, budget: Budget) -> ExtractedText:
    sections: list[tuple[str, list[str]]] = []
    notes: list[str] = []
    loose: list[str] = []  # text outside any sheet or slide (a text document's body)
    try:
        _odf_walk(zf, what, sheets, slides, budget, (sections, loose))
    except OverBudget as e:
        if not sections:
            raise
        sections.pop()  # the one being read when the budget ran out
        notes.append(budget.kept(e, len(sections), None, "sheets" if sheets else "slides"))
    if not sections:
        return ExtractedText(text=clean_text("\n\n".join(loose)), notes=notes)
    text, spans = joined([(label, "\n\n".join(blocks)) for label, blocks in sections])
    return ExtractedText(text=clean_text(text), pages=spans, notes=notes)


def _odf_walk(zf, what: str, sheets: bool, slides: bool, budget: Budget, out: tuple[list, list[str]]) -> None:
    """content.xml's paragraphs and rows into ``out`` (sections, loose text), by one pass."""
    walk = _OdfWalk(sheets, slides, budget, *out)
    for event, elem in iter_xml(zf, "content.xml", what, events=("start", "end")):
        if event == "start":
            walk.start(elem)
        else:
            walk.end(elem)


class _OdfWalk:
    """The state of one pass over content.xml: the sections so far (a spreadsheet's tables, a
    presentation's pages), the text outside any, the table row being read and how deep inside
    a paragraph or heading the pass is."""

    def __init__(self, sheets: bool, slides: bool, budget: Budget, sections: list, loose: list[str]):
        self.sheets, self.slides, self.budget = sheets, slides, budget
        self.sections, self.loose = sections, loose
        self.row: list[str] | None = None
        self.depth = 0

    def start(self, elem) -> None:
        local = local_name(elem)
        if self.sheets and elem.tag == f"{{{_TABLE}}}table" and self.row is None and not self.depth:
            self._section(f"Sheet: {elem.get(f'{{{_TABLE}}}name') or len(self.sections) + 1}")
        elif self.slides and elem.tag == f"{{{_DRAW}}}page":
            name = elem.get(f"{{{_DRAW}}}name")
            self._section(f"Slide {len(self.sections) + 1}" + (f": {name}" if name else ""))
        elif local == "table-row" and self.row is None:
            self.row = []
        elif local in ("p", "h"):
            self.depth += 1

    def end(self, elem) -> None:
        local = local_name(elem)
        if local in ("p", "h"):
            self.depth -= 1
            if self.depth == 0:
                self._paragraph(_odf_text(elem))
        elif local == "table-cell" and self.row is not None:
            self.row.append("\x1f")  # end of a cell: repeated cells are read once
        elif local == "table-row" and self.row is not None:
            cells = [c.strip() for c in " ".join(self.row).split("\x1f")]
            line = " | ".join(c for c in cells if c)
            if line:
                self._blocks().append(line)
            self.row = None
        if self.depth == 0 and self.row is None:
            drop_read(elem)

    def _section(self, label: str) -> None:
        self.sections.append((label, []))
        self.budget.add_part()

    def _paragraph(self, text: str) -> None:
        if text:
            self.budget.add_text(len(text))
            (self.row if self.row is not None else self._blocks()).append(text)

    def _blocks(self) -> list[str]:
        """Where text outside a table row goes: the current section's blocks, else the loose text."""
        return self.sections[-1][1] if self.sections else self.loose


def _odf_text(elem) -> str:
    """A paragraph's text: <text:s/> spaces, tabs and line breaks kept; notes left out."""
    from lxml import etree

    out: list[str] = []
    skip = 0
    for event, node in etree.iterwalk(elem, events=("start", "end")):
        local = local_name(node)
        if event == "start":
            if local in ("note", "annotation"):
                skip += 1
            if skip:
                continue
            if local == "s":
                out.append(" ")
            elif local == "tab":
                out.append("\t")
            elif local == "line-break":
                out.append("\n")
            elif node.text:
                out.append(node.text)
        else:
            if local in ("note", "annotation"):
                skip -= 1
            if not skip and node is not elem and node.tail:
                out.append(node.tail)
    return "".join(out).strip()


# -- PowerPoint --------------------------------------------------------------------------------
def _rels(zf, part: str, what: str) -> dict[str, str]:
    """Relationship id -> archive name, for ``part`` (targets outside the archive dropped)."""
    folder, _, name = part.rpartition("/")
    rels_name = f"{folder}/_rels/{name}.rels" if folder else f"_rels/{name}.rels"
    try:
        root = xml_root(zf, rels_name, what)
    except ExtractionError:
        return {}
    out = {}
    for rel in root:
        target = rel.get("Target") or ""
        if rel.get("TargetMode") == "External":
            continue
        resolved = part_name(part, target)
        if resolved is not None and rel.get("Id"):
            out[rel.get("Id")] = resolved
    return out


def extract_pptx(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``pptx`` kind: each slide's paragraphs, slides in show order."""
    what = "PPTX"
    zf = open_archive(data, what)
    pres = xml_root(zf, "ppt/presentation.xml", what)
    rels = _rels(zf, "ppt/presentation.xml", what)
    order = [n for n in (rels.get(el.get(_R)) for el in pres.iter() if local_name(el) == "sldId") if n]
    with reading(what, max_chars) as budget:
        sections, notes = read_sections(
            budget, ((f"Slide {number}", lambda name=name: "\n\n".join(text_blocks(zf, name, _PPTX_PARAGRAPHS, budget)))
                     for number, name in enumerate(order, start=1)), "slides", len(order))
    if not sections:
        raise ExtractionError(f"{what} is corrupt: no slides listed in ppt/presentation.xml")
    text, spans = joined(sections)
    return ExtractedText(text=clean_text(text), pages=spans, notes=notes)


# -- Excel -------------------------------------------------------------------------------------
def extract_xlsx(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``xlsx`` kind: each sheet's rows (cells joined by " | "), sheets in
    workbook order; shared strings resolved, numbers as stored."""
    what = "XLSX"
    zf = open_archive(data, what)
    book = xml_root(zf, "xl/workbook.xml", what)
    rels = _rels(zf, "xl/workbook.xml", what)
    names = set(zf.namelist())
    sheets = [(sheet.get("name"), rels.get(sheet.get(_R))) for sheet in book.iter() if local_name(sheet) == "sheet"]
    sheets = [(label, name) for label, name in sheets if name in names]
    with reading(what, max_chars) as budget:
        shared = SharedStrings(zf if "xl/sharedStrings.xml" in names else None, what, budget)
        sections, notes = read_sections(
            budget, ((f"Sheet: {label or number}", lambda name=name: _sheet_text(zf, name, shared, budget))
                     for number, (label, name) in enumerate(sheets, start=1)), "sheets", len(sheets))
    if not sections:
        raise ExtractionError(f"{what} is corrupt: no sheets listed in xl/workbook.xml")
    text, spans = joined(sections)
    return ExtractedText(text=clean_text(text), pages=spans, notes=notes)


def _sheet_text(zf, name: str, shared: "SharedStrings", budget: Budget) -> str:
    rows = io.StringIO()  # not a list of row strings: ~50 bytes of overhead each
    for _, el in iter_xml(zf, name, budget.what, tag="{*}row"):
        cells = [_cell(c, shared) for c in el.iterchildren("{*}c")]
        line = " | ".join(c for c in cells if c)
        if line:
            rows.write(line + "\n")
            budget.add_text(len(line))
        drop_read(el)
    return rows.getvalue().rstrip("\n")


def _cell(c, shared: "SharedStrings") -> str:
    kind = c.get("t")
    if kind == "inlineStr":
        return _text(c)
    value = next((v.text or "" for v in c.iterchildren("{*}v")), "")
    if kind == "s":
        try:
            return " ".join(shared[int(value)].split())
        except (ValueError, IndexError):
            return ""
    return value.strip()


class SharedStrings:
    """An XLSX's shared-string table, read from its part only as far as the sheets look it
    up (a table of 10 million entries that the sheet uses one of is read one entry far), and
    held compactly: entries joined :data:`BLOCK` at a time into one string, with the end of
    each in an array (4 bytes an entry, where a str object each costs 50 or more). What is
    held counts against the document's memory budget."""

    BLOCK = 4096

    def __init__(self, zf, what: str, budget: Budget):
        self.budget = budget
        self._events = iter_xml(zf, "xl/sharedStrings.xml", what, tag="{*}si") if zf is not None else iter(())
        self._blocks: list[str] = []  # entries joined, BLOCK at a time
        self._ends = array("I")  # each entry's end in its block
        self._pending: list[str] = []  # the entries of the block being filled
        self._count = 0

    def __getitem__(self, index: int) -> str:
        if index < 0:
            raise IndexError(index)
        while self._count <= index and self._read_one():
            pass
        if index >= self._count:
            raise IndexError(index)
        block, at = divmod(index, self.BLOCK)
        if block == len(self._blocks):
            return self._pending[at]
        start = self._ends[index - 1] if at else 0
        return self._blocks[block][start:self._ends[index]]

    def _read_one(self) -> bool:
        el = next(self._events, None)
        if el is None:
            return False
        text = "".join(t.text or "" for t in el[1].iter("{*}t"))
        drop_read(el[1])
        self._pending.append(text)
        self._ends.append((self._ends[-1] if self._count % self.BLOCK else 0) + len(text))
        self._count += 1
        if len(self._pending) == self.BLOCK:
            block = "".join(self._pending)
            self._blocks.append(block)
            self._pending = []
            self._hold(block)
        return True

    def _hold(self, block: str) -> None:
        """A block's real cost against the memory budget: 4 bytes an entry, and its characters
        at the width Python stores them (1, 2 or 4 bytes). The block being filled is counted
        when it is full: a few thousand entries."""
        top = max(block, default="\0")
        width = 1 if top < "\u0100" else 2 if top <= "\uffff" else 4
        self.budget.hold(4 * self.BLOCK + len(block) * width, "(its shared strings)")

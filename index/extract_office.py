"""OpenDocument (ODT, ODS, ODP), PowerPoint (PPTX) and Excel (XLSX) files: their text in page,
slide and sheet order, each slide or sheet a numbered section whose first line names it
("Slide 3", "Sheet: Budget"), so a hit names where it is.

Read through the archive and XML limits of :mod:`hefsearch.index.extract_zip` (the stdlib
zip + lxml streaming path of the DOCX reader): python-pptx and openpyxl build whole trees and
odfpy a DOM, while these formats' text is a few elements each; a streamed pass keeps memory
bounded by one paragraph or row, expands no entity, and honours the --max-size cap on text.
A spreadsheet's repeated cells (``number-columns-repeated``, a classic ODS bomb) are read once.
"""

from __future__ import annotations

import io

from .extract_base import ExtractedText, ExtractionError, clean_text
from .extract_zip import (BlockTags, TextBudget, drop_read, iter_xml, joined, local_name, open_archive, part_name,
                          read_part, text_blocks, xml_root)

_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
#: sections (slides, sheets) one file may have
MAX_SECTIONS = 5_000
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
    budget = TextBudget(what, max_chars)
    sections: list[tuple[str, list[str]]] = []
    loose: list[str] = []  # text outside any sheet or slide (a text document's body)
    row: list[str] | None = None
    depth = 0  # inside a paragraph or heading
    for event, elem in iter_xml(zf, "content.xml", what, events=("start", "end")):
        local = local_name(elem)
        if event == "start":
            if sheets and elem.tag == f"{{{_TABLE}}}table" and row is None and not depth:
                sections.append((f"Sheet: {elem.get(f'{{{_TABLE}}}name') or len(sections) + 1}", []))
            elif slides and elem.tag == f"{{{_DRAW}}}page":
                sections.append((f"Slide {len(sections) + 1}"
                                 + (f": {elem.get(f'{{{_DRAW}}}name')}" if elem.get(f"{{{_DRAW}}}name") else ""), []))
            elif local == "table-row" and row is None:
                row = []
            elif local in ("p", "h"):
                depth += 1
            if len(sections) > MAX_SECTIONS:
                raise ExtractionError(f"{what} has more than {MAX_SECTIONS} sheets or slides; refusing")
            continue
        if local in ("p", "h"):
            depth -= 1
            if depth == 0:
                text = _odf_text(elem)
                if text:
                    budget.add(len(text))
                    target = row if row is not None else (sections[-1][1] if sections else loose)
                    target.append(text)
        elif local == "table-cell" and row is not None:
            row.append("\x1f")  # end of a cell: repeated cells are read once
        elif local == "table-row" and row is not None:
            cells = [c.strip() for c in " ".join(row).split("\x1f")]
            line = " | ".join(c for c in cells if c)
            if line:
                (sections[-1][1] if sections else loose).append(line)
            row = None
        if depth == 0 and row is None:
            drop_read(elem)
    if not sections:
        return ExtractedText(text=clean_text("\n\n".join(loose)))
    text, spans = joined([(label, "\n\n".join(blocks)) for label, blocks in sections])
    return ExtractedText(text=clean_text(text), pages=spans)


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
    order = [rels.get(el.get(_R)) for el in pres.iter() if local_name(el) == "sldId"]
    budget = TextBudget(what, max_chars)
    sections: list[tuple[str, str]] = []
    for number, name in enumerate((n for n in order if n), start=1):
        if number > MAX_SECTIONS:
            raise ExtractionError(f"{what} has more than {MAX_SECTIONS} slides; refusing")
        blocks = text_blocks(zf, name, _PPTX_PARAGRAPHS, budget)
        sections.append((f"Slide {number}", "\n\n".join(blocks)))
    if not sections:
        raise ExtractionError(f"{what} is corrupt: no slides listed in ppt/presentation.xml")
    text, spans = joined(sections)
    return ExtractedText(text=clean_text(text), pages=spans)


# -- Excel -------------------------------------------------------------------------------------
def extract_xlsx(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``xlsx`` kind: each sheet's rows (cells joined by " | "), sheets in
    workbook order; shared strings resolved, numbers as stored."""
    what = "XLSX"
    zf = open_archive(data, what)
    book = xml_root(zf, "xl/workbook.xml", what)
    rels = _rels(zf, "xl/workbook.xml", what)
    budget = TextBudget(what, max_chars)
    shared: list[str] = []
    if "xl/sharedStrings.xml" in zf.namelist():
        for _, el in iter_xml(zf, "xl/sharedStrings.xml", what, tag="{*}si"):
            text = "".join(t.text or "" for t in el.iter("{*}t"))
            shared.append(text)
            budget.add(len(text))
            drop_read(el)
    sections: list[tuple[str, str]] = []
    for sheet in (el for el in book.iter() if local_name(el) == "sheet"):
        if len(sections) >= MAX_SECTIONS:
            raise ExtractionError(f"{what} has more than {MAX_SECTIONS} sheets; refusing")
        name = rels.get(sheet.get(_R))
        if name is None or name not in zf.namelist():
            continue
        rows = io.StringIO()  # not a list of row strings: ~50 bytes of overhead each
        for _, el in iter_xml(zf, name, what, tag="{*}row"):
            cells = [_cell(c, shared) for c in el.iterchildren("{*}c")]
            line = " | ".join(c for c in cells if c)
            if line:
                rows.write(line + "\n")
                budget.add(len(line))
            drop_read(el)
        sections.append((f"Sheet: {sheet.get('name') or len(sections) + 1}", rows.getvalue().rstrip("\n")))
    if not sections:
        raise ExtractionError(f"{what} is corrupt: no sheets listed in xl/workbook.xml")
    text, spans = joined(sections)
    return ExtractedText(text=clean_text(text), pages=spans)


def _cell(c, shared: list[str]) -> str:
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

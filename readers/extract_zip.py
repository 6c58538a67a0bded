"""What every ZIP-and-XML format (EPUB, OpenDocument, PPTX, XLSX) reads through: the archive
opened with limits, each part read with a cap, and its XML parsed as a stream with no entity
expansion and no network.

Limits, checked before anything is inflated: the sum of the sizes the archive declares
(:data:`MAX_UNPACKED`, the DOCX reader's limit), the number of parts (:data:`MAX_PARTS`), and
per part a compression ratio (:data:`MAX_RATIO`: a zip bomb packs far more than any document).
A part is read with :func:`read_part`, which stops at its declared size plus one byte, so a
lying header cannot make it inflate more. XML goes through lxml's ``iterparse`` with
``resolve_entities=False`` and ``huge_tree=False`` (the "billion laughs" stays unexpanded and a
runaway tree is refused by libxml2's own limits)."""

from __future__ import annotations

import io
import posixpath
import zipfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from .extract_base import ExtractionError, describe, join_numbered

if TYPE_CHECKING:  # pragma: no cover
    from .budget import Budget
from .extract_docx import MAX_DOCX_UNPACKED

#: the archive may declare at most this many bytes unpacked (the DOCX reader's limit)
MAX_UNPACKED = MAX_DOCX_UNPACKED
#: parts in one archive (a book of 10,000 chapters is not a book)
MAX_PARTS = 20_000
#: unpacked / packed of one part: text XML packs 5-20x; a bomb packs 1000x
MAX_RATIO = 200
#: parts smaller than this are not checked for ratio (tiny parts pack oddly)
_RATIO_FLOOR = 1 << 20


def open_archive(data: bytes, what: str) -> zipfile.ZipFile:
    """The archive, its declared sizes checked against the limits; ExtractionError otherwise."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except zipfile.BadZipFile:
        raise ExtractionError(f"{what} is corrupt: not a ZIP archive") from None
    except Exception as e:  # noqa: BLE001 - hostile input
        raise ExtractionError(f"{what} is corrupt: {describe(e)}") from None
    if len(infos) > MAX_PARTS:
        raise ExtractionError(f"{what} holds {len(infos)} parts; refusing (limit {MAX_PARTS})")
    unpacked = sum(i.file_size for i in infos)
    if unpacked > MAX_UNPACKED:
        raise ExtractionError(f"{what} would unpack to {unpacked // 2**20} MB; refusing "
                              f"(limit {MAX_UNPACKED // 2**20} MB): a zip bomb, not a document")
    for i in infos:
        if i.file_size > _RATIO_FLOOR and i.file_size > MAX_RATIO * max(1, i.compress_size):
            raise ExtractionError(f"{what}: part {i.filename} unpacks {i.file_size // max(1, i.compress_size)}x "
                                  f"its packed size; refusing (limit {MAX_RATIO}x): a zip bomb, not a document")
    return zf


def part_name(base: str, href: str) -> str | None:
    """The archive name ``href`` (relative to the part ``base``) points at, or None when it
    points outside the archive (``../../etc/passwd``, an absolute path, a URL)."""
    from urllib.parse import unquote, urlsplit

    split = urlsplit(href)
    if split.scheme or split.netloc:
        return None
    path = unquote(split.path)
    if not path:
        return None
    joined = path.lstrip("/") if path.startswith("/") else posixpath.join(posixpath.dirname(base), path)
    norm = posixpath.normpath(joined)
    if norm.startswith("../") or norm == ".." or norm.startswith("/"):
        return None
    return norm


def read_part(zf: zipfile.ZipFile, name: str, what: str, cap: int | None = None) -> bytes:
    """One part's bytes, never more than its declared size (or ``cap``) plus one byte."""
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise ExtractionError(f"{what} is corrupt: part {name} is missing") from None
    limit = info.file_size if cap is None else min(cap, info.file_size)
    try:
        with zf.open(info) as f:
            data = f.read(limit + 1)
    except Exception as e:  # noqa: BLE001 - hostile input (bad CRC, bad deflate)
        raise ExtractionError(f"{what} is corrupt: part {name}: {describe(e)}") from None
    if len(data) > limit:
        raise ExtractionError(f"{what}: part {name} is larger than it says, or than the limit; refusing")
    return data


def iter_xml(zf: zipfile.ZipFile, name: str, what: str, events=("end",), tag: str | None = None) -> Iterator:
    """(event, element) of one XML part, streamed; entities are not expanded, DTDs not loaded.
    ``tag`` ("{namespace}name"): only those elements' events (lxml filters them, not Python).
    Elements are cleared by the caller (or by :func:`text_blocks`). The document's budget
    (:mod:`hefsearch.readers.budget`) is ticked at each event: a part too slow to read stops."""
    from lxml import etree

    from .budget import current

    budget = current()

    try:
        info = zf.getinfo(name)
    except KeyError:
        raise ExtractionError(f"{what} is corrupt: part {name} is missing") from None
    try:
        with zf.open(info) as f:
            for item in etree.iterparse(f, events=events, tag=tag, resolve_entities=False, no_network=True,
                                        load_dtd=False, huge_tree=False, remove_comments=True):
                if budget is not None:
                    budget.tick()
                yield item
    except ExtractionError:
        raise
    except Exception as e:  # noqa: BLE001 - hostile input; any parser failure is a bad part
        raise ExtractionError(f"{what} is corrupt: part {name}: {describe(e)}") from None


def xml_root(zf: zipfile.ZipFile, name: str, what: str, cap: int = 4 << 20):
    """A small XML part (manifest, workbook, relationships) as a tree; refused over ``cap``."""
    from lxml import etree

    data = read_part(zf, name, what, cap)
    try:
        parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
        return etree.fromstring(data, parser)
    except Exception as e:  # noqa: BLE001
        raise ExtractionError(f"{what} is corrupt: part {name}: {describe(e)}") from None


@dataclass(frozen=True)
class BlockTags:
    """Which elements (names without their namespace) make the text blocks of a part:
    ``block`` the blocks; ``text`` the only ones whose text counts (None: all text); ``tab``
    and ``line_break`` those read as a tab and a line break."""

    block: frozenset[str]
    text: frozenset[str] | None = None
    tab: frozenset[str] = frozenset()
    line_break: frozenset[str] = frozenset()


def text_blocks(zf: zipfile.ZipFile, name: str, tags: BlockTags, budget: "Budget") -> list[str]:
    """The text of each outermost ``tags.block`` element of a part, in document order, by one
    streaming pass: an element is dropped once read, so memory is bounded by the largest block.
    Every block's characters count against the document's ``budget``."""
    blocks: list[str] = []
    depth = 0
    for event, elem in iter_xml(zf, name, budget.what, events=("start", "end")):
        local = local_name(elem)
        if event == "start":
            depth += local in tags.block
            continue
        if local in tags.block:
            depth -= 1
            if depth == 0:
                text = _element_text(elem, tags).strip()
                if text:
                    blocks.append(text)
                    budget.add_text(len(text))
        if depth == 0:  # drop what has been read, or a long part fills memory
            drop_read(elem)
    return blocks


def local_name(elem) -> str:
    """An element's tag without its namespace ("" for a comment or processing instruction)."""
    tag = elem.tag
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def drop_read(elem) -> None:
    """Free an element read in a streaming pass, and the siblings before it, so memory stays
    bounded by what is being read, not by the whole part."""
    elem.clear(keep_tail=False)
    parent = elem.getparent()
    if parent is not None:
        while elem.getprevious() is not None:
            del parent[0]


def _element_text(elem, tags: BlockTags) -> str:
    """An element's text in reading order (text, then children, then each child's tail)."""
    from lxml import etree

    out: list[str] = []
    for event, node in etree.iterwalk(elem, events=("start", "end")):
        local = local_name(node)
        if event == "start":
            if local in tags.tab:
                out.append("\t")
            elif local in tags.line_break:
                out.append("\n")
            elif node.text and (tags.text is None or local in tags.text):
                out.append(node.text)
        elif node is not elem and node.tail and tags.text is None:
            out.append(node.tail)
    return "".join(out)


def joined(sections: list[tuple[str, str]]) -> tuple[str, list[tuple[int, int, int]]]:
    """Sections (label, text) -> the document's text (each section opens with its label line)
    and (number from 1, start, end) spans, as a PDF's pages: a hit names its section. A
    section with no text of its own (a label alone: "Chapter 7" of an empty chapter) is left
    out, and makes no chunk; the others keep their numbers."""
    texts = [(number, f"{label}\n\n{text}") for number, (label, text) in enumerate(sections, start=1) if text.strip()]
    text, spans = join_numbered([t for _, t in texts])
    return text, [(number, start, end) for (number, _), (_, start, end) in zip(texts, spans)]


def read_sections(budget: "Budget", sections: Iterable[tuple[str, Callable[[], str]]], unit: str,
                  total: int | None = None) -> tuple[list[tuple[str, str]], list[str]]:
    """(label, text) of each section, read by its callable in order, each a part of the
    document's ``budget``; past a limit of parts or time, the sections read so far and the
    note saying why the rest was left (``unit``: "chapters", "slides"...). Refused when not
    even the first could be read."""
    from .budget import OverBudget

    out: list[tuple[str, str]] = []
    notes: list[str] = []
    try:
        for label, read in sections:
            budget.add_part()
            out.append((label, read()))
    except OverBudget as e:
        if not out:
            raise
        notes.append(budget.kept(e, len(out), total, unit))
    return out, notes

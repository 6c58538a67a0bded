"""EPUB ebooks: the chapters in spine (reading) order, each through the HTML extractor, each a
numbered section opening with its title as the book's table of contents names it (EPUB 3's nav
document, else EPUB 2's NCX; "Chapter N" when the book names none), so a hit names its chapter.
The table of contents itself (the nav document, often in the spine) is no chapter: it would be
indexed as the first one and could be the hit for any chapter title.

Read through the archive and XML limits of :mod:`hefsearch.readers.extract_zip` (EbookLib builds
every item in memory and follows no limits of ours). A spine entry that points outside the
archive (``../../etc/passwd``, a URL) is refused: the book is hostile or broken, and nothing of
it is indexed; the --max-size cap applies to the text of the whole book. Each chapter is a part
of the book's budget (:mod:`hefsearch.readers.budget`: past its parts or time the chapters read
are kept, with a note), and a chapter without text of its own (empty, or a heading alone)
makes no section and no chunk."""

from __future__ import annotations

from .budget import reading
from .extract_base import ExtractedText, ExtractionError, clean_text
from .extract_html import html_text_and_body
from .extract_zip import joined, local_name, open_archive, part_name, read_part, read_sections, xml_root

#: bytes of one chapter's XHTML (the HTML extractor holds a chapter's bytes)
MAX_CHAPTER_BYTES = 64 << 20


def extract_epub(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``epub`` kind."""
    what = "EPUB"
    zf = open_archive(data, what)
    opf, opf_name = _package(zf, what)
    items = {el.get("id"): el for el in opf.iter() if local_name(el) == "item"}
    navs = {i for i, el in items.items() if "nav" in (el.get("properties") or "").split()}
    chapters = _spine_chapters(opf, opf_name, items, navs, what)
    titles = _toc_titles(zf, opf, opf_name, items, navs)
    with reading(what, max_chars) as budget:
        def chapter(name: str) -> str:
            text, body = html_text_and_body(read_part(zf, name, what, MAX_CHAPTER_BYTES))
            text = clean_text(text).strip() if body else ""  # a heading alone is no chapter's text
            title = titles.get(name)
            if title and text.startswith(title):  # the chapter's heading repeats its title: once
                text = text[len(title):].strip()
            budget.add_text(len(text))
            return text

        labelled = ((titles.get(name) or f"Chapter {number}", lambda name=name: chapter(name))
                    for number, name in enumerate(chapters, start=1))
        sections, notes = read_sections(budget, labelled, "chapters", len(chapters))
    text, spans = joined(sections)
    return ExtractedText(text=text, pages=spans, notes=notes)


def _package(zf, what: str):
    """The book's package document (its OPF: manifest and spine), parsed, and its part name."""
    container = xml_root(zf, "META-INF/container.xml", what)
    opf_name = next((el.get("full-path") for el in container.iter() if local_name(el) == "rootfile"), None)
    if not opf_name or part_name("", opf_name) is None:
        raise ExtractionError(f"{what} is corrupt: META-INF/container.xml names no package file")
    opf_name = part_name("", opf_name)
    return xml_root(zf, opf_name, what), opf_name


def _spine_chapters(opf, opf_name: str, items: dict, navs: set, what: str) -> list[str]:
    """The part names of the spine's linear chapters, in reading order (the nav document left
    out); a spine pointing outside the archive refuses the book."""
    manifest = {i: el.get("href") or "" for i, el in items.items()}
    spine = [el.get("idref") for el in opf.iter() if local_name(el) == "itemref" and el.get("linear") != "no"]
    chapters: list[str] = []
    for idref in spine:
        href = manifest.get(idref)
        if href is None or idref in navs:
            continue
        name = part_name(opf_name, href)
        if name is None:
            raise ExtractionError(f"{what}: its spine points outside the archive ({href[:80]}); refusing the book")
        chapters.append(name)
    if not chapters:
        raise ExtractionError(f"{what} is corrupt: its spine lists no chapter")
    return chapters


#: the XHTML and OPS namespaces' ``type`` attribute of a nav element (``epub:type="toc"``)
_EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"


def _toc_titles(zf, opf, opf_name: str, items: dict, navs: set) -> dict[str, str]:
    """Archive part name -> the title the book's table of contents gives it (first entry
    pointing into the part). A contents page that cannot be read gives no titles, not an error."""
    toc_id = next((el.get("toc") for el in opf.iter() if local_name(el) == "spine"), None)
    ncx = [i for i, el in items.items() if i == toc_id or el.get("media-type") == "application/x-dtbncx+xml"]
    for ids, links in ((sorted(navs), _nav_links), (ncx, _ncx_links)):
        for idref in ids:
            name = part_name(opf_name, items[idref].get("href") or "")
            if name is None:
                continue
            try:
                root = xml_root(zf, name, "EPUB table of contents")
            except ExtractionError:
                continue
            titles: dict[str, str] = {}
            for href, label in links(root):
                target = part_name(name, href.split("#", 1)[0]) if not href.startswith("#") else None
                label = " ".join(label.split())
                if target and label and target not in titles:
                    titles[target] = label[:200]
            if titles:
                return titles
    return {}


def _nav_links(root):
    navs = [el for el in root.iter() if local_name(el) == "nav"]
    toc = next((el for el in navs if el.get(_EPUB_TYPE) == "toc"), navs[0] if navs else None)
    for a in (toc.iter() if toc is not None else ()):
        if local_name(a) == "a" and a.get("href"):
            yield a.get("href"), "".join(a.itertext())


def _ncx_links(root):
    for point in root.iter():
        if local_name(point) != "navPoint":
            continue
        label = next((el for el in point.iter() if local_name(el) == "text"), None)
        content = next((el for el in point.iter() if local_name(el) == "content"), None)
        if label is not None and content is not None and content.get("src"):
            yield content.get("src"), "".join(label.itertext())

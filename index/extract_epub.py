"""EPUB ebooks: the chapters in spine (reading) order, each through the HTML extractor, each a
numbered section opening with "Chapter N" so a hit names its chapter.

Read through the archive and XML limits of :mod:`hefsearch.index.extract_zip` (EbookLib builds
every item in memory and follows no limits of ours). A spine entry that points outside the
archive (``../../etc/passwd``, a URL) is refused: the book is hostile or broken, and nothing of
it is indexed; the --max-size cap applies to the text of the whole book. Each chapter is a part
of the book's budget (:mod:`hefsearch.index.budget`: past its parts or time the chapters read
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
    container = xml_root(zf, "META-INF/container.xml", what)
    opf_name = next((el.get("full-path") for el in container.iter() if local_name(el) == "rootfile"), None)
    if not opf_name or part_name("", opf_name) is None:
        raise ExtractionError(f"{what} is corrupt: META-INF/container.xml names no package file")
    opf = xml_root(zf, part_name("", opf_name), what)
    opf_name = part_name("", opf_name)
    manifest = {el.get("id"): el.get("href") or "" for el in opf.iter() if local_name(el) == "item"}
    spine = [el.get("idref") for el in opf.iter() if local_name(el) == "itemref" and el.get("linear") != "no"]
    chapters: list[str] = []
    for idref in spine:
        href = manifest.get(idref)
        if href is None:
            continue
        name = part_name(opf_name, href)
        if name is None:
            raise ExtractionError(f"{what}: its spine points outside the archive ({href[:80]}); refusing the book")
        chapters.append(name)
    if not chapters:
        raise ExtractionError(f"{what} is corrupt: its spine lists no chapter")
    with reading(what, max_chars) as budget:
        def chapter(name: str) -> str:
            text, body = html_text_and_body(read_part(zf, name, what, MAX_CHAPTER_BYTES))
            text = clean_text(text).strip() if body else ""  # a heading alone is no chapter's text
            budget.add_text(len(text))
            return text

        sections, notes = read_sections(budget, ((f"Chapter {number}", lambda name=name: chapter(name))
                                                 for number, name in enumerate(chapters, start=1)),
                                        "chapters", len(chapters))
    text, spans = joined(sections)
    return ExtractedText(text=text, pages=spans, notes=notes)

"""EPUB ebooks: the chapters in spine (reading) order, each through the HTML extractor, each a
numbered section opening with "Chapter N" so a hit names its chapter.

Read through the archive and XML limits of :mod:`hefsearch.index.extract_zip` (EbookLib builds
every item in memory and follows no limits of ours). A spine entry that points outside the
archive (``../../etc/passwd``, a URL) is refused: the book is hostile or broken, and nothing of
it is indexed; the --max-size cap applies to the text of the whole book."""

from __future__ import annotations

from .extract_base import ExtractedText, ExtractionError, clean_text, too_much_text
from .extract_html import html_to_text
from .extract_zip import joined, local_name, open_archive, part_name, read_part, xml_root

#: chapters one book may have
MAX_CHAPTERS = 5_000
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
    if len(spine) > MAX_CHAPTERS:
        raise ExtractionError(f"{what} has {len(spine)} chapters; refusing (limit {MAX_CHAPTERS})")
    sections: list[tuple[str, str]] = []
    total = 0
    for number, idref in enumerate(spine, start=1):
        href = manifest.get(idref)
        if href is None:
            continue
        name = part_name(opf_name, href)
        if name is None:
            raise ExtractionError(f"{what}: its spine points outside the archive ({href[:80]}); refusing the book")
        text = clean_text(html_to_text(read_part(zf, name, what, MAX_CHAPTER_BYTES))).strip()
        total += len(text)
        if max_chars is not None and total > max_chars:
            raise too_much_text(what, max_chars)
        sections.append((f"Chapter {len(sections) + 1}", text))
    if not sections:
        raise ExtractionError(f"{what} is corrupt: its spine lists no chapter")
    text, spans = joined(sections)
    return ExtractedText(text=text, pages=spans)

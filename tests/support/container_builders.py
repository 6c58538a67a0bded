"""Builders of the documents people keep beside text files: EPUB, OpenDocument, PPTX, XLSX,
mail (.eml, mbox) and scanned pages (a PNG of printed text, an image-only PDF), minimal and
valid, written with the standard library and Pillow. Shared by the extraction, sync and
hardening tests, bench/ocr.py and scripts/make_sample_corpus.py."""

from __future__ import annotations

import io
import zipfile
from email.message import EmailMessage
from email.utils import format_datetime
from datetime import datetime, timezone
from xml.sax.saxutils import escape

FONT_DIRS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/opentype/noto", "/usr/share/fonts/truetype/noto")


def _zip(parts: dict[str, str | bytes], first: tuple[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        if first is not None:  # ODF and EPUB: the mimetype part first, stored
            zf.writestr(zipfile.ZipInfo(first[0]), first[1], compress_type=zipfile.ZIP_STORED)
        for name, data in parts.items():
            zf.writestr(name, data)
    return buf.getvalue()


def make_epub(chapters: list[tuple[str, str]], *, hrefs: list[str] | None = None, toc: str | None = None) -> bytes:
    """An EPUB 3 of ``(title, text)`` chapters in spine order; ``hrefs`` overrides where the
    manifest points (e.g. outside the archive). ``toc``: "nav" adds an EPUB 3 nav document
    (first in the spine, as many books have it), "ncx" an EPUB 2 toc.ncx, each naming the
    chapters "Part N: TITLE" (how the book names them, not how their headings do)."""
    names = hrefs or [f"ch{i}.xhtml" for i in range(1, len(chapters) + 1)]
    manifest = "".join(f'<item id="c{i}" href="{escape(h)}" media-type="application/xhtml+xml"/>'
                       for i, h in enumerate(names, start=1))
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(1, len(chapters) + 1))
    toc_parts: dict[str, str] = {}
    labels = [f"Part {i}: {escape(title)}" for i, (title, _) in enumerate(chapters, start=1)]
    if toc == "nav":
        manifest += '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        spine = '<itemref idref="nav"/>' + spine
        links = "".join(f'<li><a href="{escape(h)}#top">{label}</a></li>' for h, label in zip(names, labels))
        toc_parts["OEBPS/nav.xhtml"] = (
            '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">'
            f'<head><title>Contents</title></head><body><nav epub:type="toc"><h1>Contents</h1><ol>{links}</ol>'
            "</nav></body></html>")
    elif toc == "ncx":
        manifest += '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
        points = "".join(f'<navPoint id="p{i}"><navLabel><text>{label}</text></navLabel><content src="{escape(h)}"/>'
                         f"</navPoint>" for i, (h, label) in enumerate(zip(names, labels), start=1))
        toc_parts["OEBPS/toc.ncx"] = ('<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" '
                                      f'version="2005-1"><navMap>{points}</navMap></ncx>')
        spine = f'<spine toc="ncx">{spine}</spine>'
    spine = spine if spine.startswith("<spine") else f"<spine>{spine}</spine>"
    parts: dict[str, str | bytes] = {
        "META-INF/container.xml": '<?xml version="1.0"?><container version="1.0" '
        'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile '
        'full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>',
        "OEBPS/content.opf": '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        f'<metadata/><manifest>{manifest}</manifest>{spine}</package>',
        **toc_parts,
    }
    for (title, text), name in zip(chapters, names):
        if name.startswith(("..", "/", "http")):
            continue
        paras = "".join(f"<p>{escape(p)}</p>" for p in text.split("\n\n"))
        parts[f"OEBPS/{name}"] = (f'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>'
                                  f"{escape(title)}</title></head><body><h1>{escape(title)}</h1>{paras}</body></html>")
    return _zip(parts, ("mimetype", "application/epub+zip"))


_ODF_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
           'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
           'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
           'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"')


def _odf(kind: str, body: str) -> bytes:
    content = (f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_ODF_NS} office:version="1.3">'
               f"<office:body>{body}</office:body></office:document-content>")
    manifest = ('<?xml version="1.0"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:'
                'manifest:1.0"><manifest:file-entry manifest:full-path="/" manifest:media-type="application/'
                f'vnd.oasis.opendocument.{kind}"/><manifest:file-entry manifest:full-path="content.xml" '
                'manifest:media-type="text/xml"/></manifest:manifest>')
    return _zip({"content.xml": content, "META-INF/manifest.xml": manifest},
                ("mimetype", f"application/vnd.oasis.opendocument.{kind}"))


def make_odt(paragraphs: list[str]) -> bytes:
    body = "".join(f"<text:p>{escape(p)}</text:p>" for p in paragraphs)
    return _odf("text", f"<office:text><text:h>{escape(paragraphs[0])}</text:h>{body}</office:text>")


def make_ods(sheets: dict[str, list[list[str]]], repeat: int = 1) -> bytes:
    tables = "".join(
        f'<table:table table:name="{escape(name)}">' + "".join(
            "<table:table-row>" + "".join(
                f'<table:table-cell table:number-columns-repeated="{repeat}"><text:p>{escape(c)}</text:p>'
                "</table:table-cell>" for c in row) + "</table:table-row>" for row in rows) + "</table:table>"
        for name, rows in sheets.items())
    return _odf("spreadsheet", f"<office:spreadsheet>{tables}</office:spreadsheet>")


def make_odp(slides: list[list[str]]) -> bytes:
    pages = "".join(f'<draw:page draw:name="page{i}"><draw:frame><draw:text-box>'
                    + "".join(f"<text:p>{escape(p)}</text:p>" for p in paras)
                    + "</draw:text-box></draw:frame></draw:page>" for i, paras in enumerate(slides, start=1))
    return _odf("presentation", f"<office:presentation>{pages}</office:presentation>")


_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG_REL = "http://schemas.openxmlformats.org/package/2006/relationships"


def make_pptx(slides: list[list[str]]) -> bytes:
    """A PPTX whose slides hold the given paragraphs (only the parts a reader needs)."""
    parts: dict[str, str | bytes] = {}
    ids = "".join(f'<p:sldId id="{256 + i}" r:id="rId{i}"/>' for i in range(1, len(slides) + 1))
    parts["ppt/presentation.xml"] = (
        '<?xml version="1.0"?><p:presentation xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
        f'xmlns:r="{_REL}"><p:sldIdLst>{ids}</p:sldIdLst></p:presentation>')
    parts["ppt/_rels/presentation.xml.rels"] = (
        f'<?xml version="1.0"?><Relationships xmlns="{_PKG_REL}">' + "".join(
            f'<Relationship Id="rId{i}" Type="{_REL}/slide" Target="slides/slide{i}.xml"/>'
            for i in range(1, len(slides) + 1)) + "</Relationships>")
    for i, paras in enumerate(slides, start=1):
        body = "".join(f"<a:p><a:r><a:t>{escape(p)}</a:t></a:r></a:p>" for p in paras)
        parts[f"ppt/slides/slide{i}.xml"] = (
            '<?xml version="1.0"?><p:sld xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
            'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><p:cSld><p:spTree><p:sp><p:txBody>'
            f"{body}</p:txBody></p:sp></p:spTree></p:cSld></p:sld>")
    return _zip(parts)


def make_xlsx(sheets: dict[str, list[list[str]]]) -> bytes:
    """An XLSX: strings through the shared-string table, numbers inline."""
    shared: list[str] = []
    parts: dict[str, str | bytes] = {}
    book = "".join(f'<sheet name="{escape(n)}" sheetId="{i}" r:id="rId{i}"/>' for i, n in enumerate(sheets, start=1))
    parts["xl/workbook.xml"] = ('<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/'
                                f'spreadsheetml/2006/main" xmlns:r="{_REL}"><sheets>{book}</sheets></workbook>')
    parts["xl/_rels/workbook.xml.rels"] = (
        f'<?xml version="1.0"?><Relationships xmlns="{_PKG_REL}">' + "".join(
            f'<Relationship Id="rId{i}" Type="{_REL}/worksheet" Target="worksheets/sheet{i}.xml"/>'
            for i in range(1, len(sheets) + 1)) + "</Relationships>")
    for i, rows in enumerate(sheets.values(), start=1):
        xml_rows = []
        for r, row in enumerate(rows, start=1):
            cells = []
            for value in row:
                if value.replace(".", "", 1).isdigit():
                    cells.append(f"<c><v>{value}</v></c>")
                else:
                    shared.append(value)
                    cells.append(f'<c t="s"><v>{len(shared) - 1}</v></c>')
            xml_rows.append(f'<row r="{r}">{"".join(cells)}</row>')
        parts[f"xl/worksheets/sheet{i}.xml"] = (
            '<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
            f"<sheetData>{''.join(xml_rows)}</sheetData></worksheet>")
    parts["xl/sharedStrings.xml"] = (
        '<?xml version="1.0"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
        + "".join(f"<si><t>{escape(s)}</t></si>" for s in shared) + "</sst>")
    return _zip(parts)


def make_eml(subject: str, body: str, *, sender: str = "Alice <alice@example.org>", charset: str = "utf-8",
             cte: str | None = None, html: str | None = None, date: datetime | None = None,
             attachments: list[tuple[str, bytes, str]] = (), message_id: str | None = None) -> bytes:
    """One message: a plain body (``cte``: 'quoted-printable' or 'base64'), an optional HTML
    alternative, attachments (name, bytes, mime type)."""
    msg = EmailMessage()
    msg["Subject"] = subject
    msg["From"] = sender
    msg["To"] = "Bob <bob@example.org>"
    msg["Date"] = format_datetime(date or datetime(2024, 3, 1, 9, 30, tzinfo=timezone.utc))
    if message_id:
        msg["Message-ID"] = message_id
    msg.set_content(body, charset=charset, cte=cte)
    if html is not None:
        msg.add_alternative(html, subtype="html")
    for name, data, mime in attachments:
        main, _, sub = mime.partition("/")
        msg.add_attachment(data, maintype=main, subtype=sub, filename=name)
    return bytes(msg)


def make_mbox(messages: list[bytes]) -> bytes:
    """An mbox (mboxrd: body lines starting 'From ' quoted with '>')."""
    out = []
    for raw in messages:
        out.append(b"From sender@example.org Fri Mar  1 09:30:00 2024\n")
        for line in raw.replace(b"\r\n", b"\n").split(b"\n"):
            if line.lstrip(b">").startswith(b"From "):
                line = b">" + line
            out.append(line + b"\n")
        out.append(b"\n")
    return b"".join(out)


def font_path(cjk: bool = False) -> str | None:
    """A TrueType/OpenType font from Debian's packages (fonts-dejavu-core, fonts-noto-cjk), or None."""
    import os

    names = ("NotoSansCJK-Regular.ttc", "NotoSerifCJK-Regular.ttc") if cjk else ("DejaVuSans.ttf", "DejaVuSerif.ttf")
    for d in FONT_DIRS:
        for n in names:
            if os.path.exists(os.path.join(d, n)):
                return os.path.join(d, n)
    return None


def render_page(lines: list[str], *, cjk: bool = False, size: int = 34, width: int = 1700,
                fmt: str = "PNG") -> bytes:
    """A printed page as a photo would give it: black text on white, 300-dpi-like letters."""
    from PIL import Image, ImageDraw, ImageFont

    path = font_path(cjk)
    font = ImageFont.truetype(path, size) if path else ImageFont.load_default(size=size)
    height = 160 + len(lines) * int(size * 1.7)
    img = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        draw.text((100, 80 + i * int(size * 1.7)), line, fill=0, font=font)
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


def make_image_pdf(lines: list[str], mode: str = "RGB", **kw) -> bytes:
    """A scanned page: a PDF holding only an image of printed text (no text layer); ``mode``
    "RGB" stores a JPEG (a colour scan), "1" a bilevel image (a fax-like scan, a few KB)."""
    from PIL import Image

    img = Image.open(io.BytesIO(render_page(lines, **kw))).convert(mode)
    buf = io.BytesIO()
    img.save(buf, format="PDF", resolution=200.0)
    return buf.getvalue()


# -- hostile ones ------------------------------------------------------------------------------
def xlsx_zip_bomb(megabytes: int = 64, words: tuple[bytes, ...] = (b"lorem",)) -> bytes:
    """An XLSX whose one sheet inflates to ``megabytes`` MB of rows: from a file ~300x smaller
    with one word; with many different ``words``, a big sheet that packs like a real one."""
    good = make_xlsx({"S": [["x"]]})
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(good)) as src, zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for info in src.infolist():
            if info.filename != "xl/worksheets/sheet1.xml":
                zf.writestr(info.filename, src.read(info))
        with zf.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as f:
            f.write(b'<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/'
                    b'main"><sheetData>')
            row = b"".join(b'<row><c t="inlineStr"><is><t>%s</t></is></c></row>' % words[i % len(words)]
                           for i in range(20_000))
            for _ in range(max(1, megabytes * 2**20 // len(row))):
                f.write(row)
            f.write(b"</sheetData></worksheet>")
    return buf.getvalue()


def billion_laughs_odt(levels: int = 10) -> bytes:
    """An ODT whose content.xml declares nested entities ("billion laughs": 10^levels 'lol')."""
    ents = ['<!ENTITY lol0 "lol">'] + [f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">'
                                       for i in range(1, levels)]
    content = (f'<?xml version="1.0"?><!DOCTYPE office:document-content [{"".join(ents)}]>'
               f'<office:document-content {_ODF_NS}><office:body><office:text><text:p>start &lol{levels - 1}; end'
               "</text:p></office:text></office:body></office:document-content>")
    return _zip({"content.xml": content}, ("mimetype", "application/vnd.oasis.opendocument.text"))


def nested_mime(depth: int) -> bytes:
    """A message of ``depth`` multiparts each inside the previous one."""
    head = b"Subject: deep\r\nFrom: a@example.org\r\nMIME-Version: 1.0\r\n"
    opening = b"".join(b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (i, i) for i in range(depth))
    closing = b"".join(b"\r\n--b%d--\r\n" % i for i in reversed(range(depth)))
    return head + opening + b"Content-Type: text/plain\r\n\r\ndeep text" + closing


def png_bomb(side: int = 100_000) -> bytes:
    """A valid PNG header claiming ``side`` x ``side`` pixels in a file of a few hundred bytes."""
    import struct
    import zlib as _z

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", _z.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", _z.compress(b"\x00" * 1000))
            + chunk(b"IEND", b""))


class LazyMbox:
    """An mbox of one message with a ``size``-byte base64 attachment, produced line by line as
    it is read (nothing of that size is ever written or held): ``readline`` as a file has it."""

    def __init__(self, size: int, then: bytes = b""):
        head = (b"From a@example.org Fri Mar  1 09:30:00 2024\nSubject: huge\nMIME-Version: 1.0\n"
                b'Content-Type: multipart/mixed; boundary="B"\n\n--B\nContent-Type: text/plain\n\nhello\n--B\n'
                b'Content-Type: application/pdf\nContent-Transfer-Encoding: base64\n'
                b'Content-Disposition: attachment; filename="huge.pdf"\n\n')
        self.lines = [head]
        self.left = size
        self.tail = b"\n--B--\n\n" + then
        self.read_bytes = 0

    def readline(self, limit: int = -1) -> bytes:
        if self.lines:
            line = self.lines.pop(0)
        elif self.left > 0:
            line = b"QUJD" * 19 + b"\n"
            self.left -= len(line)
        elif self.tail:
            line, _, rest = self.tail.partition(b"\n")
            line += b"\n" if _ else b""
            self.tail = rest
        else:
            return b""
        self.read_bytes += len(line)
        return line


def xlsx_shared_strings_bomb(entries: int = 10_000_000, seed: int = 0, *, use_last: bool = False) -> bytes:
    """An XLSX whose shared-string table holds ``entries`` one-character strings (random CJK
    letters, so the part packs like text, under the ratio check: 10M entries make a 19 MB
    file) while its one sheet uses only the first of them (``use_last``: the last one)."""
    import random

    rng = random.Random(seed)
    good = make_xlsx({"S": [["used"]]})
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(good)) as src, zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for info in src.infolist():
            if info.filename == "xl/worksheets/sheet1.xml" and use_last:
                zf.writestr(info.filename, src.read(info).replace(b"<v>0</v>", b"<v>%d</v>" % (entries - 1)))
            elif info.filename != "xl/sharedStrings.xml":
                zf.writestr(info.filename, src.read(info))
        with zf.open("xl/sharedStrings.xml", "w", force_zip64=True) as f:
            f.write(b'<?xml version="1.0"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
                    b"<si><t>used</t></si>")
            left = entries - 1
            while left > 0:
                n = min(left, 100_000)
                letters = "".join(map(chr, rng.choices(range(0x4E00, 0x4E00 + 256), k=n)))
                f.write("".join(f"<si><t>{c}</t></si>" for c in letters).encode())
                left -= n
            f.write(b"</sst>")
    return buf.getvalue()


def epub_empty_chapters(chapters: int = 5_000) -> bytes:
    """An EPUB of ``chapters`` chapters with no text at all (an empty title and body each)."""
    return make_epub([("", "")] * chapters)


def pdf_sharing_one_image(pages: int = 5_000, lines: tuple[str, ...] = ("A SCANNED PAGE",)) -> bytes:
    """A PDF of ``pages`` pages without a text layer, every page showing the same scanned
    image (stored once: 5,000 pages make a file of about 1 MB)."""
    from pypdf import PdfReader, PdfWriter

    one = PdfReader(io.BytesIO(make_image_pdf(list(lines), mode="1"))).pages[0]
    writer = PdfWriter()
    for _ in range(pages):  # a page object each, the image shared
        writer.add_page(one)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def big_png(side: int = 10_000, mode: str = "RGBA", text: str | None = None) -> bytes:
    """A ``side`` x ``side`` PNG of colour type ``mode`` (RGBA, RGB or L), transparent or black
    but for ``text`` drawn in its top left corner, written row by row (the pixels are never held
    whole: 10,000 x 10,000 RGBA packs into about 400 KB)."""
    import struct
    import zlib as _z

    bands = {"L": 1, "RGB": 3, "RGBA": 4}[mode]
    color = {"L": 0, "RGB": 2, "RGBA": 6}[mode]
    head_rows: list[bytes] = []
    if text:
        from PIL import Image, ImageDraw, ImageFont

        path = font_path()
        font = ImageFont.truetype(path, 48) if path else ImageFont.load_default(size=48)
        corner = Image.new(mode, (min(side, 1600), min(side, 120)), (255,) * bands if bands > 1 else 255)
        ImageDraw.Draw(corner).text((20, 30), text, fill=(0,) * (bands - 1) + ((255,) if bands == 4 else ())
                                    if bands > 1 else 0, font=font)
        raw = corner.tobytes()
        width = corner.size[0] * bands
        pad = b"\xff" * ((side - corner.size[0]) * bands)
        head_rows = [b"\x00" + raw[y * width:(y + 1) * width] + pad for y in range(corner.size[1])]

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", _z.crc32(kind + data) & 0xFFFFFFFF)

    comp = _z.compressobj(9)
    idat = [comp.compress(row) for row in head_rows]
    blank = b"\x00" + b"\x00" * (side * bands)
    idat += [comp.compress(blank) for _ in range(side - len(head_rows))]
    idat.append(comp.flush())
    ihdr = struct.pack(">IIBBBBB", side, side, 8, color, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"".join(idat)) + chunk(b"IEND", b"")

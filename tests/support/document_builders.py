"""Builders of test documents: minimal valid PDF and DOCX files (a DOCX zip bomb too), and
bytes no encoding reads as text. Shared by the extraction, crawl and hardening tests and
bench/hostile_extract.py."""

from __future__ import annotations

import io
import random


def make_pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF: one Helvetica text page per item (latin-1 text, lines split on \\n)."""

    def esc(line: str) -> bytes:
        return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")

    n = len(pages)
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(n)) + b"] /Count %d >>" % n,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for i, text in enumerate(pages):
        body = b"BT /F1 11 Tf 14 TL 72 740 Td "
        body += b" ".join(b"(" + esc(line) + b") Tj T*" for line in text.split("\n")) + b" ET"
        objs.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i)
        )
        objs.append(b"<< /Length %d >>\nstream\n" % len(body) + body + b"\nendstream")
    out = b"%PDF-1.4\n"
    offsets = []
    for i, obj in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return out


def make_docx(paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    import docx

    document = docx.Document()
    for p in paragraphs:
        document.add_paragraph(p)
    if table:
        t = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                t.cell(r, c).text = value
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def docx_with_body(paragraph_xml: str, repeat: int) -> bytes:
    """A real DOCX whose body is ``paragraph_xml`` repeated: compresses extremely well (a zip
    bomb when ``repeat`` is large)."""
    import zipfile

    template = zipfile.ZipFile(io.BytesIO(make_docx(["x"])))
    xml = template.read("word/document.xml").decode("utf-8")
    head, rest = xml.split("<w:body>", 1)
    tail = rest.split("</w:body>", 1)[1]
    body = f"{head}<w:body>{paragraph_xml * repeat}</w:body>{tail}"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for item in template.infolist():
            data = body.encode("utf-8") if item.filename == "word/document.xml" else template.read(item)
            zf.writestr(item.filename, data)
    return out.getvalue()


def garbage_bytes(n: int, seed: int = 0) -> bytes:
    """High bytes only: no control bytes (so not 'binary'), but no encoding reads them as text."""
    r = random.Random(seed)
    return bytes(r.randrange(0x80, 0x100) for _ in range(n))

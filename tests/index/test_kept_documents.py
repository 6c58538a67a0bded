"""The documents people keep beside text files, end to end: a folder of mail (mbox, a German
.eml), an EPUB, office files (ODT, PPTX, XLSX), a scanned PDF and a photo of a printed page is
indexed with no traceback, and a keyword search for each file's own word finds that file."""

from __future__ import annotations

import json

import pytest

from hefsearch.readers import ocr
from tests.support.container_builders import (make_eml, make_epub, make_image_pdf, make_mbox, make_odt, make_pptx,
                                      make_xlsx, render_page)
from tests.cli.test_cli_index import hefsearch

#: file -> the word only it holds (OCR'd files last: they need Tesseract)
WORDS = {
    "mail.mbox": ["quokkabody", "okapiattach"],
    "brief.eml": ["Wasserkocherrechnung"],
    "book.epub": ["zauberlehrling"],
    "letter.odt": ["zebrafinken"],
    "deck.pptx": ["narwhalslide"],
    "sheet.xlsx": ["pangolinsheet"],
    "scan.pdf": ["PLATYPUS"],
    "photo.png": ["MARMOSET"],
}
OCR_FILES = {"scan.pdf", "photo.png"}


def write_folder(folder) -> None:
    folder.mkdir()
    first = make_eml("Ausflug", "The quokkabody lives on an island.", message_id="<m1@example.org>")
    second = make_eml("Notes", "See the attached notes.", message_id="<m2@example.org>",
                      attachments=[("notes.txt", b"The attachment names the okapiattach.", "text/plain")])
    (folder / "mail.mbox").write_bytes(make_mbox([first, second]))
    (folder / "brief.eml").write_bytes(make_eml(
        "Rechnung für Ihren Wasserkocher", "Anbei die Wasserkocherrechnung über 49,90 EUR. Grüße aus Köln.",
        charset="iso-8859-1", cte="quoted-printable"))
    (folder / "book.epub").write_bytes(make_epub([("Erstes Kapitel", "Hier beginnt es."),
                                                  ("Zweites Kapitel", "Der Zauberlehrling kam zurück.")]))
    (folder / "letter.odt").write_bytes(make_odt(["Brief", "Die Zebrafinken singen am Morgen."]))
    (folder / "deck.pptx").write_bytes(make_pptx([["Overview"], ["The narwhalslide result"]]))
    (folder / "sheet.xlsx").write_bytes(make_xlsx({"Costs": [["Item", "Cost"], ["pangolinsheet", "12.5"]]}))
    (folder / "scan.pdf").write_bytes(make_image_pdf(["SCANNED LETTER ABOUT THE", "PLATYPUS INVOICE"], size=48))
    (folder / "photo.png").write_bytes(render_page(["A PRINTED PAGE ABOUT THE", "MARMOSET COLONY"], size=48))


def test_kept_documents_are_indexed_and_found(tmp_path, tiny_bert_bundle):
    docs = tmp_path / "docs"
    write_folder(docs)
    home = tmp_path / "home"
    r = hefsearch("index", docs, "--bundle", tiny_bert_bundle, "--backend", "cpu", "--json", env_home=home,
                  timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    summary = json.loads(r.stdout)
    assert not summary["failed"], summary["failed"]
    for name, words in WORDS.items():
        if name in OCR_FILES and not ocr.available():
            continue
        for word in words:
            r = hefsearch("search", word, "--mode", "keyword", "--json", env_home=home)
            assert r.returncode == 0, r.stderr
            hits = json.loads(r.stdout)["hits"]
            assert str(docs / name) in [h["path"] for h in hits], (word, hits)  # the file on disk
            if name.endswith((".mbox", ".eml")):  # and which message in it
                assert all(h["message"] for h in hits if h["path"] == str(docs / name)), hits
    r = hefsearch("status", "--json", env_home=home)
    if ocr.available():
        assert json.loads(r.stdout)["ocr_pages"] == 2


def test_without_ocr_images_are_named_once_with_how_to_install(tmp_path, tiny_bert_bundle, monkeypatch):
    docs = tmp_path / "docs"
    write_folder(docs)
    monkeypatch.setenv("PATH", str(tmp_path))  # no tesseract on it
    r = hefsearch("index", docs, "--bundle", tiny_bert_bundle, "--backend", "cpu", "--json", env_home=tmp_path / "h")
    assert r.returncode == 0, r.stderr
    notes = [n for n in json.loads(r.stdout)["notes"] if "apt install tesseract-ocr" in n["reason"]]
    assert len(notes) == 1 and "2 file(s)" in notes[0]["reason"]
    assert not json.loads(r.stdout)["failed"]
    # nothing is recorded for them: once Tesseract is installed, the next run reads them
    monkeypatch.undo()
    if ocr.available():
        r = hefsearch("index", docs, "--json", env_home=tmp_path / "h")
        assert json.loads(r.stdout)["added"] == 2

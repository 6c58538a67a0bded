"""Every container is hostile until proven otherwise: zip bombs, entity expansion, deeply
nested MIME, a 500 MB base64 attachment, an mbox with a malformed "From " line, an EPUB whose
spine points outside the archive, a decompression-bomb image. Each is refused within the
memory and size caps with a line a person understands, and the rest of the folder is indexed.
(Peak memory of the extractions: ``bench/hostile_extract.py``.)"""

from __future__ import annotations

import tracemalloc

import pytest

from hefsearch.embed import Encoder
from hefsearch.index.extract import ExtractionError, extract
from hefsearch.index.extract_mail import read_message, split_mbox
from hefsearch.index.library import Library
from hefsearch.index.sync import SyncOptions, sync
from tests.container_builders import (LazyMbox, billion_laughs_odt, make_eml, make_epub, make_mbox, make_odt,
                                      nested_mime, png_bomb, xlsx_zip_bomb)

MAX = 20 * 2**20  # the crawler's default --max-size


def _refused(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ExtractionError) as e:
        extract(path, max_bytes=MAX)
    return e.value.message


def test_zip_bomb_is_refused_from_its_declared_sizes(tmp_path):
    data = xlsx_zip_bomb(64)
    assert len(data) < 1 << 20  # 64 MB of XML in a file of a few hundred KB
    message = _refused(tmp_path, "bomb.xlsx", data)
    assert "zip bomb" in message and "sheet1.xml" in message


def test_entity_expansion_is_not_expanded(tmp_path):
    message = _refused(tmp_path, "laughs.odt", billion_laughs_odt(10))
    assert "entity" in message.lower() and "content.xml" in message


def test_a_few_entities_stay_unexpanded_and_the_text_is_read(tmp_path):
    path = tmp_path / "small-laughs.odt"
    path.write_bytes(billion_laughs_odt(2))  # 10 'lol': under libxml2's amplification limit
    text = extract(path, max_bytes=MAX).text
    assert "start" in text and "end" in text and "lol" * 10 not in text


def test_deeply_nested_mime_is_refused_and_shallow_nesting_read():
    with pytest.raises(ExtractionError, match="MIME"):
        read_message(nested_mime(5_000))
    assert "deep text" in read_message(nested_mime(15)).text


def test_500_mb_base64_attachment_is_skipped_without_being_held():
    """The message is refused as the stream passes the cap; the next message is read."""
    after = b"From b@example.org Fri Mar  1 09:31:00 2024\nSubject: next\n\nsmall body\n"
    stream = LazyMbox(500 * 2**20, then=after)
    out = list(split_mbox(stream, MAX))
    assert stream.read_bytes > 500 * 2**20  # all of it went by
    assert [(n, raw is None) for n, raw, _ in out] == [(1, True), (2, False)]
    assert "larger than 20.0 MiB" in out[0][2] and b"small body" in out[1][1]
    # memory does not follow the attachment: the same peak for 4 and 20 MB
    peaks = []
    for size in (4, 20):
        tracemalloc.start()
        list(split_mbox(LazyMbox(size * 2**20, then=after), 2 * 2**20))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 8 * 2**20 and peaks[1] < 2 * peaks[0] + 2**20


def test_a_bad_attachment_is_named_and_the_message_kept():
    msg = read_message(make_eml("Hi", "see attached", attachments=[
        ("broken.pdf", b"%PDF-1.4 " + b"x" * 3000, "application/pdf"),
        ("notes.txt", b"the attached kiwi", "text/plain")]), max_chars=MAX)
    assert "see attached" in msg.text and "Attachment: broken.pdf" in msg.text and "kiwi" in msg.text
    assert len(msg.notes) == 1 and msg.notes[0].startswith("attachment broken.pdf: PDF is corrupt")


def test_malformed_from_lines():
    body = make_eml("One", "From here on the letter goes on without quoting.\nFrom the start.")
    box = (b"From a@example.org Fri Mar  1 09:30:00 2024\n" + body + b"\n"
           b"From b@example.org Fri Mar  1 09:31:00 2024\n" + make_eml("Two", "second"))
    import io

    raws = [raw for _, raw, _ in split_mbox(io.BytesIO(box), MAX)]
    assert len(raws) == 2 and b"From here on" in raws[0]  # a body line is not a separator
    with pytest.raises(ExtractionError, match="not an mbox"):
        list(split_mbox(io.BytesIO(b"From nobody\n" + body), MAX))


def test_epub_spine_outside_the_archive_is_refused(tmp_path):
    for href in ("../../../../etc/passwd", "../../secret.xhtml", "http://example.org/ch.xhtml"):
        message = _refused(tmp_path, "book.epub", make_epub([("One", "text")], hrefs=[href]))
        assert "outside the archive" in message


def test_decompression_bomb_image_is_refused_from_its_header(tmp_path):
    data = png_bomb(100_000)
    assert len(data) < 1000
    _refused(tmp_path, "warm.png", png_bomb(50_000))  # Pillow's imports are not the image's memory
    tracemalloc.start()
    message = _refused(tmp_path, "bomb.png", data)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert "decompression bomb" in message and peak < 2 * MAX  # decoded: 10,000 MB (the read buffer: MAX)


@pytest.fixture
def encoder(tiny_bert_bundle):
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        yield enc


def test_a_hostile_folder_is_refused_file_by_file_and_the_rest_indexed(tmp_path, encoder):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bomb.xlsx").write_bytes(xlsx_zip_bomb(64))
    (docs / "laughs.odt").write_bytes(billion_laughs_odt(10))
    (docs / "deep.eml").write_bytes(nested_mime(5_000))
    (docs / "book.epub").write_bytes(make_epub([("One", "text")], hrefs=["../../etc/passwd"]))
    (docs / "bomb.png").write_bytes(png_bomb())
    (docs / "bad.mbox").write_bytes(b"hello\n" + make_mbox([make_eml("x", "y")]))
    (docs / "good.odt").write_bytes(make_odt(["Title", "The capybara is indexed."]))
    (docs / "good.mbox").write_bytes(make_mbox([make_eml("ok", "The wombat is indexed.", message_id="<w@x>")]))
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [encoder], SyncOptions(max_bytes=MAX))
    failed = dict(r.failed)
    assert set(failed) == {str(docs / n) for n in ("bomb.xlsx", "laughs.odt", "book.epub", "bomb.png", "bad.mbox")} | {
        str(docs / "deep.eml" / "sha-" ) + p.split("/sha-")[1] for p in failed if "/deep.eml/" in p}
    assert any("/deep.eml/" in p and "MIME" in reason for p, reason in r.failed)
    texts = " ".join(t for (t,) in lib.query("SELECT text FROM chunks"))
    assert "capybara" in texts and "wombat" in texts
    lib.close()

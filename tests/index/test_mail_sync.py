"""Mail in a library: each message of an mbox, .eml or Maildir file is a document of its own
below its file (its date is the document's, so --since works), an mbox is re-read
incrementally (only new and changed messages are embedded; gone ones are removed), and a
mailbox that fails keeps what was indexed."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import pytest

from hefsearch.embed import Encoder
from hefsearch.index.library import Library
from hefsearch.index.sync import SyncOptions, sync
from hefsearch.index.crawl_options import CrawlOptions
from hefsearch.search.filters import make_filters
from hefsearch.search.keyword import keyword_search
from tests.support.container_builders import make_eml, make_mbox
from tests.support.library_helpers import assert_consistent, count_passages


@pytest.fixture
def encoder(tiny_bert_bundle):
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        yield enc


def _msg(i: int, word: str, year: int = 2024) -> bytes:
    return make_eml(f"Message {i}", f"Body of message {i} mentions {word}.", message_id=f"<m{i}@example.org>",
                    date=datetime(year, 1 + i % 12, 1, tzinfo=timezone.utc))


def _paths(lib, word: str, **filters) -> list[str]:
    hits = keyword_search(lib.db, word, 10, filters=make_filters(**filters))
    return sorted({lib.query("SELECT d.path FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id = ?",
                             [cid])[0][0] for cid, _, _ in hits})


def test_mbox_messages_are_documents_read_incrementally(tmp_path, encoder):
    docs = tmp_path / "docs"
    docs.mkdir()
    box = docs / "inbox.mbox"
    box.write_bytes(make_mbox([_msg(1, "aardvark", 2019), _msg(2, "badger"), _msg(3, "cheetah")]))
    lib = Library.open(tmp_path / "lib")
    seen = count_passages(encoder)
    r = sync(lib, [docs], [encoder])
    assert (r.added, r.failed) == (1, [])
    assert _paths(lib, "badger") == [f"{box}/m2@example.org"]
    # the message's date is the document's: --since finds the 2024 messages only
    assert _paths(lib, "message", since="2023-01-01") == [f"{box}/m2@example.org", f"{box}/m3@example.org"]
    assert_consistent(lib)

    # one message changed, one removed, one added: only the new and changed ones are embedded
    seen.clear()
    box.write_bytes(make_mbox([_msg(1, "aardvark", 2019), _msg(2, "bison"), _msg(4, "dingo")]))
    r = sync(lib, [docs], [encoder])
    new_texts = [t for (t,) in lib.query("SELECT c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
                                         "WHERE d.path IN (?, ?)", [f"{box}/m2@example.org", f"{box}/m4@example.org"])]
    assert r.changed == 1 and sorted(seen) == sorted(new_texts)
    assert _paths(lib, "cheetah") == [] and _paths(lib, "badger") == []
    assert _paths(lib, "bison") == [f"{box}/m2@example.org"] and _paths(lib, "dingo") == [f"{box}/m4@example.org"]
    assert _paths(lib, "aardvark") == [f"{box}/m1@example.org"]
    assert_consistent(lib)

    # unchanged: nothing read; gone: its messages go with it
    seen.clear()
    assert sync(lib, [docs], [encoder]).unchanged == 1 and not seen
    box.unlink()
    sync(lib, [docs], [encoder])
    assert lib.query("SELECT COUNT(*) FROM documents")[0][0] == 0
    assert_consistent(lib)
    lib.close()


def test_maildir_and_eml_messages_are_found(tmp_path, encoder):
    docs = tmp_path / "docs"
    for sub in ("cur", "new", "tmp"):
        (docs / "Maildir" / sub).mkdir(parents=True)
    (docs / "Maildir" / "cur" / "1700000000.M1P2.host:2,S").write_bytes(_msg(5, "echidna"))
    (docs / "old.eml").write_bytes(make_eml("Alt", "Ein Brief über den Fuchsbau.", charset="iso-8859-1",
                                            cte="base64"))
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [encoder])
    assert (r.added, r.failed) == (2, [])
    assert _paths(lib, "echidna") == [str(docs / "Maildir" / "cur" / "1700000000.M1P2.host:2,S" / "m5@example.org")]
    [path] = _paths(lib, "Fuchsbau")
    assert path.startswith(str(docs / "old.eml") + "/sha-")
    lib.close()


def test_a_broken_mailbox_keeps_its_messages(tmp_path, encoder):
    docs = tmp_path / "docs"
    docs.mkdir()
    box = docs / "inbox.mbox"
    box.write_bytes(make_mbox([_msg(1, "aardvark")]))
    lib = Library.open(tmp_path / "lib")
    sync(lib, [docs], [encoder])
    box.write_bytes(b"this is no longer an mbox\n" + make_mbox([_msg(1, "aardvark")]))
    r = sync(lib, [docs], [encoder])
    assert [p for p, _ in r.stale] == [str(box)] and "not an mbox" in r.stale[0][1]
    assert _paths(lib, "aardvark") == [f"{box}/m1@example.org"]
    lib.close()


def test_mbox_over_max_size_is_read_message_by_message(tmp_path, encoder):
    """An mbox larger than --max-size is streamed: the cap applies to each message."""
    docs = tmp_path / "docs"
    docs.mkdir()
    big = make_eml("Big", "x " * 40_000 + " walrus", message_id="<big@example.org>")
    (docs / "inbox.mbox").write_bytes(make_mbox([_msg(1, "aardvark"), big, _msg(3, "cheetah")] +
                                                [_msg(10 + i, "filler") for i in range(30)]))
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [encoder], SyncOptions(crawl=CrawlOptions(max_bytes=60_000)))
    assert _paths(lib, "cheetah") and _paths(lib, "aardvark") and not _paths(lib, "walrus")
    [(path, reason)] = r.failed
    assert path.endswith("inbox.mbox/message-2") and "larger than" in reason
    lib.close()


def test_opening_a_message_opens_its_mailbox(tmp_path):
    from hefsearch.tui import launch

    box = tmp_path / "inbox.mbox"
    box.write_bytes(make_mbox([_msg(1, "aardvark")]))
    plan = launch.plan_open(f"{box}/m1@example.org", line=7, kind="mbox", env={"EDITOR": "vim"})
    assert plan.argv == ["vim", str(box)]  # the message's line numbers are not the file's


def test_mailboxes_without_a_suffix_and_compressed(tmp_path, encoder):
    """Thunderbird's ``Inbox`` (no suffix: its first line says mbox) and an ``.mbox.gz``."""
    import gzip

    docs = tmp_path / "docs"
    (docs / "Mail").mkdir(parents=True)
    (docs / "Mail" / "Inbox").write_bytes(make_mbox([_msg(1, "aardvark")]))
    (docs / "old.mbox.gz").write_bytes(gzip.compress(make_mbox([_msg(2, "badger")])))
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [encoder])
    assert (r.added, r.failed) == (2, [])
    assert _paths(lib, "aardvark") == [str(docs / "Mail" / "Inbox" / "m1@example.org")]
    assert _paths(lib, "badger") == [str(docs / "old.mbox.gz" / "m2@example.org")]
    assert sync(lib, [docs], [encoder]).unchanged == 2
    os.utime(docs / "old.mbox.gz", ns=(1, 1))  # touched, same bytes: hashed, found unchanged
    assert sync(lib, [docs], [encoder]).unchanged == 2
    lib.close()


def test_bodies_are_decoded_whatever_the_charset_says():
    from hefsearch.readers.extract_mail import read_message

    body = "Grüße aus Köln, die Straße ist gesperrt."
    for charset, cte in (("utf-8", "base64"), ("iso-8859-1", "quoted-printable"), ("windows-1252", "8bit"),
                         ("utf-16", "base64")):
        assert body in read_message(make_eml("Köln", body, charset=charset, cte=cte)).text, (charset, cte)
    lying = make_eml("x", body, charset="iso-8859-1", cte="8bit").replace(b"iso-8859-1", b"utf-8")
    assert body in read_message(lying).text  # latin-1 bytes labelled UTF-8
    unknown = make_eml("x", body, charset="utf-8", cte="8bit").replace(b'charset="utf-8"', b'charset="x-nonsense"')
    assert body in read_message(unknown).text
    html = make_eml("x", "plain part", html="<p>the <b>html</b> part</p>")
    assert "plain part" in read_message(html).text and "html part" not in read_message(html).text
    only_html = make_eml("Wetter", "x").replace(b"Content-Type: text/plain", b"Content-Type: text/html")
    assert read_message(only_html).subject == "Wetter"

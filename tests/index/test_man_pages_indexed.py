"""A German manual page indexed from its language folder is found by a German word."""

from __future__ import annotations

import gzip

from hefsearch.search.request import SearchRequest
from tests.readers.test_man_pages import GERMAN_CHSH


def test_a_german_man_page_is_found_by_a_german_word(tmp_path, tiny_bert_bundle):
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from hefsearch.search import Searcher

    de = tmp_path / "docs" / "de" / "man1"
    de.mkdir(parents=True)
    (de / "chsh.1.gz").write_bytes(gzip.compress(GERMAN_CHSH.encode()))
    with Encoder.open(tiny_bert_bundle) as enc, Library.open(tmp_path / "lib") as lib:
        sync(lib, [tmp_path / "docs"], [enc])
        hits = Searcher(lib, encoders={enc.space_name: enc}).search(SearchRequest("ändert", mode="keyword", k=3)).hits
        assert [h.path.rsplit("/", 1)[-1] for h in hits] == ["chsh.1.gz"]
        assert hits[0].doc_kind == "man"

"""Keyword search finds word parts inside compounds and hyphen variants
(:mod:`hefsearch.search.compounds`), ranks the exact word first, and leaves short words alone."""

from __future__ import annotations

import pytest

from hefsearch.embed import Encoder
from hefsearch.index.library import Library
from hefsearch.index.sync import sync
from hefsearch.search import Searcher
from hefsearch.search.compounds import MIN_PART, Vocabulary
from hefsearch.search.request import SearchRequest

DOCS = {
    "versicherung.txt": "Die Fahrradversicherung kostet 40 Euro im Jahr und gilt europaweit.",
    "keller.txt": "Ein Fahrrad steht seit dem Winter im Keller neben dem Regal.",
    "haftpflicht.txt": "Die Haftpflichtversicherung zahlt Schäden, die Sie anderen zufügen.",
    "login.md": "Öffnen Sie die Anmelde-Shell und melden Sie sich mit Ihrem Konto an.",
    "nl.txt": "De ziektekostenverzekering vergoedt het bezoek aan de tandarts.",
    "ski.txt": "Die Skiausrüstung liegt im Schrank: Helm, Brille und Handschuhe.",
    "en.txt": "The garden shed holds the lawn mower and a spare bicycle tyre.",
}


@pytest.fixture(scope="module")
def searcher(tiny_bert_bundle, tmp_path_factory):
    base = tmp_path_factory.mktemp("compounds")
    docs = base / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text + "\n", encoding="utf-8")
    library = Library.open(base / "lib")
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        sync(library, [docs], [enc])
    s = Searcher(library)
    yield s
    s.close()
    library.close()


def files(searcher, query: str, mode: str = "keyword") -> list[str]:
    return [h.path.rsplit("/", 1)[1] for h in searcher.search(SearchRequest(query, mode=mode, k=10)).hits
            if mode != "hybrid" or "keyword" in h.sources]


@pytest.mark.parametrize("query, expected", [
    ("Fahrrad", ["keller.txt", "versicherung.txt"]),  # the word itself first, then the compound
    ("Versicherung", {"versicherung.txt", "haftpflicht.txt"}),  # a tail, in two compounds
    ("verzekering", ["nl.txt"]),  # Dutch
    ("Anmeldeshell", ["login.md"]),  # written with a hyphen in the document
    ("Ausrüstung", ["ski.txt"]),  # diacritics folded as the index folds them
])
def test_keyword_search_finds_word_parts_and_hyphen_variants(searcher, query, expected):
    found = files(searcher, query)
    assert (set(found) if isinstance(expected, set) else found) == expected


def test_hybrid_search_keeps_the_keyword_evidence_of_a_compound_part(searcher):
    assert "versicherung.txt" in files(searcher, "Fahrrad", mode="hybrid")


def test_short_words_and_other_words_are_not_widened(searcher):
    assert files(searcher, "Rad") == []  # shorter than MIN_PART: no compound is matched by it
    assert len("Rad") < MIN_PART
    assert files(searcher, "bicycle") == ["en.txt"]


def test_the_vocabulary_finds_words_that_hold_a_part_after_their_first_letter():
    vocab = Vocabulary("\nfahrradversicherung\nversicherung\nhaftpflichtversicherung\nfahrrad\n", 1, 0.0)
    assert vocab.containing("versicherung") == ["fahrradversicherung", "haftpflichtversicherung"]
    assert vocab.containing("fahrrad") == []  # heads are an FTS5 prefix query, not this
    assert vocab.containing("versicherung", limit=1) == ["fahrradversicherung"]

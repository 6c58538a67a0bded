"""The labelled held-out set of bench/npu_default.py: every query names a document of the set,
the query kinds are what the bench reports (by detected language), and the bench's own
kind rule agrees with the languages the set declares."""

from __future__ import annotations


def test_the_heldout_set_is_consistent_and_mostly_cross_lingual(tmp_path):
    from hefsearch.bench.multilingual_heldout import DOCS, QUERIES
    from hefsearch.bench.npu_default import query_kinds, write_heldout
    from hefsearch.embed.language import identify_all

    assert all(d in DOCS for _, d in QUERIES) and len({lang for lang, _ in DOCS.values()}) == 11
    # the language each document declares is the one detected in it
    assert identify_all([t for _, t in DOCS.values()]) == [lang for lang, _ in DOCS.values()]
    queries = write_heldout(tmp_path / "docs")
    assert sorted(p.name for p in (tmp_path / "docs").iterdir()) == sorted(f"{d}.txt" for d in DOCS)
    kinds = query_kinds(tmp_path / "docs", queries)
    assert kinds.count("cross") == 30 and kinds.count("same") == 15

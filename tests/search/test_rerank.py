"""FP32 re-ranking of an 8-bit space's candidates, the FP32 cache, and back-fill.

The "NPU" space is the npu-sim a8 simulation of the sharpened tiny BERT (tests/support/quality_fixtures.py),
so its ranking genuinely differs from FP32 on some queries.
"""

from __future__ import annotations

import numpy as np
import pytest

from hefsearch.embed import Encoder
from hefsearch.search import Searcher
from hefsearch.search import rerank as R
from hefsearch.search.request import SearchRequest
from tests.support.library_helpers import TOPICS

QUERIES = [base for _, base in TOPICS] + ["payment deadline", "platform four", "olive oil sauce",
                                          "firmware update", "late filing penalty", "evening concert"]


def fp32_scores(bundle, query, texts_by_id, ids) -> dict:
    with Encoder.open(bundle, "cpu", threads=1) as enc:
        q = enc.encode_queries([query])[0]
        v = enc.encode_passages([texts_by_id[i] for i in ids])
    return dict(zip(ids, (v @ q).tolist()))


def fp32_order(bundle, query, texts_by_id, ids):
    s = fp32_scores(bundle, query, texts_by_id, ids)
    return [ids[j] for j in np.argsort(-np.array([s[i] for i in ids]), kind="stable")]


def in_fp32_order(got, bundle, query, texts_by_id) -> bool:
    """``got`` is ordered by FP32 score (ties, e.g. copies of one text, in any order: a vector
    encoded alone and in a batch differ in the last bits)."""
    s = fp32_scores(bundle, query, texts_by_id, got)
    return all(s[a] >= s[b] - 1e-5 for a, b in zip(got, got[1:]))


def test_rerank_restores_the_fp32_order_of_the_candidates(npu_only_library, sim_bundle):
    lib = npu_only_library
    assert [s.name for s in lib.spaces()] == ["npu-sim-a8"]
    searcher = Searcher(lib, rerank_budget_ms=None)  # no budget: every candidate is computed
    n = 12
    differed = 0
    for q in QUERIES:
        plain = searcher.search(SearchRequest(q, k=n, mode="vector", rerank_depth=0, all_chunks=True))
        assert plain.space == "npu-sim-a8" and plain.backend_label == "NPU simulation (a8)"
        cand = [h.chunk_id for h in plain.hits]
        texts = {h.chunk_id: h.text for h in plain.hits}
        want = fp32_order(sim_bundle, q, texts, cand)
        got = searcher.search(SearchRequest(q, k=n, mode="vector", rerank_depth=n, all_chunks=True))
        ids = [h.chunk_id for h in got.hits]
        assert sorted(ids) == sorted(want) and in_fp32_order(ids, sim_bundle, q, texts)
        assert "rerank" in got.timings
        assert got.rerank["depth"] == n and got.rerank["rescored"] == n and got.rerank["space"] == "cpu-fp32"
        differed += want != cand
    # the test means something only if 8 bits reordered some candidates
    assert differed >= 2
    searcher.close()


def test_candidates_are_cached_in_the_fp32_space_and_reused(npu_only_library):
    lib = npu_only_library
    searcher = Searcher(lib, rerank_budget_ms=None)
    res = searcher.search(SearchRequest(QUERIES[0], k=5, mode="vector", rerank_depth=8, all_chunks=True))
    assert "cpu-fp32" in [s.name for s in lib.spaces()]  # created on demand
    fp = lib.space("cpu-fp32")
    cached = set(lib.member_ids("cpu-fp32").tolist())
    assert len(cached) == 8 and {h.chunk_id for h in res.hits} <= cached
    # the same query again: nothing left to encode
    enc = searcher.encoder_for("cpu-fp32")
    before = enc.stats.texts
    searcher.search(SearchRequest(QUERIES[0], k=5, mode="vector", rerank_depth=8, all_chunks=True))
    assert enc.stats.texts - before == 1  # only the query itself
    # the cached vectors are the FP32 encoder's own
    ids = sorted(cached)
    texts = [r.text for r in lib.chunks(ids)]
    assert np.allclose(fp.vectors(ids), enc.encode_passages(texts), atol=1e-5)
    searcher.close()


def test_rerank_is_on_by_default_only_with_fp32_vectors(npu_only_library, sim_bundle):
    lib = npu_only_library
    assert R.default_depth(lib, "npu-sim-a8") == 0  # no FP32 space: off
    searcher = Searcher(lib)
    res = searcher.search(SearchRequest(QUERIES[1], k=5, mode="vector"))
    assert "rerank" not in res.timings
    with Encoder.open(sim_bundle, "cpu", threads=1) as cpu:
        R.backfill(lib, cpu)
    assert R.default_depth(lib, "npu-sim-a8") == R.DEFAULT_DEPTH
    assert R.default_depth(lib, "cpu-fp32") == 0
    res = searcher.search(SearchRequest(QUERIES[1], k=5, mode="vector"))
    assert "rerank" in res.timings
    # explicit 0 switches it off, and the answer says so
    off = searcher.search(SearchRequest(QUERIES[1], k=5, mode="vector", rerank_depth=0))
    assert "rerank" not in off.timings and off.rerank["depth"] == 0 and off.rerank["note"] == "off"
    searcher.close()


def test_a_budgeted_search_on_an_empty_fp32_space_opens_nothing_and_says_so(npu_only_library, monkeypatch):
    """A one-shot search must not load a second model to compute every candidate: with no
    FP32 vector among them it keeps the 8-bit order and says how many were left."""
    lib = npu_only_library
    searcher = Searcher(lib)  # the default budget
    opened = []
    monkeypatch.setattr(R, "_create_fp32_space", lambda s: opened.append(1))
    plain = searcher.search(SearchRequest(QUERIES[0], k=8, mode="vector", rerank_depth=0, all_chunks=True))
    got = searcher.search(SearchRequest(QUERIES[0], k=8, mode="vector", rerank_depth=8, all_chunks=True))
    assert not opened and "cpu-fp32" not in lib.space_names()
    assert [h.chunk_id for h in got.hits] == [h.chunk_id for h in plain.hits]
    assert got.rerank["depth"] == 8 and got.rerank["rescored"] == 0 and got.rerank["deferred"] == 8
    assert "not re-ranked" in R.RerankInfo(**got.rerank).describe()
    searcher.close()


def test_what_does_not_fit_the_budget_keeps_its_8bit_place(npu_only_library, sim_bundle):
    """With FP32 vectors for some candidates and no time to compute the others, the stored
    ones are re-ordered by FP32 among the places they held; the others stay where they were."""
    lib = npu_only_library
    searcher = Searcher(lib, rerank_budget_ms=0.0)
    changed = 0
    for q in QUERIES:
        plain = [h.chunk_id for h in searcher.search(SearchRequest(q, k=12, mode="vector", rerank_depth=0, all_chunks=True)).hits]
        stored = plain[::2]  # every other candidate has its FP32 vector
        texts = {r.id: r.text for r in lib.chunks(plain)}
        with Encoder.open(sim_bundle, "cpu", threads=1) as cpu:
            sp = lib.ensure_space(cpu, "cpu-fp32")
            have = set(lib.member_ids("cpu-fp32").tolist())
            new = [i for i in stored if i not in have]
            if new:
                sp.add(new, cpu.encode_passages([texts[i] for i in new]))
        have = set(lib.member_ids("cpu-fp32").tolist())
        got = searcher.search(SearchRequest(q, k=12, mode="vector", rerank_depth=12, all_chunks=True))
        ids = [h.chunk_id for h in got.hits]
        slots = [j for j, i in enumerate(plain) if i in have]
        assert all(ids[j] == plain[j] for j in range(12) if j not in slots)  # deferred: same place
        assert sorted(ids[j] for j in slots) == sorted(plain[j] for j in slots)
        assert in_fp32_order([ids[j] for j in slots], sim_bundle, q, texts)
        assert got.rerank["computed"] == 0 and got.rerank["rescored"] == len(slots)
        assert got.rerank["deferred"] == 12 - len(slots) and got.rerank["budget_ms"] == 0.0
        changed += ids != plain
    assert changed >= 1
    searcher.close()


def test_rerank_scores_in_the_neutral_fp32_space_when_the_library_has_one(npu_only_library, sim_bundle):
    """Re-ranking restores the language-neutral FP32 order, not the plain one; a neutral
    8-bit space is not re-ranked by default with plain FP32 (that would undo its transform)."""
    from hefsearch.search.language_neutral import derive_neutral_space

    lib = npu_only_library
    with Encoder.open(sim_bundle, "npu-sim", profile="a8", threads=1) as npu:
        derive_neutral_space(lib, "npu-sim-a8", npu, min_chunks=1)
    with Encoder.open(sim_bundle, "cpu", threads=1) as cpu:
        R.backfill(lib, cpu)
        assert R.default_depth(lib, "npu-sim-a8-neutral") == 0  # plain FP32 only: off
        assert R.default_depth(lib, "npu-sim-a8") == R.DEFAULT_DEPTH
        derive_neutral_space(lib, "cpu-fp32", cpu, min_chunks=1)
    assert R.default_depth(lib, "npu-sim-a8-neutral") == R.DEFAULT_DEPTH
    assert R.default_depth(lib, "cpu-fp32-neutral") == 0
    searcher = Searcher(lib)
    for q in QUERIES[:4]:
        got = searcher.search(SearchRequest(q, k=10, mode="vector", space="npu-sim-a8-neutral", all_chunks=True))
        assert got.rerank["space"] == "cpu-fp32-neutral" and got.rerank["rescored"] == got.rerank["depth"] == 30
        ids = [h.chunk_id for h in got.hits]
        enc = searcher.encoder_for("cpu-fp32-neutral")
        s = lib.space("cpu-fp32-neutral").vectors(ids) @ enc.encode_queries([q])[0]
        assert list(s) == sorted(s, reverse=True)
    searcher.close()


def test_backfill_fills_stops_and_resumes(npu_only_library, sim_bundle):
    lib = npu_only_library
    total = len(lib.chunk_ids())
    calls = []
    with Encoder.open(sim_bundle, "cpu", threads=1) as cpu:
        first = R.backfill(lib, cpu, batch=4, should_stop=lambda: len(calls) >= 2,
                           progress=lambda done, todo: calls.append(done))
        assert first.stopped and first.added == 8 and first.remaining == total - 8
        rest = R.backfill(lib, cpu, batch=4)
        assert rest.done and rest.added == total - 8 and not rest.stopped
        again = R.backfill(lib, cpu)
        assert again.added == 0 and again.done
    assert lib.member_ids("cpu-fp32").tolist() == lib.chunk_ids().tolist()


def test_backfill_refuses_a_different_encoder(npu_only_library, sim_bundle, tiny_bert_bundle):
    from hefsearch.index.errors import FingerprintMismatch

    lib = npu_only_library
    with Encoder.open(sim_bundle, "cpu", threads=1) as cpu:
        R.backfill(lib, cpu, limit=3)
    with Encoder.open(tiny_bert_bundle, "cpu", threads=1) as other:
        with pytest.raises(FingerprintMismatch):
            R.backfill(lib, other)

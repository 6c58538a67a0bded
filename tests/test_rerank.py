"""FP32 re-ranking of an 8-bit space's candidates, the FP32 cache, and back-fill.

The "NPU" space is the npu-sim a8 simulation of the sharpened tiny BERT (tests/quality_fixtures.py),
so its ranking genuinely differs from FP32 on some queries.
"""

from __future__ import annotations

import numpy as np
import pytest

from hefsearch.embed import Encoder
from hefsearch.search import Searcher
from hefsearch.search import rerank as R
from tests.library_helpers import TOPICS

QUERIES = [base for _, base in TOPICS] + ["payment deadline", "platform four", "olive oil sauce",
                                          "firmware update", "late filing penalty", "evening concert"]


def fp32_order(bundle, query, texts_by_id, ids):
    with Encoder.open(bundle, "cpu", threads=1) as enc:
        q = enc.encode_queries([query])[0]
        v = enc.encode_passages([texts_by_id[i] for i in ids])
    s = v @ q
    return [ids[j] for j in np.argsort(-s, kind="stable")]


def test_rerank_restores_the_fp32_order_of_the_candidates(npu_only_library, sim_bundle):
    lib = npu_only_library
    assert [s.name for s in lib.spaces()] == ["npu-sim-a8"]
    searcher = Searcher(lib)
    n = 12
    differed = 0
    for q in QUERIES:
        plain = searcher.search(q, k=n, mode="vector", rerank=0, all_chunks=True)
        assert plain.space == "npu-sim-a8" and plain.backend_label == "NPU simulation (a8)"
        cand = [h.chunk_id for h in plain.hits]
        texts = {h.chunk_id: h.text for h in plain.hits}
        want = fp32_order(sim_bundle, q, texts, cand)
        got = searcher.search(q, k=n, mode="vector", rerank=n, all_chunks=True)
        assert [h.chunk_id for h in got.hits] == want
        assert "rerank" in got.timings
        differed += want != cand
    # the test means something only if 8 bits reordered some candidates
    assert differed >= 2
    searcher.close()


def test_candidates_are_cached_in_the_fp32_space_and_reused(npu_only_library):
    lib = npu_only_library
    searcher = Searcher(lib)
    res = searcher.search(QUERIES[0], k=5, mode="vector", rerank=8, all_chunks=True)
    assert "cpu-fp32" in [s.name for s in lib.spaces()]  # created on demand
    fp = lib.space("cpu-fp32")
    cached = set(lib.member_ids("cpu-fp32").tolist())
    assert len(cached) == 8 and {h.chunk_id for h in res.hits} <= cached
    # the same query again: nothing left to encode
    enc = searcher.encoder_for("cpu-fp32")
    before = enc.stats.texts
    searcher.search(QUERIES[0], k=5, mode="vector", rerank=8, all_chunks=True)
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
    res = searcher.search(QUERIES[1], k=5, mode="vector")
    assert "rerank" not in res.timings
    with Encoder.open(sim_bundle, "cpu", threads=1) as cpu:
        R.backfill(lib, cpu)
    assert R.default_depth(lib, "npu-sim-a8") == R.DEFAULT_DEPTH
    assert R.default_depth(lib, "cpu-fp32") == 0
    res = searcher.search(QUERIES[1], k=5, mode="vector")
    assert "rerank" in res.timings
    # explicit 0 switches it off
    assert "rerank" not in searcher.search(QUERIES[1], k=5, mode="vector", rerank=0).timings
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


def test_cli_backfill(npu_only_library, tmp_path):
    from click.testing import CliRunner

    from hefsearch.cli.main import main

    path = str(npu_only_library.path)
    total = len(npu_only_library.chunk_ids())
    npu_only_library.close()
    runner = CliRunner()
    res = runner.invoke(main, ["backfill", "--library", path, "--limit", "5", "--batch", "2"])
    assert res.exit_code == 0, res.output
    assert "Added 5 FP32 vectors" in res.output and f"{total - 5} of {total}" in res.output
    res = runner.invoke(main, ["backfill", "--library", path])
    assert res.exit_code == 0 and f"0 of {total} chunks still without one" in res.output
    res = runner.invoke(main, ["backfill", "--library", path])
    assert "Nothing to do" in res.output

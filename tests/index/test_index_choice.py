"""Which FAISS index a space gets by its size (issue 22): flat below DEFAULT_SQ8_THRESHOLD,
8-bit scalar codes re-scored exactly from the raw vectors up to hnsw_threshold, HNSW with its
efSearch tuned to recall@10 >= 0.99 above; the choice persists per space, and a space built
flat by an older hefsearch still opens and searches as it is until a sync changes it.

Spaces use the fake encoder identity of test_library_spaces.py (dim 16, random unit vectors);
the thresholds are lowered so the spaces stay small."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hefsearch.index import spaces
from hefsearch.index.faiss_index import HNSW_EF_MAX, HNSW_TARGET_RECALL, exact_top_k
from hefsearch.index.library import Library
from hefsearch.index.spaces import INDEX_META_FILE, describe_index
from tests.support.library_helpers import assert_consistent
from tests.index.test_library_spaces import FakeEncoder, add_chunks, unit

N = 3000


def build(lib, n=N, seed=0):
    ids = add_chunks(lib, n)
    vecs = unit(n, seed=seed)
    sp = lib.ensure_space(FakeEncoder())
    sp.add(ids, vecs)
    with lib.write_lock():
        sp.maintain(hnsw_threshold=lib.hnsw_threshold(), factory_override=None)
    return sp, np.asarray(ids, np.int64), vecs


def recall_at_10(sp, ids, vecs, queries):
    """recall@10 of the space's own search against exact search over every vector."""
    got = sp.search(queries, 10)[1]
    truth = exact_top_k(queries, ids, lambda part: vecs[np.searchsorted(ids, part)], 10)
    return float(np.mean([len(set(g.tolist()) & set(t.tolist())) / 10 for g, t in zip(got, truth)]))


@pytest.fixture
def low_sq8(monkeypatch):
    monkeypatch.setattr(spaces, "DEFAULT_SQ8_THRESHOLD", 1000)


def test_a_mid_sized_space_scans_8bit_codes_with_exact_recall(tmp_path, low_sq8):
    with Library.open(tmp_path / "lib") as lib:
        sp, ids, vecs = build(lib)
        assert sp.info.index_factory == spaces.SQ8_FACTORY and describe_index(sp.index) == "SQ8"
        assert sp.index_stats["recall_at_10"] >= 0.99  # measured at build against exact
        queries = unit(200, seed=99)  # new queries, not stored vectors
        assert recall_at_10(sp, ids, vecs, queries) >= 0.99
        # scores are the exact inner products (re-scored from the raw vectors), not the codes'
        scores, found = sp.search(queries[:3], 5)
        np.testing.assert_allclose(scores, np.einsum("qd,qkd->qk", queries[:3], vecs[found - ids[0]]),
                                   rtol=1e-5)
        assert_consistent(lib)


def test_the_choice_persists_and_survives_removals(tmp_path, low_sq8):
    path = tmp_path / "lib"
    with Library.open(path) as lib:
        sp, ids, vecs = build(lib)
        before = sp.search(vecs[:5], 10)
        with lib.write_lock(), lib.transaction():
            lib.db.execute("DELETE FROM space_members WHERE chunk_id = ?", [int(ids[0])])
        sp.forget([int(ids[0])])
        assert int(ids[0]) not in sp.search(vecs[:1], 10)[1][0]
    stats = json.loads((path / "spaces" / "cpu-fp32" / INDEX_META_FILE).read_text())
    assert stats["type"] == "SQ8" and stats["recall_at_10"] >= 0.99
    with Library.open(path) as lib:
        sp = lib.space("cpu-fp32")
        assert sp.info.index_factory == "SQ8" and describe_index(sp.index) == "SQ8"
        np.testing.assert_array_equal(sp.search(vecs[1:5], 10)[1], before[1][1:5])


def test_a_flat_space_of_an_older_library_opens_as_it_is(tmp_path, monkeypatch):
    path = tmp_path / "lib"
    monkeypatch.setattr(spaces, "DEFAULT_SQ8_THRESHOLD", 10**9)  # the size rules before SQ8
    with Library.open(path) as lib:
        sp, ids, vecs = build(lib)
        assert sp.info.index_factory == "Flat"
        expected = sp.search(vecs[:5], 10)
    monkeypatch.setattr(spaces, "DEFAULT_SQ8_THRESHOLD", 1000)  # this version's rules
    with Library.open(path) as lib:
        sp = lib.space("cpu-fp32")
        assert describe_index(sp.index) == "Flat"  # loaded, not rebuilt by a reader
        np.testing.assert_array_equal(sp.search(vecs[:5], 10)[1], expected[1])
        with lib.write_lock():  # the next sync applies the size rules
            assert sp.maintain(hnsw_threshold=lib.hnsw_threshold(), factory_override=None)
        assert describe_index(sp.index) == "SQ8"
        np.testing.assert_array_equal(sp.search(vecs[:5], 1)[1][:, 0], ids[:5])


def test_hnsw_gets_the_efsearch_that_reaches_the_recall_target(tmp_path):
    path = tmp_path / "lib"
    with Library.open(path) as lib:
        lib.set_settings(hnsw_threshold=1000)
        sp, ids, vecs = build(lib)
        assert describe_index(sp.index) == "HNSW32"
        ef = sp.index_stats["ef_search"]
        assert sp.index_stats["recall_at_10"] >= HNSW_TARGET_RECALL or ef == HNSW_EF_MAX
        assert recall_at_10(sp, ids, vecs, unit(200, seed=98)) >= 0.97  # new queries
    with Library.open(path) as lib:  # the tuned value is read back with the index
        sp = lib.space("cpu-fp32")
        assert sp._ef_search() == ef
        sp.search(vecs[:1], 10)
        assert spaces.inner_index(sp.index).hnsw.efSearch == max(ef, 20)

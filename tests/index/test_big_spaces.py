"""Compressed spaces (libraries of millions of chunks), on a small scale: a 20k-vector space
with a tiny ``compress_threshold`` switches to an IVF index of 4-bit codes whose candidates are
re-scored exactly from the raw vectors; it keeps its recall, survives close/reopen, is rebuilt
from the raw vectors when its file is gone or differs, retrains after growth, and ``status``
shows its type, memory and measured recall. Vectors: clustered like sentence embeddings
(``bench/scale.py``), dim 384. The 1M acceptance numbers are measured by ``bench/scale.py``."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from hefsearch.bench.synthetic import clustered_vectors
from hefsearch.cli.main import main
from hefsearch.index.library import Library
from hefsearch.index.spaces import (COMPRESSED_FACTORY, INDEX_FILE, INDEX_META_FILE, index_ids,
                                    ivf_of, make_index)
from tests.support.library_helpers import assert_consistent
from tests.index.test_library_spaces import FakeEncoder, add_chunks

DIM = 384
N = 20_000
THRESHOLD = 10_000


class Encoder384(FakeEncoder):
    def __init__(self):
        super().__init__()
        self.dim = DIM


def recall_at_10(space, queries: np.ndarray, ids: list[int], vecs: np.ndarray) -> float:
    exact = np.argsort(-(queries @ vecs.T), axis=1)[:, :10]
    ids = np.asarray(ids)
    hits = [len(set(space.search(q[None], 10)[1][0].tolist()) & set(ids[e].tolist())) / 10
            for q, e in zip(queries, exact)]
    return float(np.mean(hits))


def fill(lib, vecs, path):
    sp = lib.ensure_space(Encoder384())
    ids = add_chunks(lib, len(vecs), path=path)
    for s in range(0, len(ids), 5000):
        sp.add(ids[s : s + 5000], vecs[s : s + 5000])
    with lib.write_lock():
        sp.maintain(hnsw_threshold=lib.hnsw_threshold(), factory_override=None)
    return sp, ids


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A closed library holding one compressed space of N clustered vectors."""
    path = tmp_path_factory.mktemp("big") / "lib"
    vecs = clustered_vectors(N, DIM)
    with Library.open(path) as lib:
        lib.set_settings(compress_threshold=THRESHOLD)
        _sp, ids = fill(lib, vecs, "/docs/a.txt")
    return path, ids, vecs


@pytest.fixture
def library(built, tmp_path):
    """A fresh copy of the built library, opened."""
    path, ids, vecs = built
    shutil.copytree(path, tmp_path / "lib")
    lib = Library.open(tmp_path / "lib")
    yield lib, ids, vecs
    lib.close()


QUERIES = clustered_vectors(50, DIM, points_seed=7)  # new points from the same clusters


def test_switches_to_compressed_and_keeps_recall_after_rescoring(library):
    lib, ids, vecs = library
    sp = lib.space("cpu-fp32")
    assert sp.info.index_factory == COMPRESSED_FACTORY
    assert ivf_of(sp.index) is not None and sp.index.ntotal == N
    assert recall_at_10(sp, QUERIES, ids, vecs) >= 0.9
    scores, got = sp.search(QUERIES[:1], 10)  # scores are exact inner products, best first
    np.testing.assert_allclose(scores[0], sp.vectors(got[0]) @ QUERIES[0], rtol=1e-5)
    assert (np.diff(scores[0]) <= 0).all()
    stats = sp.index_stats
    assert stats["type"].startswith("IVF") and stats["type"].endswith(",SQ4")
    assert stats["trained_on"] == N and stats["recall_at_10"] >= 0.9


def test_compressed_index_memory_is_a_fraction_of_flat(library):
    lib, _ids, _vecs = library
    stats = lib.status().spaces[0].index_stats
    assert stats["bytes"] < 0.15 * N * DIM * 4


def test_survives_close_and_reopen_without_rebuilding(library):
    lib, ids, vecs = library
    before = lib.space("cpu-fp32").search(QUERIES[:5], 10)[1]
    path = lib.path
    lib.close()
    with Library.open(path) as again:
        assert not again.last_reconcile["cpu-fp32"]["rebuilt"]
        sp = again.space("cpu-fp32")
        assert ivf_of(sp.index) is not None
        np.testing.assert_array_equal(sp.search(QUERIES[:5], 10)[1], before)
        assert sp.index_stats["trained_on"] == N  # index.json belongs to the file read
        assert_consistent(again)


def test_rebuilt_from_raw_vectors_when_the_index_file_is_deleted(library):
    lib, ids, vecs = library
    folder, path = lib.space("cpu-fp32").folder, lib.path
    lib.close()
    (folder / INDEX_FILE).unlink()
    with Library.open(path) as again:
        assert again.last_reconcile["cpu-fp32"]["rebuilt"]
        sp = again.space("cpu-fp32")
        assert ivf_of(sp.index) is not None
        assert recall_at_10(sp, QUERIES, ids, vecs) >= 0.9
        assert (folder / INDEX_FILE).exists() and json.loads((folder / INDEX_META_FILE).read_text())["recall_at_10"] >= 0.9


def test_rebuilt_when_the_index_file_holds_other_vectors(library):
    lib, ids, vecs = library
    sp = lib.space("cpu-fp32")
    folder, path, nlist = sp.folder, lib.path, ivf_of(sp.index).nlist
    lib.close()
    fake = make_index(f"IVF{nlist},SQ4", DIM)  # same ids and layout, other vectors
    other = clustered_vectors(N, DIM, seed=5)
    fake.train(other)
    fake.add_with_ids(other, np.asarray(ids, np.int64))
    import faiss

    faiss.write_index(fake, str(folder / INDEX_FILE))
    with Library.open(path) as again:
        report = again.last_reconcile["cpu-fp32"]
        assert report["rebuilt"] and "find themselves" in report["index_mismatch"]
        assert recall_at_10(again.space("cpu-fp32"), QUERIES, ids, vecs) >= 0.9


def test_retrains_after_doubling_but_not_before(library):
    lib, ids, vecs = library
    sp = lib.space("cpu-fp32")
    more = clustered_vectors(N, DIM, points_seed=3)
    extra = add_chunks(lib, N // 2, path="/docs/b.txt")
    sp.add(extra, more[: N // 2])
    with lib.write_lock():
        sp.maintain(hnsw_threshold=lib.hnsw_threshold(), factory_override=None)
    assert sp.index_stats["trained_on"] == N and sp.index.ntotal == N + N // 2  # grown 1.5x: added only
    extra2 = add_chunks(lib, N // 2, path="/docs/c.txt")
    sp.add(extra2, more[N // 2 :])
    with lib.write_lock():
        assert sp.maintain(hnsw_threshold=lib.hnsw_threshold(), factory_override=None)
    assert sp.index_stats["trained_on"] == 2 * N
    all_ids, all_vecs = ids + extra + extra2, np.concatenate([vecs, more])
    assert recall_at_10(sp, QUERIES, all_ids, all_vecs) >= 0.9
    assert_consistent(lib)


def test_removed_chunks_are_gone_and_others_keep_their_ids(library):
    """IVF keeps its own ids (no IndexIDMap2 around it: that one renumbers after a removal,
    and searches then answered with the ids of other vectors)."""
    lib, ids, vecs = library
    sp = lib.space("cpu-fp32")
    gone = set(ids[:100])
    with lib.write_lock(), lib.transaction():
        lib.db.execute(f"DELETE FROM chunks WHERE id IN ({','.join(map(str, gone))})")
    sp.forget(gone)
    assert not gone & set(index_ids(sp.index).tolist())
    _s, got = sp.search(vecs[100:120], 1)
    assert got[:, 0].tolist() == ids[100:120]
    with lib.write_lock():
        pass  # saves the index
    assert_consistent(lib)


def test_a_user_ivf_factory_keeps_ids_after_removal(tmp_path):
    with Library.open(tmp_path / "lib") as lib:
        lib.set_settings(index_factory="IVF16,Flat")
        sp = lib.ensure_space(Encoder384())
        vecs = clustered_vectors(2000, DIM)
        ids = add_chunks(lib, 2000)
        sp.add(ids, vecs)
        with lib.write_lock():
            sp.maintain(hnsw_threshold=lib.hnsw_threshold(), factory_override="IVF16,Flat")
        with lib.write_lock(), lib.transaction():
            lib.db.execute(f"DELETE FROM chunks WHERE id IN ({','.join(map(str, ids[:50]))})")
        sp.forget(ids[:50])
        _s, got = sp.search(vecs[500:510], 1)
        assert got[:, 0].tolist() == ids[500:510]


def test_status_shows_type_memory_and_recall(library):
    lib, _ids, _vecs = library
    path = str(lib.path)
    lib.close()
    res = CliRunner().invoke(main, ["status", "--library", path, "--json"])
    assert res.exit_code == 0, res.output
    stats = json.loads(res.output)["spaces"][0]["index_stats"]
    assert stats["type"].startswith("IVF") and stats["bytes"] > 0 and stats["recall_at_10"] >= 0.9
    res = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["status", "--library", path])
    assert res.exit_code == 0, res.output
    assert "compressed, re-scored" in res.output and "MiB" in res.output
    assert f"{stats['recall_at_10']:.3f}" in res.output


def test_filtered_search_through_the_compressed_index(library, monkeypatch):
    """Large filters go through FAISS with an id selector (IVF parameters), then re-scoring."""
    from hefsearch.index import spaces

    monkeypatch.setattr(spaces, "EXACT_FILTER_LIMIT", 0)
    lib, ids, vecs = library
    sp = lib.space("cpu-fp32")
    allowed = set(ids[5000:15000])
    scores, got = sp.search(vecs[6000:6010], 10, allowed=allowed)
    assert set(got.ravel().tolist()) <= allowed
    assert got[:, 0].tolist() == ids[6000:6010]
    np.testing.assert_allclose(scores[:, 0], 1.0, rtol=1e-5)


class _Probe:
    """What tune_nprobe reads and sets of an IVF index."""

    def __init__(self, nlist):
        self.nlist, self.nprobe = nlist, 1


def test_nprobe_is_tuned_to_near_the_smallest_value_reaching_the_target():
    # recall grows with nprobe and first reaches TARGET_RECALL at 291: doubling alone would stop
    # at 512 (almost twice the scan); bisection must land within 1/8 above the threshold
    from hefsearch.index.faiss_index import TARGET_RECALL, tune_nprobe

    ivf = _Probe(4096)
    got = tune_nprobe(ivf, lambda: min(1.0, ivf.nprobe / 300))
    assert got >= TARGET_RECALL
    assert 291 <= ivf.nprobe <= 291 * 1.15
    never = _Probe(64)
    assert tune_nprobe(never, lambda: 0.5) == 0.5 and never.nprobe == 64  # all lists, as before


def test_a_big_scan_uses_every_core_with_the_same_results(library, monkeypatch):
    import faiss

    from hefsearch.index import faiss_index, spaces

    lib, _ids, _vecs = library
    sp = lib.space("cpu-fp32")
    one_core = sp.search(QUERIES[:5], 10)
    used = []
    monkeypatch.setattr(faiss_index, "PARALLEL_SCAN_CODES", 1)  # every query counts as a big scan
    real_search = sp.index.search

    def spy(*a, **kw):
        used.append((faiss.omp_get_max_threads(), ivf_of(sp.index).parallel_mode))
        return real_search(*a, **kw)

    monkeypatch.setattr(sp.index, "search", spy)
    every_core = [sp.search(q[None], 10) for q in QUERIES[:5]]
    assert used and all(m == 1 for _t, m in used)  # one query: its lists split over threads
    assert faiss.omp_get_max_threads() == 1  # back to one thread after each search
    for r, (s, i) in enumerate(every_core):
        assert i[0].tolist() == one_core[1][r].tolist()
        np.testing.assert_allclose(s[0], one_core[0][r], rtol=1e-6)


def test_recall_is_measured_without_the_querys_own_document():
    # chunks of one document have consecutive ids and find each other far more easily than a
    # user's query finds anything: ids near the query's own are not counted, nor empty slots
    from hefsearch.index.faiss_index import RECALL_LEAVE_OUT, outside_own_document

    own = 1000
    row = np.array([own, own + 1, own - RECALL_LEAVE_OUT, -1, own + RECALL_LEAVE_OUT + 1, 5, 7])
    assert outside_own_document(row, own, 2) == {own + RECALL_LEAVE_OUT + 1, 5}


def test_a_low_compress_threshold_compresses_a_small_space(tmp_path):
    # a user who sets compress_threshold to 1,500 gets a compressed index at 1,500 chunks
    vecs = clustered_vectors(1500, DIM, points_seed=11)
    with Library.open(tmp_path / "lib") as lib:
        lib.set_settings(compress_threshold=1500)
        sp, ids = fill(lib, vecs, "/docs/small.txt")
        assert ivf_of(sp.index) is not None and sp.index_stats["type"].endswith(",SQ4")
        assert sp.index_stats["recall_at_10"] >= 0.9
        assert recall_at_10(sp, clustered_vectors(30, DIM, points_seed=12), ids, vecs) >= 0.9

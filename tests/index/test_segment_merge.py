"""Size-tiered merging of a space's raw-vector segments during a long run
(``RawVectors.merge_full_tiers``, run by ``Space.committed`` after each batch): the segment
count (open files, memory maps) stays bounded, merges keep only committed members with the
copy readers use, a crash between writing the merged segment and deleting the old ones loses
nothing, and readers in other Library objects keep answering.

Spaces are driven with the fake encoder identity of test_library_spaces.py at dim 8 (spaces
never encode) and random vectors."""

from __future__ import annotations

import os

import numpy as np
import pytest

from hefsearch.index.library import Library
from hefsearch.index.spaces import IDS_SUFFIX, MAX_SEGMENTS, MERGE_FANIN, RawVectors
from tests.support.library_helpers import assert_consistent
from tests.index.test_library_spaces import FakeEncoder, add_chunks
from tests.index.test_space_appends import fresh_map, id_map

DIM = 8
#: a merge starts above this many segments (merge_full_tiers)
START = MAX_SEGMENTS + MERGE_FANIN


class Encoder8(FakeEncoder):
    def __init__(self):
        super().__init__()
        self.dim = DIM


def vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)  # unit: each is its own top hit


@pytest.fixture
def lib(tmp_path):
    library = Library.open(tmp_path / "lib")
    yield library
    library.close()


def commit_batches(lib, sp, ids: list[int], vecs: np.ndarray, batch: int, counts: list[int] | None = None) -> None:
    """Commit ``ids`` in batches of ``batch`` (one segment each), as an index run does."""
    with lib.write_lock():
        for start in range(0, len(ids), batch):
            sp.add(ids[start : start + batch], vecs[start : start + batch])
            if counts is not None:
                counts.append(len(sp.raw.segment_names()))


def segment_rows(raw: RawVectors) -> dict[str, int]:
    return {n: len(raw._segments[n]) for n in raw.segment_names()}


def test_segments_stay_few_over_a_long_run_and_every_vector_reads_back(lib):
    sp = lib.ensure_space(Encoder8())
    ids = add_chunks(lib, 300 * 64)
    vecs = vectors(len(ids), seed=0)
    counts: list[int] = []
    commit_batches(lib, sp, ids, vecs, 64, counts)  # 300 commits
    rows = segment_rows(sp.raw)
    tiers = {RawVectors.tier(r) for r in rows.values()}
    assert max(counts) <= max(START, (MERGE_FANIN - 1) * len(tiers)) + 1, counts
    assert 2 in tiers  # 64-row batches -> 1024 (tier 1) -> 16384 (tier 2): merges cascade
    assert sum(rows.values()) == len(ids)  # every vector once: no copy left behind
    np.testing.assert_array_equal(sp.vectors(ids), vecs)
    assert id_map(sp.raw) == fresh_map(sp.raw)  # the append fast path's map after merges
    names = sp.raw.segment_names()
    assert sorted(n for n in os.listdir(sp.folder) if n.endswith(IDS_SUFFIX)) == \
        sorted(n[: -len(".npy")] + IDS_SUFFIX for n in names)  # sidecars went with their segments
    _s, got = sp.search(vecs[[5, 9000, 19000]], 1)
    assert got[:, 0].tolist() == [ids[5], ids[9000], ids[19000]]
    assert_consistent(lib)


def test_a_merge_drops_forgotten_ids_and_keeps_the_newest_copy(lib, monkeypatch):
    monkeypatch.setattr(RawVectors, "COPY_BLOCK_ROWS", 7)  # merged segments are copied in blocks
    sp = lib.ensure_space(Encoder8())
    ids = add_chunks(lib, (START + 1) * 4)
    vecs = vectors(len(ids), seed=1)
    commit_batches(lib, sp, ids[:START * 4], vecs[:START * 4], 4)  # START segments: no merge yet
    assert len(sp.raw.segment_names()) == START
    gone = ids[:2]  # in the oldest segment, which the first merge takes
    with lib.write_lock(), lib.transaction():
        lib.db.execute("DELETE FROM chunks WHERE id IN (?, ?)", gone)
    sp.forget(gone)
    newer = vectors(1, seed=99)
    with lib.write_lock():
        sp.raw.write([ids[2]], newer)  # a newer copy of an id of the oldest segment
    oldest = sp.raw.segment_names()[0]
    commit_batches(lib, sp, ids[START * 4 :], vecs[START * 4 :], 4)
    assert len(sp.raw.segment_names()) < MERGE_FANIN and oldest not in sp.raw.segment_names()
    assert not sp.raw.has(gone).any()
    np.testing.assert_array_equal(sp.raw.get([ids[2]]), newer)  # not the merged older copy
    keep = ids[2:]
    expected = vecs[2:].copy()
    expected[0] = newer[0]
    np.testing.assert_array_equal(sp.vectors(keep), expected)
    assert id_map(sp.raw) == fresh_map(sp.raw)
    assert_consistent(lib)


def test_a_crash_between_writing_the_merge_and_deleting_loses_nothing(tmp_path, monkeypatch):
    path = tmp_path / "lib"
    with Library.open(path) as lib:
        sp = lib.ensure_space(Encoder8())
        ids = add_chunks(lib, (START + 2) * 4)
        vecs = vectors(len(ids), seed=2)
        commit_batches(lib, sp, ids[: START * 4], vecs[: START * 4], 4)
        before = set(sp.raw.segment_names())

        def power_cut(self, names):
            raise OSError("power cut")

        monkeypatch.setattr(RawVectors, "delete_segments", power_cut)
        with pytest.raises(OSError, match="power cut"):
            commit_batches(lib, sp, ids[START * 4 : (START + 1) * 4], vecs[START * 4 : (START + 1) * 4], 4)
        monkeypatch.undo()
    names = RawVectors(sp.folder, DIM).segment_names()
    assert len(names) == START + 2 and before < set(names)  # the merged segment and all old ones
    with Library.open(path) as lib:  # reconcile
        sp = lib.space("cpu-fp32")
        np.testing.assert_array_equal(sp.vectors(ids[: (START + 1) * 4]), vecs[: (START + 1) * 4])
        assert not [n for n in os.listdir(sp.folder) if n.endswith(".tmp")]
        assert_consistent(lib)
        # the old segments still fill their tier: the next batch's merge finds them superseded
        commit_batches(lib, sp, ids[(START + 1) * 4 :], vecs[(START + 1) * 4 :], 4)
        rows = segment_rows(sp.raw)
        assert not before & rows.keys() and sum(rows.values()) == len(ids)  # no copy twice
        np.testing.assert_array_equal(sp.vectors(ids), vecs)
        assert id_map(sp.raw) == fresh_map(sp.raw)
        assert_consistent(lib)


def test_a_reader_opened_before_the_merges_still_searches_after_them(tmp_path):
    path = tmp_path / "lib"
    writer = Library.open(path)
    sp = writer.ensure_space(Encoder8())
    ids = add_chunks(writer, (START + 20) * 8)
    vecs = vectors(len(ids), seed=3)
    commit_batches(writer, sp, ids[:80], vecs[:80], 8)
    reader = Library.open(path, create=False, read_only=True)
    seen = reader.space("cpu-fp32")
    _s, got = seen.search(vecs[:3], 1)  # its segments are open now
    assert got[:, 0].tolist() == ids[:3]
    old = set(seen.raw.segment_names())
    commit_batches(writer, sp, ids[80:], vecs[80:], 8)
    assert not old & set(os.listdir(sp.folder))  # every segment the reader had open was merged away
    probe = [0, 40, 79, 80, len(ids) - 1]
    _s, got = seen.search(vecs[probe], 1)  # refreshes: new members, so it rescans the folder
    assert got[:, 0].tolist() == [ids[i] for i in probe]
    np.testing.assert_array_equal(seen.vectors(ids), vecs)
    reader.close()
    writer.close()


def test_maintain_merges_a_big_spaces_full_tiers_instead_of_rewriting_it(lib, monkeypatch):
    # above FULL_COMPACT_ROWS, too many segments at the end of a sync merge by tier; rewriting a
    # 10M space (15 GB) because its tiers hold 15 segments each would cost a re-index every run
    from hefsearch.index import segments

    monkeypatch.setattr(segments, "FULL_COMPACT_ROWS", 500)
    sp = lib.ensure_space(Encoder8())
    ids = add_chunks(lib, 40 * 20)
    vecs = vectors(len(ids), seed=3)
    commit_batches(lib, sp, ids, vecs, 20)  # 40 segments of 20 rows: above MAX_SEGMENTS, below START
    assert len(sp.raw.segment_names()) == 40
    with lib.write_lock():
        assert sp.maintain(hnsw_threshold=10**9, factory_override=None)
    rows = sorted(segment_rows(sp.raw).values())
    assert len(rows) == 40 - 2 * (MERGE_FANIN - 1)  # two full tiers of 16 merged, 8 left alone
    assert max(rows) == MERGE_FANIN * 20 and sum(rows) == len(ids)  # no single whole-space copy
    np.testing.assert_array_equal(sp.vectors(ids), vecs)
    assert_consistent(lib)
    monkeypatch.setattr(segments, "FULL_COMPACT_ROWS", 10_000)  # a small space: one segment
    with lib.write_lock():
        assert sp.maintain(hnsw_threshold=10**9, factory_override=None) is False  # 10 segments now

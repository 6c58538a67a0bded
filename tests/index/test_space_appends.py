"""What one committed batch costs a big space: a new segment's ids are merged into the id map of
``RawVectors`` without rescanning every segment, and a space's id sets grow by appending; and a
space whose factory needs training gets that index once it has enough vectors.

Raw vectors are tiny random vectors (dim 16); the id bookkeeping is what is tested. Spaces
are driven with the fake encoder identity of test_library_spaces.py (spaces never encode)."""

from __future__ import annotations

import numpy as np
import pytest

from hefsearch.index import faiss_index, spaces
from hefsearch.index.library import Library
from hefsearch.index.spaces import IdSet, RawVectors, describe_index
from tests.support.library_helpers import assert_consistent
from tests.index.test_library_spaces import DIM, FakeEncoder, add_chunks, unit


def id_map(raw: RawVectors) -> tuple[list[int], list[str], list[int]]:
    """The id -> (segment file, row) map of ``raw``, segments by name (their index is private)."""
    return raw._ids.tolist(), [raw._order[s] for s in raw._seg.tolist()], raw._row.tolist()


def fresh_map(raw: RawVectors) -> tuple[list[int], list[str], list[int]]:
    """The map a full rescan of the folder builds (a new object reads every segment)."""
    return id_map(RawVectors(raw.folder, raw.dim))


def count_reloads(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = RawVectors.reload

    def reload(self):
        calls.append(1)
        real(self)

    monkeypatch.setattr(RawVectors, "reload", reload)
    return calls


def forbid_reload(monkeypatch, guarded: RawVectors) -> None:
    """Make a full rescan of ``guarded`` fail (other objects, like fresh_map's, still rescan)."""
    real = RawVectors.reload

    def reload(self):
        if self is guarded:
            raise AssertionError("a full rescan of every segment ran for our own new segment")
        real(self)

    monkeypatch.setattr(RawVectors, "reload", reload)


# -- RawVectors ------------------------------------------------------------------------------
def test_appending_a_segment_merges_only_its_ids(tmp_path, monkeypatch):
    raw = RawVectors(tmp_path, DIM)
    raw.write(np.arange(1, 1001), unit(1000))
    before = raw.ids
    forbid_reload(monkeypatch, raw)
    for start in range(1001, 1001 + 20 * 256, 256):  # the batches of an index run
        raw.write(np.arange(start, start + 256), unit(256, seed=start))
        assert id_map(raw) == fresh_map(raw)
    assert before.tolist() == list(range(1, 1001))  # an array handed out before never changes
    np.testing.assert_array_equal(raw.get([1, 1001, 6120]),
                                  np.vstack([unit(1000)[0], unit(256, seed=1001)[0], unit(256, seed=5865)[255]]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_out_of_order_and_overlapping_writes_give_the_map_of_a_full_rescan(tmp_path, monkeypatch, seed):
    """Ids below the stored maximum, copies of stored ids (the newest wins), repeats inside one
    segment (its last row wins), unsorted segments, an empty segment: after every write the map
    is exactly the one a rescan builds, and no write rescanned."""
    rng = np.random.default_rng(seed)
    raw = RawVectors(tmp_path, DIM)
    writes = [np.arange(100, 200), np.arange(300, 310)[::-1], np.arange(150, 160),  # stored again
              np.array([50, 7, 50, 400, 7]), np.array([], np.int64), np.arange(200, 300),
              rng.integers(0, 500, 80), np.arange(500, 520)]
    forbid_reload(monkeypatch, raw)
    for i, ids in enumerate(writes):
        raw.write(ids, unit(len(ids), seed=100 * seed + i) if len(ids) else np.empty((0, DIM)))
        assert id_map(raw) == fresh_map(raw), f"after write {i}"
    every = np.unique(np.concatenate(writes))
    np.testing.assert_array_equal(raw.get(every), RawVectors(raw.folder, DIM).get(every))


def test_a_segment_another_process_wrote_or_merged_forces_a_full_rescan(tmp_path, monkeypatch):
    ours, theirs = RawVectors(tmp_path, DIM), RawVectors(tmp_path, DIM)
    ours.write(np.arange(1, 11), unit(10))
    theirs.reload()
    theirs.write(np.arange(11, 21), unit(10, seed=1))  # another writer, after ours last looked
    reloads = count_reloads(monkeypatch)
    ours.write(np.arange(21, 31), unit(10, seed=2))
    assert reloads and id_map(ours) == fresh_map(ours) and len(ours.ids) == 30
    theirs.reload()  # then merges every segment into one under us, as compaction does
    old = theirs.segment_names()
    theirs.write(np.arange(1, 31), theirs.get(np.arange(1, 31)))
    theirs.delete_segments(old)
    reloads.clear()
    ours.write(np.arange(31, 41), unit(10, seed=3))
    assert reloads and id_map(ours) == fresh_map(ours)
    assert len(ours.segment_names()) == 2 and ours.get([5])[0].tolist() == unit(10)[4].tolist()


def test_a_known_unreadable_segment_does_not_force_a_rescan(tmp_path, monkeypatch):
    raw = RawVectors(tmp_path, DIM)
    raw.write(np.arange(1, 11), unit(10))
    (tmp_path / "seg-0000000002-00ff.npy").write_bytes(b"torn")
    raw.reload()
    assert raw.unreadable == {"seg-0000000002-00ff.npy"}
    forbid_reload(monkeypatch, raw)
    raw.write(np.arange(11, 21), unit(10, seed=1))
    assert raw.segment_names()[-1].startswith("seg-0000000003-")
    assert id_map(raw) == fresh_map(raw)


# -- IdSet -----------------------------------------------------------------------------------
def test_idset_appends_write_into_room_and_never_change_an_older_set():
    a = IdSet(np.arange(10_000))
    b = a | np.arange(10_000, 10_256)
    c = b | np.arange(10_256, 10_512)
    assert np.shares_memory(b.ids, c.ids)  # appended behind b's array, not copied
    d = b | [20_000, 20_001]  # a second append behind the same b: must not overwrite c's ids
    e = a | [30_000]
    assert a.ids.tolist() == list(range(10_000))
    assert b.ids.tolist() == list(range(10_256))
    assert c.ids.tolist() == list(range(10_512))
    assert d.ids.tolist() == list(range(10_256)) + [20_000, 20_001]
    assert e.ids.tolist() == list(range(10_000)) + [30_000]
    with pytest.raises(ValueError):
        c.ids[0] = 5  # frozen like every IdSet array
    assert (c | [5, 10_600]).ids.tolist() == list(range(10_512)) + [10_600]  # not all above


def test_idset_removing_a_few_ids_is_set_difference():
    rng = np.random.default_rng(3)
    big = rng.choice(100_000, 20_000, replace=False).tolist()
    few = rng.choice(100_000, 50).tolist() + big[:10]
    assert (IdSet(big) - few).ids.tolist() == sorted(set(big) - set(few))
    s = IdSet(big)
    assert (s - [100_001]) is s


# -- a space, batch by batch -----------------------------------------------------------------
@pytest.fixture
def lib(tmp_path):
    library = Library.open(tmp_path / "lib")
    yield library
    library.close()


def test_batches_into_a_space_take_the_append_paths(lib, monkeypatch):
    sp = lib.ensure_space(FakeEncoder())
    ids = add_chunks(lib, 3000)
    sp.add(ids[:2000], unit(2000))
    members = sp._members
    grown = []
    with lib.write_lock():  # held for a whole run, as sync does (taking it reconciles)
        forbid_reload(monkeypatch, sp.raw)
        for s in range(2000, 3000, 250):
            sp.add(ids[s : s + 250], unit(250, seed=s))
            grown.append(sp._members.ids)
        monkeypatch.undo()
    assert np.shares_memory(grown[1], grown[-1])  # appended into room, not copied per batch
    assert members.ids.tolist() == ids[:2000]
    assert sp._members.ids.tolist() == ids and sp._in_index.ids.tolist() == ids
    assert id_map(sp.raw) == fresh_map(sp.raw)
    assert sp.search(unit(250, seed=2750)[249:], 1)[1][0, 0] == ids[2999]
    np.testing.assert_array_equal(sp.vectors([ids[2999]]), unit(250, seed=2750)[249:])
    assert_consistent(lib)


# -- a factory that needs training, in a space that was small --------------------------------
def grow_and_maintain(lib, ids, vecs, factory):
    sp = lib.ensure_space(FakeEncoder())
    sp.add(ids, vecs)
    with lib.write_lock():
        sp.maintain(hnsw_threshold=lib.hnsw_threshold(), factory_override=factory)
    return sp


def test_a_trained_factory_is_built_once_the_space_has_grown_enough(tmp_path, monkeypatch):
    path, factory = tmp_path / "lib", "IVF16,Flat"
    vecs = unit(1500, seed=4)
    with Library.open(path) as lib:
        lib.set_settings(index_factory=factory)
        ids = add_chunks(lib, 1500)
        sp = grow_and_maintain(lib, ids[:600], vecs[:600], factory)
        assert describe_index(sp.index) == "Flat"  # too few vectors to train 16 lists
    with Library.open(path) as lib:  # the fallback survives a reopen, then the space grows
        sp = grow_and_maintain(lib, ids[600:], vecs[600:], factory)
        assert describe_index(sp.index) == "IVF16,Flat"
        assert sp.index_stats["trained_on"] == 1500
        assert sp.search(vecs[1200:1201], 1)[1][0, 0] == ids[1200]

        def rebuild(self):
            raise AssertionError("rebuilt an index that already is what the factory asks for")

        monkeypatch.setattr(spaces.Space, "_rebuild", rebuild)
        with lib.write_lock():
            sp.maintain(hnsw_threshold=lib.hnsw_threshold(), factory_override=factory)
        assert_consistent(lib)


def test_a_flat_factory_and_hnsw_never_count_as_untrained(lib, monkeypatch):
    ids = add_chunks(lib, 1200)
    sp = grow_and_maintain(lib, ids, unit(1200), None)  # the default: Flat below hnsw_threshold
    assert describe_index(sp.index) == "Flat" and not sp._needs_retrain()
    sp = grow_and_maintain(lib, [], np.empty((0, DIM)), "HNSW16")
    assert describe_index(sp.index) == "HNSW16" and not sp._needs_retrain()


def test_a_small_compressed_space_is_compressed_once_big_enough(lib, monkeypatch):
    """A regression guard for the compressed factory (this case was already handled before
    user factories were): Flat under MIN_COMPRESSED (lowered here to keep the test fast)."""
    monkeypatch.setattr(faiss_index, "MIN_COMPRESSED", 1500)
    lib.set_settings(compress_threshold=500)
    ids = add_chunks(lib, 2000)
    vecs = unit(2000, seed=5)
    sp = grow_and_maintain(lib, ids[:800], vecs[:800], None)
    assert sp.info.index_factory == spaces.COMPRESSED_FACTORY and describe_index(sp.index) == "Flat"
    sp = grow_and_maintain(lib, ids[800:], vecs[800:], None)
    assert describe_index(sp.index).startswith("IVF") and sp.index_stats["trained_on"] == 2000
    assert_consistent(lib)

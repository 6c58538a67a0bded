"""A space's id bookkeeping: sorted int64 arrays (IdSet) instead of Python sets, and the id
sidecars ``seg-<seq>-<tag>.ids.npy`` that spare opening a space the read of every segment's
id column.

Spaces are driven with the fake encoder identity of test_library_spaces.py (spaces never
encode) and random unit vectors."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from hefsearch.index import segments, spaces
from hefsearch.index.library import Library
from hefsearch.index.spaces import IDS_SUFFIX, SEGMENT_RE, IdSet, RawVectors, ids_file
from tests.support.library_helpers import assert_consistent
from tests.index.test_library_spaces import FakeEncoder, add_chunks, unit


@pytest.fixture
def lib(tmp_path):
    lib = Library.open(tmp_path / "lib")
    yield lib
    lib.close()


def sidecars(folder) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(IDS_SUFFIX))


def one_segment_library(path, n: int) -> tuple[list[int], np.ndarray, Path]:
    """A closed library at ``path`` whose space holds ``n`` vectors in one segment (with its
    sidecar): (chunk ids, vectors, the space folder)."""
    with Library.open(path) as lib:
        sp = lib.ensure_space(FakeEncoder())
        ids = add_chunks(lib, n)
        vecs = unit(n)
        sp.add(ids, vecs)
        return ids, vecs, sp.folder


def delete_sidecars(folder) -> None:
    for n in sidecars(folder):
        (folder / n).unlink()


class NoIdColumn(np.ndarray):
    """A segment whose id column must not be read (whole-column reads raise)."""

    def __getitem__(self, key):
        if isinstance(key, str) and key == "id":
            raise AssertionError("the id column of a segment was read")
        return super().__getitem__(key)


def forbid_id_column(monkeypatch) -> None:
    real = RawVectors._open_segment

    def open_segment(self, name):
        arr = real(self, name)
        return None if arr is None else arr.view(NoIdColumn)

    monkeypatch.setattr(RawVectors, "_open_segment", open_segment)


# -- IdSet -----------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 5, 3000])
def test_idset_answers_like_a_python_set(n):
    rng = np.random.default_rng(n)
    a_list = rng.integers(0, 2 * n + 10, n).tolist()  # duplicates and any order
    b_list = rng.integers(0, 2 * n + 10, n // 2 + 1).tolist()
    a, b = IdSet(a_list), IdSet(np.array(b_list))
    sa, sb = set(a_list), set(b_list)
    assert len(a) == len(sa) and bool(a) == bool(sa)
    assert list(a) == sorted(sa) and all(type(i) is int for i in a)
    for got, want in ((a & b, sa & sb), (a - b, sa - sb), (a | b, sa | sb), (a - sb, sa - sb)):
        assert list(got) == sorted(want)
    probe = np.arange(-1, 2 * n + 12)
    assert a.contains(probe).tolist() == [int(i) in sa for i in probe]
    assert all((i in a) == (i in sa) for i in range(-1, 2 * n + 12))
    assert a == sa and a != sa | {-5}
    assert np.asarray(a).tolist() == sorted(sa)


def test_idset_copies_the_callers_array_and_cannot_be_changed_in_place():
    ids = np.array([1, 2, 3], np.int64)
    s = IdSet(ids)
    ids[0] = 99
    assert list(s) == [1, 2, 3]
    with pytest.raises(ValueError):
        s.ids.sort()


# -- membership across processes ---------------------------------------------------------------
def test_members_stay_exact_when_another_library_object_commits(tmp_path):
    writer = Library.open(tmp_path / "lib")
    sp_w = writer.ensure_space(FakeEncoder())
    ids = add_chunks(writer, 60)
    vecs = unit(60)
    sp_w.add(ids[:30], vecs[:30])
    reader = Library.open(tmp_path / "lib")  # another connection, as another process has
    try:
        sp_r = reader.space("cpu-fp32")
        assert sp_r.count == 30 and sp_r._members == ids[:30] and sp_r._in_index == ids[:30]

        sp_w.add(ids[30:], vecs[30:])
        gone = ids[10:20] + ids[40:45]
        with writer.write_lock(), writer.transaction():
            writer.db.execute(f"DELETE FROM chunks WHERE id IN ({','.join(map(str, gone))})")
        sp_w.forget(gone)
        sp_w.add(ids[10:12], vecs[10:12])  # deleted chunks are not added back

        want = sorted(set(ids) - set(gone))
        _scores, got = sp_r.search(vecs[:60], 60)  # refreshes: sees both commits
        assert list(sp_r._members) == want and list(sp_r._in_index) == want
        assert sp_r.has(ids).tolist() == [i in want for i in ids]
        assert not set(got.ravel().tolist()) & set(gone)
        assert sorted(set(got.ravel().tolist()) - {-1}) == want
        assert reader.member_ids("cpu-fp32").tolist() == want
        assert reader.member_ids("cpu-fp32", among=ids[5:15] + [10**9]).tolist() == \
            [i for i in ids[5:15] if i in want]
        assert sp_r.vectors(want[:3]).shape == (3, sp_r.info.dim)
        assert_consistent(reader)
    finally:
        reader.close()
        writer.close()


# -- id sidecars -----------------------------------------------------------------------------
def test_each_segment_gets_an_id_sidecar_that_is_never_taken_for_a_segment(lib):
    sp = lib.ensure_space(FakeEncoder())
    ids = add_chunks(lib, 12)
    sp.add(ids[:5], unit(5))
    sp.add(ids[5:], unit(7, seed=1))
    segs = sp.raw.segment_names()
    assert len(segs) == 2 and sidecars(sp.folder) == sorted(ids_file(n) for n in segs)
    assert all(SEGMENT_RE.match(n) is None for n in sidecars(sp.folder))
    assert np.load(sp.folder / ids_file(segs[0])).tolist() == ids[:5]
    assert np.load(sp.folder / ids_file(segs[1])).tolist() == ids[5:]


def test_opening_reads_the_sidecars_not_the_id_columns(tmp_path, monkeypatch):
    with Library.open(tmp_path / "lib") as lib:
        sp = lib.ensure_space(FakeEncoder())
        ids = add_chunks(lib, 20)
        vecs = unit(20)
        sp.add(ids[:8], vecs[:8])
        sp.add(ids[8:], vecs[8:])
    forbid_id_column(monkeypatch)
    with Library.open(tmp_path / "lib") as lib:
        sp = lib.space("cpu-fp32")
        assert not any(lib.last_reconcile["cpu-fp32"].values())  # nothing lost or deleted
        assert list(sp._members) == ids and sp.raw.ids.tolist() == ids
        _s, got = sp.search(vecs[3:4], 1)
        assert got[0][0] == ids[3]


def test_a_missing_sidecar_is_written_by_the_next_open(tmp_path, monkeypatch):
    ids, _vecs, folder = one_segment_library(tmp_path / "lib", 6)
    (side,) = sidecars(folder)
    (folder / side).unlink()  # a library written before sidecars existed
    with Library.open(tmp_path / "lib") as lib:
        assert list(lib.space("cpu-fp32")._members) == ids
    assert np.load(folder / side).tolist() == ids
    forbid_id_column(monkeypatch)  # and the open after that uses it
    with Library.open(tmp_path / "lib") as lib:
        assert list(lib.space("cpu-fp32")._members) == ids


@pytest.mark.parametrize("bad", ["short", "other ids", "not an array", "empty"])
def test_a_sidecar_that_does_not_fit_its_segment_is_ignored_and_rewritten(tmp_path, bad):
    ids, _vecs, folder = one_segment_library(tmp_path / "lib", 10)
    (side,) = sidecars(folder)
    path = folder / side
    if bad == "short":
        np.save(path, np.array(ids[:-1], np.int64))
    elif bad == "other ids":  # right length: a sidecar trusted blindly would make it an orphan
        np.save(path, np.array(ids, np.int64) + 1000)
    else:
        path.write_bytes(b"torn" if bad == "not an array" else b"")
    with Library.open(tmp_path / "lib") as lib:
        sp = lib.space("cpu-fp32")
        assert not lib.last_reconcile["cpu-fp32"]["orphan_segments"]
        assert not lib.last_reconcile["cpu-fp32"]["lost"]
        assert list(sp._members) == ids and len(sp.raw.segment_names()) == 1
        assert_consistent(lib)
    assert np.load(path).tolist() == ids


def test_a_read_only_library_opens_and_writes_no_sidecar(tmp_path):
    ids, vecs, folder = one_segment_library(tmp_path / "lib", 6)
    delete_sidecars(folder)
    with Library.open(tmp_path / "lib", create=False, read_only=True) as lib:
        sp = lib.space("cpu-fp32")
        assert list(sp._members) == ids
        assert sp.search(vecs[2:3], 1)[1][0][0] == ids[2]
    assert sidecars(folder) == []


def test_a_sidecar_that_cannot_be_written_is_skipped_silently(tmp_path, monkeypatch):
    """Root may write into read-only folders: the refusal is simulated at the write."""
    ids, vecs, folder = one_segment_library(tmp_path / "lib", 6)
    delete_sidecars(folder)
    real = segments.write_atomic

    def refuse_sidecars(path, write):
        if str(path).endswith(IDS_SUFFIX):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real(path, write)

    monkeypatch.setattr(segments, "write_atomic", refuse_sidecars)
    with Library.open(tmp_path / "lib") as lib:
        sp = lib.space("cpu-fp32")
        assert list(sp._members) == ids
        assert sp.search(vecs[4:5], 1)[1][0][0] == ids[4]
        more = add_chunks(lib, 2, path="/docs/b.txt")
        sp.add(more, unit(2, seed=3))  # a new segment without its sidecar: still a member
        assert list(sp._members) == ids + more
    assert sidecars(folder) == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes to read-only folders")
def test_a_space_folder_without_write_permission_still_opens(tmp_path):
    ids, _vecs, folder = one_segment_library(tmp_path / "lib", 4)
    delete_sidecars(folder)
    folder.chmod(0o555)
    try:
        with Library.open(tmp_path / "lib") as lib:
            assert list(lib.space("cpu-fp32")._members) == ids
    finally:
        folder.chmod(0o755)
    assert sidecars(folder) == []


def test_compaction_and_unstaging_delete_sidecars_with_their_segments(lib):
    sp = lib.ensure_space(FakeEncoder())
    ids = add_chunks(lib, 40)
    for i in range(40):  # 40 one-vector segments, 40 sidecars
        sp.add([ids[i]], unit(1, seed=i))
    assert len(sidecars(sp.folder)) == 40
    with lib.write_lock():
        seg = sp.stage([ids[0]], unit(1))  # a batch whose transaction then failed
        sp.unstage(seg)
    assert len(sidecars(sp.folder)) == 40 and ids_file(seg) not in sidecars(sp.folder)
    with lib.write_lock(), lib.transaction():
        lib.db.execute("DELETE FROM chunks WHERE id = ?", [ids[1]])
    sp.forget([ids[1]])
    with lib.write_lock():
        assert sp.maintain(hnsw_threshold=10_000, factory_override=None)
    (seg,) = sp.raw.segment_names()
    assert sidecars(sp.folder) == [ids_file(seg)]
    assert np.load(sp.folder / ids_file(seg)).tolist() == [i for i in ids if i != ids[1]]
    assert_consistent(lib)


def test_reconcile_removes_sidecars_without_a_segment(tmp_path):
    ids, _vecs, folder = one_segment_library(tmp_path / "lib", 3)
    (own,) = sidecars(folder)
    stray = "seg-0000000099-deadbeef" + IDS_SUFFIX  # its segment was merged away
    np.save(folder / stray, np.array([ids[0]], np.int64))
    with Library.open(tmp_path / "lib", read_only=True) as lib:  # readers repair nothing
        assert lib.space("cpu-fp32").raw.segment_names() == [own.replace(IDS_SUFFIX, ".npy")]
    assert stray in sidecars(folder)
    with Library.open(tmp_path / "lib") as lib:
        assert lib.last_reconcile["cpu-fp32"]["stray_sidecars"] == 1
        assert list(lib.space("cpu-fp32")._members) == ids
    assert sidecars(folder) == [own]

"""Vector spaces: raw segments as the source of truth, FAISS as a rebuildable cache, the
reconcile step, factories, and the fingerprint guard.

These tests drive the library with a fake encoder identity (fingerprint parts + dim only:
spaces never call the encoder) and random unit vectors; real encoders are used in
test_library_sync.py and test_search_*.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from hefsearch.embed.fingerprint import space_fingerprint
from hefsearch.index.errors import FingerprintMismatch, SpaceError
from hefsearch.index.library import Library
from hefsearch.index.spaces import INDEX_FILE, index_ids
from tests.support.library_helpers import assert_consistent

DIM = 16


class FakeEncoder:
    """Just the identity a space records (spaces never encode)."""

    def __init__(self, model_hash="m1", kind="cpu-fp32", name="cpu"):
        self.parts = {"model_hash": model_hash, "encoder": "onnx-fp32", "pooling": "mean", "normalize": True}
        self.space_kind = kind
        self.dim = DIM
        self.backend = SimpleNamespace(name=name, label="Fake")
        self.space_name, self.space_opts, self.label = kind, {}, "Fake"

    def fingerprint_parts(self):
        return dict(self.parts)

    @property
    def fingerprint(self):
        return space_fingerprint(self.parts)


def unit(n, seed=0):
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def add_chunks(lib, n, path="/docs/a.txt"):
    """Insert one document with n chunks; returns their ids."""
    with lib.write_lock(), lib.transaction():
        lib.db.execute("INSERT INTO documents(path, size, mtime_ns, status, chunks) VALUES (?, 1, 1, 'ok', ?)",
                       [path, n])
        doc = lib.db.execute("SELECT id FROM documents WHERE path=?", [path]).fetchone()[0]
        lib.db.conn.executemany(
            'INSERT INTO chunks(doc_id, ordinal, text, start, "end", line, tokens) VALUES (?,?,?,0,1,1,1)',
            [(doc, i, f"chunk {i} of {path}") for i in range(n)])
        return [r[0] for r in lib.db.execute("SELECT id FROM chunks WHERE doc_id=? ORDER BY ordinal", [doc])]


@pytest.fixture
def lib(tmp_path):
    library = Library.open(tmp_path / "lib")
    yield library
    library.close()


def test_add_search_vectors_has(lib):
    sp = lib.ensure_space(FakeEncoder())
    ids = add_chunks(lib, 50)
    vecs = unit(50)
    sp.add(ids[:40], vecs[:40])
    assert sp.has(ids).tolist() == [True] * 40 + [False] * 10
    np.testing.assert_array_equal(sp.vectors(ids[:5]), vecs[:5])
    with pytest.raises(SpaceError, match="holds no vector"):
        sp.vectors(ids[45:])
    q = vecs[7:8]
    scores, got = sp.search(q, 5)
    expected = np.argsort(-(vecs[:40] @ q[0]), kind="stable")[:5]
    assert got[0].tolist() == [ids[i] for i in expected]
    np.testing.assert_allclose(scores[0], (vecs[:40] @ q[0])[expected], rtol=1e-5)
    # filtered: only the allowed ids, exactly scored
    allowed = set(ids[20:30])
    _, got = sp.search(q, 3, allowed=allowed)
    assert set(got[0].tolist()) <= allowed and len(got[0]) == 3
    # more than there is: empty slots are -1
    _, got = sp.search(q, 60)
    assert (got[0] >= 0).sum() == 40 and (got[0][40:] == -1).all()
    assert_consistent(lib)


def test_add_ignores_chunks_that_do_not_exist(lib):
    sp = lib.ensure_space(FakeEncoder())
    ids = add_chunks(lib, 3)
    sp.add([ids[0], 999_999], unit(2))
    assert lib.member_ids(sp.info.name).tolist() == [ids[0]]
    assert_consistent(lib)


def test_reconcile_removes_orphans_and_repairs_faiss(tmp_path):
    lib = Library.open(tmp_path / "lib")
    sp = lib.ensure_space(FakeEncoder())
    ids = add_chunks(lib, 20)
    sp.add(ids[:10], unit(10))
    sp.add(ids[10:12], unit(2, seed=2))
    # a batch whose SQLite transaction never committed: its segment is on disk, no members
    with lib.write_lock(reconcile=False):
        orphan = sp.stage(ids[12:20], unit(8, seed=1))
    lib.close()
    # a FAISS file that disagrees with SQLite both ways: lacks a member, holds a non-member
    import faiss

    index = faiss.read_index(str(sp.folder / INDEX_FILE))
    index.remove_ids(np.array([ids[0]], np.int64))
    index.add_with_ids(unit(1, seed=3), np.array([ids[15]], np.int64))
    faiss.write_index(index, str(sp.folder / INDEX_FILE))

    lib = Library.open(tmp_path / "lib")
    report = lib.last_reconcile["cpu-fp32"]
    assert report["orphan_segments"] == 1 and report["removed"] == 1 and report["added"] == 1
    assert not (sp.folder / orphan).exists()
    assert set(lib.member_ids("cpu-fp32").tolist()) == set(ids[:12])
    assert_consistent(lib)
    lib.close()


def test_missing_or_corrupt_faiss_file_is_rebuilt_from_raw_vectors(tmp_path):
    lib = Library.open(tmp_path / "lib")
    sp = lib.ensure_space(FakeEncoder())
    ids = add_chunks(lib, 30)
    vecs = unit(30)
    sp.add(ids, vecs)
    lib.close()
    (sp.folder / INDEX_FILE).write_bytes(b"not a faiss index")
    lib = Library.open(tmp_path / "lib")
    assert lib.last_reconcile["cpu-fp32"]["rebuilt"]
    _, got = lib.space("cpu-fp32").search(vecs[3:4], 1)
    assert got[0][0] == ids[3]
    assert_consistent(lib)
    lib.close()
    (sp.folder / INDEX_FILE).unlink()
    lib = Library.open(tmp_path / "lib")
    assert lib.last_reconcile["cpu-fp32"]["rebuilt"]
    assert_consistent(lib)
    lib.close()


def test_lost_raw_vectors_drop_membership(tmp_path):
    lib = Library.open(tmp_path / "lib")
    sp = lib.ensure_space(FakeEncoder())
    ids = add_chunks(lib, 10)
    sp.add(ids[:5], unit(5))
    sp.add(ids[5:], unit(5, seed=1))
    first = sp.raw.segment_names()[0]
    lib.close()
    (sp.folder / first).unlink()  # someone deleted a vector file
    lib = Library.open(tmp_path / "lib")
    assert lib.last_reconcile["cpu-fp32"]["lost"] == 5
    assert set(lib.member_ids("cpu-fp32").tolist()) == set(ids[5:])  # the next sync re-embeds the others
    assert_consistent(lib)
    lib.close()


def test_newest_segment_wins_and_compaction_keeps_members_only(lib):
    sp = lib.ensure_space(FakeEncoder())
    ids = add_chunks(lib, 40)
    for i in range(0, 40, 1):  # 40 one-vector segments
        sp.add([ids[i]], unit(1, seed=i))
    with lib.write_lock():
        sp.raw.write([ids[0]], unit(1, seed=99))  # a newer copy of the same id
    np.testing.assert_array_equal(sp.raw.get([ids[0]]), unit(1, seed=99))
    with lib.write_lock(), lib.transaction():
        lib.db.execute("DELETE FROM chunks WHERE id IN (?, ?)", [ids[1], ids[2]])
    sp.forget([ids[1], ids[2]])
    with lib.write_lock():
        assert sp.maintain(hnsw_threshold=10_000, factory_override=None)
    assert len(sp.raw.segment_names()) == 1
    assert set(sp.raw.ids.tolist()) == set(ids) - {ids[1], ids[2]}
    assert_consistent(lib)


def test_hnsw_above_threshold_and_deletions_never_returned(lib):
    lib.set_settings(hnsw_threshold=100)
    sp = lib.ensure_space(FakeEncoder())
    ids = add_chunks(lib, 300)
    vecs = unit(300)
    sp.add(ids, vecs)
    with lib.write_lock():
        sp.maintain(hnsw_threshold=lib.hnsw_threshold(), factory_override=None)
    assert sp.info.index_factory == "HNSW32"
    assert lib.spaces()[0].index_factory == "HNSW32"
    assert "HNSW" in type(__import__("faiss").downcast_index(sp.index.index)).__name__
    gone = set(ids[:20])
    with lib.write_lock(), lib.transaction():
        lib.db.execute(f"DELETE FROM chunks WHERE id IN ({','.join(map(str, gone))})")
    sp.forget(gone)  # HNSW cannot remove: tombstones, filtered at search
    for i in range(30):
        _, got = sp.search(vecs[i : i + 1], 10)
        assert not gone & set(got[0].tolist())
        if i >= 20:
            assert got[0][0] == ids[i]
    lib.close()
    lib2 = Library.open(lib.path)
    assert_consistent(lib2)
    lib2.close()


def test_user_factory_string_and_bad_factory(lib):
    lib.set_settings(index_factory="IVF4,Flat")
    sp = lib.ensure_space(FakeEncoder())
    ids = add_chunks(lib, 2000)
    vecs = unit(2000)
    sp.add(ids, vecs)
    with lib.write_lock():
        sp.maintain(hnsw_threshold=lib.hnsw_threshold(), factory_override="IVF4,Flat")
    assert sp.info.index_factory == "IVF4,Flat"
    _, got = sp.search(vecs[5:6], 1)
    assert got[0][0] == ids[5]
    from hefsearch.index.spaces import make_index

    with pytest.raises(SpaceError, match="factory"):
        make_index("NoSuchIndex,,", DIM)


def test_fingerprint_mismatch_names_the_differing_part(lib):
    lib.ensure_space(FakeEncoder(model_hash="aaa"))
    with pytest.raises(FingerprintMismatch) as e:
        lib.ensure_space(FakeEncoder(model_hash="bbb"))
    assert "model_hash" in e.value.message and "'aaa'" in e.value.message
    with pytest.raises(FingerprintMismatch):
        lib.space("cpu-fp32").check_encoder(FakeEncoder(model_hash="bbb"))
    lib.space("cpu-fp32").check_encoder(FakeEncoder(model_hash="aaa"))
    with pytest.raises(SpaceError, match="no vector space 'hef'"):
        lib.space("hef")


def test_another_process_commit_is_seen_by_an_open_reader(tmp_path):
    writer = Library.open(tmp_path / "lib")
    sp = writer.ensure_space(FakeEncoder())
    ids = add_chunks(writer, 20)
    vecs = unit(20)
    sp.add(ids[:10], vecs[:10])
    reader = Library.open(tmp_path / "lib")
    rsp = reader.space("cpu-fp32")
    assert set(index_ids(rsp.index).tolist()) == set(ids[:10])
    sp.add(ids[10:], vecs[10:])
    _, got = rsp.search(vecs[15:16], 1)  # refresh on data_version change
    assert got[0][0] == ids[15]
    with writer.write_lock(), writer.transaction():
        writer.db.execute("DELETE FROM documents")
    sp.forget(ids)
    _, got = rsp.search(vecs[15:16], 5)
    assert (got[0] == -1).all()
    reader.close()
    writer.close()

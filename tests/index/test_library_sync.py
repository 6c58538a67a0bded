"""Incremental sync with a real (tiny) encoder: only new and changed files are embedded,
deleted files leave SQLite and FAISS, failures are recorded and never lose an indexed version,
spaces are back-filled."""

from __future__ import annotations

import os

import numpy as np
import pytest

from hefsearch.embed import Encoder
from hefsearch.index.library import Library
from hefsearch.index.sync import SyncOptions, sync
from tests.support.library_helpers import assert_consistent, chunk_rows, count_passages, write_corpus


@pytest.fixture
def encoder(tiny_bert_bundle):
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        yield enc


def texts_of(library, path) -> list[str]:
    return [r[0] for r in library.query(
        "SELECT c.text FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = ? ORDER BY c.ordinal",
        [str(path)])]


def test_incremental_embeds_only_what_changed(tmp_path, encoder):
    docs = tmp_path / "docs"
    files = write_corpus(docs, n_files=8)
    lib = Library.open(tmp_path / "lib")
    seen = count_passages(encoder)
    r = sync(lib, [docs], [encoder], SyncOptions(batch_chunks=8))
    assert (r.added, r.changed, r.removed, r.unchanged, r.failed) == (8, 0, 0, 0, [])
    total = len(lib.chunk_ids())
    assert r.chunks_embedded == total == len(seen) > 8
    assert_consistent(lib)

    # unchanged folder: nothing embedded; a touched file is hashed and found unchanged
    seen.clear()
    os.utime(files[0], ns=(1, 1))
    r = sync(lib, [docs], [encoder], SyncOptions(batch_chunks=8))
    assert seen == [] and r.chunks_embedded == 0 and r.unchanged == 8

    # modify one, delete one, add one
    files[1].write_text("A completely new text about bicycles and their chains.\n\nSecond paragraph.\n")
    removed_ids = [r[0] for r in lib.query(
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = ?", [str(files[2])])]
    files[2].unlink()
    new = docs / "sub" / "new.md"
    new.parent.mkdir()
    new.write_text("# Heading\n\nA new markdown note about sailing boats.\n")
    seen.clear()
    r = sync(lib, [docs], [encoder], SyncOptions(batch_chunks=8))
    assert (r.added, r.changed, r.removed, r.unchanged) == (1, 1, 1, 6)
    assert sorted(seen) == sorted(texts_of(lib, files[1]) + texts_of(lib, new))
    assert texts_of(lib, files[2]) == []
    sp = lib.space("cpu-fp32")
    assert not sp.has(removed_ids).any()
    assert_consistent(lib)
    lib.close()

    # the result equals a clean run over the same folder
    clean = Library.open(tmp_path / "clean")
    sync(clean, [docs], [encoder])
    lib = Library.open(tmp_path / "lib")
    assert chunk_rows(lib) == chunk_rows(clean)
    lib.close()
    clean.close()


def test_failing_file_keeps_previous_version(tmp_path, encoder):
    docs = tmp_path / "docs"
    files = write_corpus(docs, n_files=3)
    lib = Library.open(tmp_path / "lib")
    sync(lib, [docs], [encoder])
    before = texts_of(lib, files[0])
    files[0].write_bytes(bytes(range(256)) * 64)  # now binary garbage
    bad = docs / "broken.txt"
    bad.write_bytes(b"\x00\x01\x02\x03" * 500)
    r = sync(lib, [docs], [encoder])
    assert r.partial
    assert [p for p, _ in r.stale] == [str(files[0])]
    assert [p for p, _ in r.failed] == [str(bad)]
    assert texts_of(lib, files[0]) == before  # the indexed version is kept
    st = lib.status()
    reasons = dict(st.failures)
    assert "previously indexed version is kept" in reasons[str(files[0])]
    assert str(bad) in reasons and reasons[str(bad)]
    assert st.stale == 1 and st.documents == 3
    # unchanged failing files are reported again but not re-extracted
    seen = count_passages(encoder)
    r = sync(lib, [docs], [encoder])
    assert seen == [] and r.partial and len(r.failed) == 1 and len(r.stale) == 1
    # fixing the file replaces the old version
    files[0].write_text("Fixed text about lighthouses.\n")
    r = sync(lib, [docs], [encoder])
    assert r.changed == 1 and texts_of(lib, files[0]) == ["Fixed text about lighthouses."]
    assert_consistent(lib)
    lib.close()


def test_unreadable_file_is_kept_and_other_roots_untouched(tmp_path, encoder):
    a, b = tmp_path / "a", tmp_path / "b"
    fa = write_corpus(a, n_files=2)
    write_corpus(b, n_files=2, seed=1)
    lib = Library.open(tmp_path / "lib")
    sync(lib, [a, b], [encoder])
    assert lib.status().documents == 4
    if os.geteuid() != 0:  # root reads everything: cannot make a file unreadable
        fa[0].chmod(0)
        r = sync(lib, [a], [encoder])
        assert r.removed == 0 and any("permission" in why for _, why in r.failed)
        fa[0].chmod(0o644)
    r = sync(lib, [a], [encoder])  # syncing root a never touches documents under b
    assert r.removed == 0 and lib.status().documents == 4
    lib.close()


def test_backfill_new_space_and_lost_vectors(tmp_path, encoder, tiny_bert_bundle):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=4)
    lib = Library.open(tmp_path / "lib")
    sync(lib, [docs], [encoder])
    total = len(lib.chunk_ids())
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as other:
        other.backend.space_name = "alt"  # a second space (as --also-fp32 adds one)
        seen_first, seen_other = count_passages(encoder), count_passages(other)
        r = sync(lib, [docs], [encoder, other])
        assert seen_first == [] and len(seen_other) == total == r.backfilled
        assert {s.name: s.count for s in lib.spaces()} == {"cpu-fp32": total, "alt": total}
        np.testing.assert_allclose(lib.space("alt").vectors(lib.chunk_ids()),
                                   lib.space("cpu-fp32").vectors(lib.chunk_ids()), atol=1e-5)
        # vectors lost on disk: reconcile drops their membership, the next sync re-embeds them
        sp = lib.space("cpu-fp32")
        seg = sp.raw.segment_names()[0]
        lost = len(sp.raw.segment_ids(seg))
        lib.close()
        (sp.folder / seg).unlink()
        lib = Library.open(tmp_path / "lib")
        assert lib.space("cpu-fp32").count == total - lost
        seen_first.clear()
        r = sync(lib, [docs], [encoder, other])
        assert len(seen_first) == lost == r.backfilled
        assert lib.space("cpu-fp32").count == total
        assert_consistent(lib)
    lib.close()


def test_progress_events(tmp_path, encoder):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=6)
    lib = Library.open(tmp_path / "lib")
    events = []
    r = sync(lib, [docs], [encoder], SyncOptions(batch_chunks=4), progress=events.append)
    phases = [e.phase for e in events]
    assert phases[0] == "scan" and phases[-1] == "done"
    done = [e.files_done for e in events if e.phase == "index"]
    assert done == sorted(done) and events[-1].files_done == 6 == events[-1].files_total
    assert events[-1].chunks_done == r.chunks_embedded
    assert any(e.eta_s is not None for e in events) and all(e.chunks_per_s >= 0 for e in events)
    lib.close()


def test_missing_root_is_an_error_and_changes_nothing(tmp_path, encoder):
    from hefsearch.base.errors import HefsearchError

    lib = Library.open(tmp_path / "lib")
    with pytest.raises(HefsearchError, match="does not exist"):
        sync(lib, [tmp_path / "nope"], [encoder])
    assert lib.status().documents == 0
    lib.close()


def test_settings_record_bundle_and_default_space(tmp_path, encoder, tiny_bert_bundle):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=1)
    lib = Library.open(tmp_path / "lib")
    sync(lib, [docs], [encoder])
    s = lib.settings()
    assert s["bundle"] == str(tiny_bert_bundle.resolve()) and s["default_space"] == "cpu-fp32"
    assert s["last_sync"]["added"] == 1
    lib.close()

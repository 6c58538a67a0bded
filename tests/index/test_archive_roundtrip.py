"""Export while a writer adds files, import on another "home" with a folder map: the same top-10,
every path under the map, and a later sync embeds only what changed. Also the snapshot protocol
against a merge that replaces segments between the SQLite backup and the segment listing."""

from __future__ import annotations

import os
import shutil
import tarfile
import threading

import numpy as np
import pytest

from hefsearch.embed import Encoder
from hefsearch.index import export as export_module
from hefsearch.index.archive import ArchiveError
from hefsearch.index.export import export_library
from hefsearch.index.library import Library
from hefsearch.index.remap import FolderMap
from hefsearch.index.restore import import_library
from hefsearch.index.sync import SyncOptions, sync
from tests.support.library_helpers import count_passages, write_corpus

QUERIES = ["invoice payment deadline", "train platform", "tomato sauce garlic", "router firmware",
           "orchestra concert", "tax return penalty"]


@pytest.fixture
def encoder(tiny_bert_bundle):
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        yield enc


def top10(lib: Library, encoder, allowed=None) -> list[list[int]]:
    q = encoder.encode_queries(QUERIES)
    _scores, ids = lib.space("cpu-fp32").search(q, 10, allowed=allowed)
    return ids.tolist()


def test_export_during_writes_then_import_with_map(tmp_path, encoder):
    old_docs = tmp_path / "pi" / "Documents"
    write_corpus(old_docs, n_files=16, paragraphs=3)
    src = tmp_path / "pi" / "library"
    with Library.open(src) as lib:
        sync(lib, [old_docs], [encoder], SyncOptions(batch_chunks=4))

    # a second process-like writer keeps adding files (batches of 4 chunks) during the export
    stop = threading.Event()
    added = []

    def writer():
        with Library.open(src) as lib, Encoder.open(encoder.bundle.path, backend="cpu", threads=1) as enc:
            i = 0
            while not stop.is_set() and i < 40:
                extra = old_docs / f"new-{i:03d}.txt"
                extra.write_text(f"Fresh note {i}: the ferry to the island leaves at noon.\n\nBring a coat {i}.\n")
                sync(lib, [old_docs], [enc], SyncOptions(batch_chunks=2))
                added.append(extra)
                i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while len(added) < 2:  # the writer is busy
            stop.wait(0.05)
        archive = tmp_path / "backup.tar"
        report = export_library(src, archive)
    finally:
        stop.set()
        thread.join()
    assert report.lost == {}

    # the new machine: the documents under another folder, copied with their mtimes
    new_home = tmp_path / "laptop"
    new_docs = new_home / "Users" / "me" / "Documents"
    shutil.copytree(old_docs, new_docs)
    target = new_home / "hefsearch" / "library"
    result = import_library(archive, target, maps=[FolderMap.parse(f"{old_docs}={new_docs}")])
    assert result.remap.outside_count == 0 and result.remap.missing_count == 0

    with Library.open(target) as new, Library.open(src, read_only=True) as old:
        paths = [r[0] for r in new.query("SELECT path FROM documents")]
        assert paths and all(p.startswith(str(new_docs) + os.sep) for p in paths)
        assert all(str(tmp_path / "pi") not in str(r) for r in new.settings().get("roots", []))
        # a committed state: every chunk has its vector, every document its chunks
        st = new.status()
        assert [s.count for s in st.spaces] == [st.chunks]
        assert new.query("SELECT COUNT(*) FROM documents d WHERE chunks != "
                         "(SELECT COUNT(*) FROM chunks c WHERE c.doc_id = d.id)") == [(0,)]
        assert report.chunks == st.chunks and report.spaces == {"cpu-fp32": st.chunks}
        # the same top-10 as the source over the same chunks (the source has more by now)
        kept = new.chunk_ids()
        assert top10(new, encoder) == top10(old, encoder, allowed=kept.tolist())
        assert len(old.chunk_ids()) >= len(kept)

    # nothing written outside the target and its parent's hidden work folders are gone
    assert sorted(p.name for p in target.parent.iterdir()) == ["library"]

    # indexed again on the new machine: only the changed file is embedded; a copy with a new
    # mtime but the same text is hashed, not embedded
    files = sorted(new_docs.glob("0*.txt"))
    os.utime(files[0], ns=(10**18, 10**18))
    files[1].write_text("A new text about bicycles and their chains.\n\nSecond paragraph.\n")
    seen = count_passages(encoder)
    with Library.open(target) as new:
        r = sync(new, [new_docs], [encoder], SyncOptions(batch_chunks=4))
    # the writer's files the snapshot did not hold yet are new here; nothing else is embedded
    later = [p for p in new_docs.iterdir() if str(p) not in paths]
    assert r.changed == 1 and r.added == len(later) and r.removed == 0
    assert r.unchanged == len(paths) - 1
    assert seen and all("bicycles" in t or "Second paragraph" in t or "ferry" in t or "coat" in t for t in seen)


def test_snapshot_retries_when_a_merge_replaces_segments(tmp_path, monkeypatch):
    lib_path = tmp_path / "lib"
    with Library.open(lib_path) as lib:
        from hefsearch.bench.query_latency import StubEncoder

        enc = StubEncoder()
        space = lib.ensure_space(enc)
        with lib.write_lock():
            for start in range(3):
                with lib.transaction():
                    doc = lib.db.conn.execute("INSERT INTO documents(path, size, mtime_ns, status, kind, chunks) "
                                              "VALUES (?, 1, 1, 'ok', 'text', 2)", [f"/d/{start}.txt"]).lastrowid
                    lib.db.conn.executemany('INSERT INTO chunks(doc_id, ordinal, text, start, "end", line, tokens) '
                                            "VALUES (?,?,?,0,1,1,1)", [(doc, o, f"t{start}{o}") for o in range(2)])
                ids = [r[0] for r in lib.query("SELECT id FROM chunks WHERE doc_id = ?", [doc])]
                space.add(ids, enc._unit(len(ids)))
        assert len(space.raw.segment_names()) == 3

    real_backup = export_module._backup
    calls = []

    def backup_then_writer_compacts(dbfile, copy):
        real_backup(dbfile, copy)
        calls.append(copy)
        if len(calls) == 1:  # between the backup and the listing: a document goes, segments merge
            with Library.open(lib_path) as lib, lib.write_lock():
                gone = [r[0] for r in lib.query("SELECT id FROM chunks WHERE doc_id = 1")]
                with lib.transaction():
                    lib.db.execute("DELETE FROM documents WHERE id = 1")
                sp = lib.space(enc.space_name)
                sp.forget(gone)
                names = sp.raw.segment_names()
                sp.raw._write_copy(sp._members.ids)  # what compact() does to a space with much garbage
                sp.raw.delete_segments(names)

    monkeypatch.setattr(export_module, "_backup", backup_then_writer_compacts)
    report = export_library(lib_path, tmp_path / "a.tar")
    # the first snapshot still named the removed chunks, whose vectors the merge dropped
    assert report.attempts == 2 and report.lost == {} and report.chunks == 4
    out = import_library(tmp_path / "a.tar", tmp_path / "restored")
    assert out.spaces[enc.space_name]["lost"] == 0
    with Library.open(tmp_path / "restored") as lib:
        assert lib.space(enc.space_name).count == 4


def test_spaces_and_no_vectors(tmp_path):
    from hefsearch.bench.query_latency import build_library, vocabulary

    build_library(tmp_path / "lib", 200, vocabulary()[:200])
    with Library.open(tmp_path / "lib") as lib:
        name = lib.space_names()[0]
    bare = export_library(tmp_path / "lib", tmp_path / "bare.tar.gz", vectors=False)
    assert bare.spaces == {} and bare.chunks == 200
    with tarfile.open(tmp_path / "bare.tar.gz") as tf:
        assert not [n for n in tf.getnames() if n.startswith("spaces/")]
    import_library(tmp_path / "bare.tar.gz", tmp_path / "bare")
    with Library.open(tmp_path / "bare") as lib:
        assert lib.space_names() == [] and lib.status().chunks == 200
        assert lib.settings().get("default_space") is None

    named = export_library(tmp_path / "lib", tmp_path / "named.tar", spaces=[name])
    assert named.spaces == {name: 200}
    with pytest.raises(ArchiveError, match="no space 'nope'"):
        export_library(tmp_path / "lib", tmp_path / "x.tar", spaces=["nope"])
    assert not (tmp_path / "x.tar").exists()
    with pytest.raises(ArchiveError, match="exists already"):
        export_library(tmp_path / "lib", tmp_path / "named.tar")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bare", "bare.tar.gz", "lib", "named.tar"]

    # an existing library is kept unless asked; with replace the archive takes its place
    with pytest.raises(ArchiveError, match="exists already"):
        import_library(tmp_path / "named.tar", tmp_path / "bare")
    with Library.open(tmp_path / "bare") as lib:
        assert lib.space_names() == []
    out = import_library(tmp_path / "named.tar", tmp_path / "bare", replace=True)
    assert out.replaced
    with Library.open(tmp_path / "bare") as lib:
        assert lib.space_names() == [name] and lib.space(name).count == 200
        vec = lib.space(name).vectors([1])
    with Library.open(tmp_path / "lib") as lib:
        assert np.array_equal(vec, lib.space(name).vectors([1]))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]

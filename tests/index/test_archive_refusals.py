"""Damaged and hostile archives are refused with a clear error and nothing written: cut short,
a changed byte, a newer format, names that climb out, links, a full disk during the import.
Also the folder map's rules (folder boundaries, the longest folder first)."""

from __future__ import annotations

import errno
import io
import json
import tarfile

import pytest

from hefsearch.bench.query_latency import build_library, vocabulary
from hefsearch.index import restore
from hefsearch.index.archive import HEADER, ArchiveError
from hefsearch.index.export import export_library
from hefsearch.index.remap import FolderMap, map_path
from hefsearch.index.restore import import_library


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    base = tmp_path_factory.mktemp("archive")
    build_library(base / "lib", 120, vocabulary()[:100])
    export_library(base / "lib", base / "good.tar")
    return base / "good.tar"


def members(path):
    with tarfile.open(path) as tf:
        return [(m, tf.extractfile(m).read() if m.isreg() else None) for m in tf.getmembers()]


def rewrite(src, dst, change):
    """A copy of the archive ``src`` with ``change(members)`` applied (a list of (TarInfo, bytes))."""
    items = change(members(src))
    with tarfile.open(dst, "w") as tf:
        for info, data in items:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return dst


def refused(archive_path, tmp_path, match):
    """Import into tmp_path/new must fail with ``match`` and leave tmp_path as it was."""
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ArchiveError, match=match) as err:
        import_library(archive_path, tmp_path / "new" / "library")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert "Nothing was" in err.value.message
    return err.value


def test_good_archive_imports(archive, tmp_path):
    out = import_library(archive, tmp_path / "new")
    assert out.manifest.chunks == 120


def test_truncated(archive, tmp_path):
    cut = tmp_path / "cut.tar"
    data = archive.read_bytes()
    with tarfile.open(archive) as tf:
        last = tf.getmembers()[-1]  # the manifest: cut inside it, inside a segment, inside the header
    for size in (last.offset_data + 10, len(data) // 2, 300):
        cut.write_bytes(data[:size])
        refused(cut, tmp_path, "damaged|cut short")


def test_wrong_checksum(archive, tmp_path):
    def flip(items):
        out = []
        for info, data in items:
            if info.name.startswith("spaces/") and info.name.endswith(".npy"):
                data = data[:-1] + bytes([data[-1] ^ 1])
            out.append((info, data))
        return out

    refused(rewrite(archive, tmp_path / "flip.tar", flip), tmp_path, "does not match its checksum")


def test_newer_format_and_schema(archive, tmp_path):
    for key in ("format", "schema"):
        def newer(items, key=key):
            out = []
            for info, data in items:
                if info.name == HEADER:
                    head = json.loads(data)
                    head[key] += 1
                    head["hefsearch"] = "99.0"
                    data = json.dumps(head).encode()
                    info.size = len(data)
                out.append((info, data))
            return out

        err = refused(rewrite(archive, tmp_path / f"{key}.tar", newer), tmp_path, "newer hefsearch")
        assert "99.0" in err.message and "pip install -U" in err.hint


@pytest.mark.parametrize("name", ["../escaped", "/tmp/absolute-escape", "spaces/../../escaped",
                                  "spaces/cpu-fp32/../../../escaped.npy", "library.db/../../x", "notes.txt"])
def test_names_outside_the_layout(archive, tmp_path, name):
    def hostile(items):
        info = tarfile.TarInfo(name)
        info.size = 4
        return [items[0], (info, b"evil"), *items[1:]]

    refused(rewrite(archive, tmp_path / "hostile.tar", hostile), tmp_path, "not part of a hefsearch library|refused")
    assert not (tmp_path.parent / "escaped").exists()


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.DIRTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE])
def test_links_and_special_files(archive, tmp_path, kind):
    def hostile(items):
        info = tarfile.TarInfo("spaces/cpu-fp32/seg-0000000099-abcd.npy")
        info.type, info.linkname = kind, "/etc/passwd"
        return [items[0], (info, None), *items[1:]]

    refused(rewrite(archive, tmp_path / "link.tar", hostile), tmp_path, "holds a")


def test_duplicate_member(archive, tmp_path):
    def twice(items):
        return [*items[:2], items[1], *items[2:]]

    refused(rewrite(archive, tmp_path / "twice.tar", twice), tmp_path, "twice")


def test_not_an_archive(tmp_path):
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"this is not a tar file at all" * 100)
    refused(junk, tmp_path, "damaged or not a hefsearch archive")


def test_disk_full_during_import(archive, tmp_path, monkeypatch):
    written = []

    def fills_up(fd, data):
        if sum(written) > 200_000:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(len(data))
        return len(data)

    monkeypatch.setattr(restore, "write_block", fills_up)
    err = refused(archive, tmp_path, "filled up")
    assert "Free disk space" in err.hint and sum(written) > 200_000


def test_no_room_at_all_is_refused_before_writing(archive, tmp_path, monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 10, 10))
    refused(archive, tmp_path, "MB free")


def test_folder_maps():
    m = [FolderMap.parse("/home/pi/Documents=/Users/me/Documents"), FolderMap.parse("/home/pi/Documents/mail=/m")]
    assert map_path("/home/pi/Documents/a.txt", m) == "/Users/me/Documents/a.txt"
    assert map_path("/home/pi/Documents/mail/x.mbox/3", m) == "/m/x.mbox/3"  # the longest folder wins
    assert map_path("/home/pi/Documents2/a.txt", m) is None  # a folder boundary, not a prefix
    assert map_path("/home/pi/Documents", m) == "/Users/me/Documents"
    for bad in ("nomap", "relative=/x", "/x=", "=/y"):
        with pytest.raises(Exception, match="--map"):
            FolderMap.parse(bad)


def test_remap_moves_documents_failures_and_remembered_folders(tmp_path):
    import os
    import sqlite3

    from hefsearch.index.library import Library
    from hefsearch.index.remap import remap_database

    new = tmp_path / "me" / "Documents"
    (new / "sub").mkdir(parents=True)
    (new / "sub" / "a.txt").write_text("a")
    odd = b"/home/pi/Documents/caf\xe9.txt"  # a name that is no UTF-8: stored with its bytes
    (new / "caf\udce9.txt").write_text("b")
    (new / "box.mbox").write_text("mail")
    with Library.open(tmp_path / "lib") as lib, lib.write_lock(), lib.transaction():
        rows = [("/home/pi/Documents/sub/a.txt", None), ("/home/pi/Documents/caf\\xe9.txt", odd),
                ("/home/pi/Documents/box.mbox/7", None), ("/home/pi/Documents/gone.txt", None),
                ("/srv/other.txt", None)]
        lib.db.conn.executemany("INSERT INTO documents(path, path_bytes, size, mtime_ns, status, kind) "
                                "VALUES (?, ?, 1, 1, 'ok', 'text')", rows)
        lib.db.execute("INSERT INTO failures(path, reason, counted_as, seen_at) VALUES "
                       "('/home/pi/Documents/bad.pdf', 'broken', 'failed', 'now')")
        lib.set_settings(roots=["/home/pi/Documents", "/srv"], bundle="/home/pi/Documents/bundle",
                         last_sync={"at": "x", "roots": ["/home/pi/Documents"]})
    con = sqlite3.connect(tmp_path / "lib" / "library.db", isolation_level=None)
    report = remap_database(con, [FolderMap.parse(f"/home/pi/Documents={new}")])
    con.close()
    assert report.moved == 4 and report.outside_count == 1 and report.outside == ["/srv/other.txt"]
    assert report.missing_count == 2 and report.missing == [f"{new}/gone.txt", "/srv/other.txt"]
    with Library.open(tmp_path / "lib") as lib:
        got = dict(lib.query("SELECT path, path_bytes FROM documents"))
        assert got[f"{new}/caf\\xe9.txt"] == os.fsencode(f"{new}/caf\udce9.txt")
        assert f"{new}/box.mbox/7" in got and got[f"{new}/sub/a.txt"] is None
        assert lib.query("SELECT path FROM failures") == [(f"{new}/bad.pdf",)]
        settings = lib.settings()
        assert settings["roots"] == [str(new), "/srv"] and settings["bundle"] == f"{new}/bundle"
        assert settings["last_sync"] == {"at": "x", "roots": [str(new)]}


def test_a_failure_after_extracting_leaves_nothing(archive, tmp_path, monkeypatch):
    def broken(staging):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(restore, "_open_once", broken)
    err = refused(archive, tmp_path, "Cannot write the library")
    assert "Input/output error" in err.message

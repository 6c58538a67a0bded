"""Export a library into one archive (:mod:`.archive`) while it is in use, without its lock.

A consistent state without stopping the writer, following the crash protocol (SQLite is the
commit point, segments are immutable and written before the commit that names them):

1. ``library.db`` is copied with SQLite's online backup in one step (one read transaction):
   the archive's committed state S. Spaces left out (``--space``, ``--no-vectors``) are
   dropped from the copy only.
2. Each exported space's segment files are listed and *opened*; an open file stays readable
   when a merge deletes its name afterwards, so what is read is what was opened.
3. Every member of S must have its vector in an opened segment. A member may miss when a merge
   or compaction replaced segments between steps 1 and 2: then the whole snapshot is taken
   again. Segments holding no member of S (a batch committed after S, or never) stay out.

The FAISS index of a flat space is left out (import rebuilds it from the vectors); a trained
one rides along as a cache that import's reconcile brings to exactly S's members.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Sequence

import numpy as np

from hefsearch.base.atomic_write import fsync_dir
from hefsearch.base.versions import hefsearch_version

from . import store
from .archive import BLOCK, DB_MEMBER, FORMAT, HEADER, MANIFEST, ArchiveError, HashingReader, write_mode
from .errors import LibraryBusy, LibraryError
from .faiss_index import INDEX_FILE, INDEX_META_FILE
from .segments import SEGMENT_RE
from .space_ids import in_sorted

#: snapshots taken before giving up on a library whose segments keep being merged away
ATTEMPTS = 5
#: gzip level of a .tar.gz: 1 compresses the database nearly as well as 6 (0.48 vs 0.44 of its
#: size) in under half the time; vectors hardly compress at any level
GZIP_LEVEL = 1
_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


@dataclass
class ExportReport:
    path: Path
    bytes: int
    documents: int
    chunks: int
    #: space name -> vectors exported
    spaces: dict[str, int]
    vectors: bool
    seconds: float
    attempts: int
    #: space -> members whose vector no segment held (unreadable in the library): left out,
    #: the next 'index' after import embeds them again
    lost: dict[str, int] = field(default_factory=dict)


@dataclass
class Snapshot:
    """A committed state of a library: a database copy and the open segment files it names."""

    db: Path
    body: dict
    files: list[tuple[str, BinaryIO]]
    lost: dict[str, int]

    def close(self) -> None:
        for _name, f in self.files:
            f.close()


def export_library(folder: Path, out: Path, *, spaces: Sequence[str] | None = None,
                   vectors: bool = True) -> ExportReport:
    """Write the library at ``folder`` to the archive ``out`` (a new file). ``spaces``: only
    these vector spaces; ``vectors=False``: none (the other end embeds again)."""
    t0 = time.perf_counter()
    folder, out = Path(folder), Path(out).expanduser()
    if not (folder / "library.db").is_file():
        raise LibraryError(f"No library at {folder}.", "Give the library with --library PATH.")
    if out.exists():
        raise ArchiveError(f"{out} exists already.", "Choose another file name, or remove the old one first.")
    if not out.parent.is_dir():
        raise ArchiveError(f"The folder {out.parent} does not exist.", "Create it, or write the archive elsewhere.")
    work = Path(tempfile.mkdtemp(prefix=".hefsearch-export-", dir=out.parent))
    partial = out.with_name(f".{out.name}.partial")
    try:
        snap, attempts = take_snapshot(folder, work, spaces, vectors)
        try:
            write_archive(partial, write_mode(out), snap)
        finally:
            snap.close()
        if out.exists():
            raise ArchiveError(f"{out} appeared while exporting.", "Choose another file name.")
        os.replace(partial, out)
        fsync_dir(out.parent)
    except OSError as e:
        raise ArchiveError(f"Cannot write the archive {out}: {e.strerror or e}.",
                           "Free disk space or write it elsewhere; nothing was left behind.") from None
    finally:
        partial.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    body = snap.body
    return ExportReport(path=out, bytes=out.stat().st_size, documents=body["documents"], chunks=body["chunks"],
                        spaces={s["name"]: s["count"] for s in body["spaces"]}, vectors=vectors,
                        seconds=time.perf_counter() - t0, attempts=attempts, lost=snap.lost)


def take_snapshot(folder: Path, work: Path, wanted: Sequence[str] | None = None,
                  vectors: bool = True) -> tuple["Snapshot", int]:
    """The library's committed state (see the module doc): the database copied into ``work``
    and the open files of its vectors; close it when written. Also (snapshot, attempts)."""
    for attempt in range(1, ATTEMPTS + 1):
        copy = work / DB_MEMBER
        copy.unlink(missing_ok=True)
        _backup(folder / "library.db", copy)
        con = sqlite3.connect(copy, isolation_level=None)
        try:
            body, members = _trim(con, folder, wanted, vectors)
            files, lost = _open_space_files(folder, members)
            last = attempt == ATTEMPTS
            if lost and not last:
                for _n, f in files:
                    f.close()
                time.sleep(0.05 * attempt)
                continue
            for space, ids in lost.items():  # unreadable in the library itself: leave them out
                con.executemany("DELETE FROM space_members WHERE space = ? AND chunk_id = ?",
                                [(space, int(i)) for i in ids])
            for s in body["spaces"]:
                s["count"] -= len(lost.get(s["name"], ()))
            con.execute("PRAGMA journal_mode=DELETE")
            if body.pop("trimmed") or lost:
                con.execute("VACUUM")
        finally:
            con.close()
        return Snapshot(copy, body, files, {k: len(v) for k, v in lost.items()}), attempt
    raise LibraryBusy("unreachable")  # pragma: no cover


def _backup(dbfile: Path, copy: Path) -> None:
    """SQLite's online backup in one step: one read transaction, so one committed state."""
    db = store.connect(dbfile, read_only=True)
    try:
        version = store.schema_version(db)
        if version > store.SCHEMA_VERSION:
            raise LibraryError(f"The library {dbfile.parent} was written by a newer hefsearch (schema {version}).",
                               "Upgrade hefsearch: pip install -U hefsearch")
        dest = sqlite3.connect(copy)
        try:
            db.conn.backup(dest)
        finally:
            dest.close()
    finally:
        db.conn.close()


def _trim(con, folder: Path, wanted, vectors: bool) -> tuple[dict, dict[str, np.ndarray]]:
    """Drop the spaces not exported from the copy; the manifest body and each kept space's members."""
    rows = con.execute("SELECT name, kind, fingerprint, parts, dim, backend, backend_opts, label, "
                       "index_factory FROM spaces ORDER BY rowid").fetchall()
    names = [r[0] for r in rows]
    unknown = [w for w in wanted or () if w not in names]
    if unknown:
        raise ArchiveError(f"The library {folder} has no space {unknown[0]!r} (spaces: {', '.join(names) or 'none'}).",
                           "Name one of its spaces with --space, or leave --space out for all.")
    keep = [n for n in names if vectors and (not wanted or n in wanted)]
    trimmed = _drop_spaces(con, names, keep)
    members = {n: np.fromiter((r[0] for r in con.execute(
        "SELECT chunk_id FROM space_members WHERE space = ? ORDER BY chunk_id", [n])), np.int64) for n in keep}
    kept_rows = [r for r in rows if r[0] in keep]
    return _manifest_body(con, folder, kept_rows, members, vectors, trimmed), members


def _drop_spaces(con, names: list[str], keep: list[str]) -> bool:
    """The spaces not in ``keep`` removed from the copy (rows and memberships; the default
    space setting too unless it names a kept one); whether any space was."""
    dropped = [n for n in names if n not in keep]
    for name in dropped:
        con.execute("DELETE FROM space_members WHERE space = ?", [name])
        con.execute("DELETE FROM spaces WHERE name = ?", [name])
    row = con.execute("SELECT value FROM settings WHERE key = 'default_space'").fetchone()
    if row is not None and json.loads(row[0]) and json.loads(row[0]) not in keep:
        con.execute("DELETE FROM settings WHERE key = 'default_space'")
    return bool(dropped)


def _manifest_body(con, folder: Path, rows, members: dict[str, np.ndarray], vectors: bool, trimmed: bool) -> dict:
    """What the archive's manifest says of the trimmed copy: its spaces, settings, roots, counts."""
    spaces = [{"name": r[0], "kind": r[1], "fingerprint": r[2], "parts": json.loads(r[3]), "dim": r[4],
               "backend": r[5], "backend_opts": json.loads(r[6]), "label": r[7], "index_factory": r[8],
               "count": len(members[r[0]])} for r in rows]
    settings = {k: json.loads(v) for k, v in con.execute("SELECT key, value FROM settings")}
    roots = settings.get("roots") or (settings.get("last_sync") or {}).get("roots") or []
    return {"spaces": spaces, "settings": settings, "roots": roots, "vectors": vectors,
            "documents": con.execute("SELECT COUNT(*) FROM documents").fetchone()[0],
            "chunks": con.execute("SELECT COUNT(*) FROM chunks").fetchone()[0],
            "source": str(folder), "trimmed": trimmed,
            "schema": con.execute("PRAGMA user_version").fetchone()[0]}


def _open_space_files(folder: Path, members: dict[str, np.ndarray]
                      ) -> tuple[list[tuple[str, BinaryIO]], dict[str, np.ndarray]]:
    """The open segments holding each space's members (and a trained index), and the members
    no opened segment holds, per space."""
    files: list[tuple[str, BinaryIO]] = []
    lost: dict[str, np.ndarray] = {}
    for space, ids in members.items():
        sub = folder / "spaces" / space
        names = sorted(n for n in os.listdir(sub) if SEGMENT_RE.match(n)) if sub.is_dir() else []
        covered = np.zeros(len(ids), bool)
        for name in names:
            try:
                f = open(sub / name, "rb")
            except FileNotFoundError:  # merged away since the listing: its successor is listed
                continue
            seg_ids = _segment_ids(f)
            hit = in_sorted(ids, seg_ids) if seg_ids is not None else np.zeros(0, bool)
            if hit.any():
                covered |= in_sorted(np.unique(seg_ids[hit]), ids)
                files.append((f"spaces/{space}/{name}", f))
            else:
                f.close()
        if not covered.all():
            lost[space] = ids[~covered]
        files += _trained_index(sub, space)
    return files, lost


def _segment_ids(f: BinaryIO) -> np.ndarray | None:
    """The id column of an open segment (None when it cannot be read: left out)."""
    try:
        version = np.lib.format.read_magic(f)
        shape, _fortran, dtype = _NPY_HEADERS[version](f)
        rows = np.memmap(f, dtype=dtype, mode="r", offset=f.tell(), shape=shape)
        return np.array(rows["id"], np.int64)
    except (ValueError, KeyError, OSError):
        return None


def _trained_index(sub: Path, space: str) -> list[tuple[str, BinaryIO]]:
    try:
        stats = json.loads((sub / INDEX_META_FILE).read_text())
        if stats.get("type", "Flat") == "Flat":
            return []
        return [(f"spaces/{space}/{INDEX_FILE}", open(sub / INDEX_FILE, "rb")),
                (f"spaces/{space}/{INDEX_META_FILE}", open(sub / INDEX_META_FILE, "rb"))]
    except (OSError, ValueError):
        return []  # no index, or replaced meanwhile: import builds one


def write_archive(dest, mode: str, snap: Snapshot) -> None:
    """Write the snapshot as an archive to ``dest``: a path (then fsynced), or a writable
    stream (with a stream mode, ``"w|"``: the server sends it as it is written)."""
    files: dict[str, dict] = {}
    header = {"format": FORMAT, "hefsearch": hefsearch_version(), "schema": snap.body["schema"]}
    kwargs = {"compresslevel": GZIP_LEVEL} if mode in ("w:gz", "w|gz") else {}
    kwargs["copybufsize"] = BLOCK  # tarfile's default 16 KB blocks cost a third of the time
    where = {"name": dest} if isinstance(dest, (str, Path)) else {"fileobj": dest}
    with tarfile.open(mode=mode, format=tarfile.PAX_FORMAT, **where, **kwargs) as tf:
        _add_bytes(tf, HEADER, json.dumps(header, indent=1).encode())
        with open(snap.db, "rb") as db:
            files[DB_MEMBER] = _add_file(tf, DB_MEMBER, db)
        for name, f in snap.files:
            files[name] = _add_file(tf, name, f)
        body = {**snap.body, "files": files, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        _add_bytes(tf, MANIFEST, json.dumps(body, indent=1, ensure_ascii=False, default=str).encode())
    if isinstance(dest, (str, Path)):
        with open(dest, "rb+") as f:
            os.fsync(f.fileno())


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, int(time.time())
    return info


def _add_bytes(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    import io

    tf.addfile(_info(name, len(data)), io.BytesIO(data))


def _add_file(tf: tarfile.TarFile, name: str, f: BinaryIO) -> dict:
    f.seek(0)
    reader = HashingReader(f)
    tf.addfile(_info(name, os.fstat(f.fileno()).st_size), reader)
    return {"size": reader.size, "sha256": reader.sha.hexdigest()}

"""Import an archive (:mod:`.archive`) into a new library folder, all or nothing.

1. :func:`~.archive.verify` reads the whole archive, writing nothing: names, member types,
   format and schema versions, sizes and checksums.
2. The members are written into a hidden folder beside the target (``.<name>.importing-*``),
   hashed again as they are written; a full disk, a changed archive or any error removes it.
3. The folder maps rewrite the stored paths (:mod:`.remap`); the library is opened once there,
   which builds each space's FAISS index from its vectors (or brings a shipped one to the
   members), then the folder is renamed into place. An existing library is replaced only when
   asked (``replace``), and never while a process writes it.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import sqlite3
import tempfile
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from hefsearch.base.atomic_write import fsync_dir, fsync_tree

from . import store
from .archive import BLOCK, DB_MEMBER, READ_ERRORS, ArchiveError, HashingReader, Manifest, damaged, verify
from .errors import LibraryBusy
from .lockfile import flock_held
from .remap import FolderMap, RemapReport, remap_database

#: writes a block of an extracted member (a module attribute: the disk-full test replaces it)
write_block = os.write


@dataclass
class ImportReport:
    path: Path
    manifest: Manifest
    remap: RemapReport
    replaced: bool = False
    #: what opening the library did per space (FAISS built, members lost)
    spaces: dict[str, dict] = field(default_factory=dict)


def import_library(archive: Path, target: Path, *, maps: Sequence[FolderMap] = (),
                   replace: bool = False) -> ImportReport:
    """Restore ``archive`` as the library ``target``; see the module doc."""
    archive, target = Path(archive).expanduser(), Path(target)
    exists = target.exists() and (not target.is_dir() or any(target.iterdir()))
    if exists and not replace:
        raise ArchiveError(f"{target} exists already and is not empty; nothing was written.",
                           "Import into a new --library PATH, or add --replace to put the archive in its place.")
    if exists and (target / "library.lock").exists() and flock_held(target / "library.lock", unknown=False):
        raise LibraryBusy(f"A process is writing the library {target}; it was not replaced.",
                          "Stop it (index, watch, serve), then import again.")
    manifest = verify(archive, store.SCHEMA_VERSION)
    try:
        made = _make_parents(target.parent)
    except OSError as e:
        raise ArchiveError(f"Cannot create {e.filename or target.parent}: {e.strerror}. Nothing was written.",
                           "Import into a folder you can write (--library PATH).") from None
    free = shutil.disk_usage(target.parent).free
    if free < manifest.total_bytes:
        _remove_made(made)
        raise ArchiveError(f"The disk holding {target.parent} has {free / 1e6:.0f} MB free; the library "
                           f"needs {manifest.total_bytes / 1e6:.0f} MB. Nothing was written.",
                           "Free disk space, or import into a --library on another disk.")
    staging = target.parent / f".{target.name}.importing-{secrets.token_hex(4)}"
    try:
        staging.mkdir()  # the mode a library folder gets (a temp folder's would be private)
        _extract(archive, staging, manifest)
        remapped = _remap(staging / DB_MEMBER, maps)
        spaces = _open_once(staging)
        fsync_tree(staging)
        replaced = _install(staging, target, exists)
    except BaseException as e:
        shutil.rmtree(staging, ignore_errors=True)
        _remove_made(made)
        if isinstance(e, OSError):  # creating the folder, opening, installing
            raise ArchiveError(f"Cannot write the library {target}: {e.strerror or e}. Nothing was kept.",
                               "Import into a folder you can write, with free space (--library PATH).") from None
        raise
    return ImportReport(path=target, manifest=manifest, remap=remapped, replaced=replaced, spaces=spaces)


def _extract(archive: Path, staging: Path, manifest: Manifest) -> None:
    """Write every member below ``staging`` (names checked by verify), hashing again."""
    try:
        with tarfile.open(archive, "r:*") as tf:
            for member in tf:
                want = manifest.files.get(member.name)
                if want is None:
                    continue  # the header and the manifest
                dest = staging.joinpath(*member.name.split("/"))
                if staging not in dest.parents:  # verify's names cannot; never write outside anyway
                    raise damaged(archive, f"{member.name} lies outside the library")
                dest.parent.mkdir(parents=True, exist_ok=True)
                reader = HashingReader(tf.extractfile(member))
                fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    for block in iter(lambda: reader.read(BLOCK), b""):
                        view = memoryview(block)
                        while view:
                            view = view[write_block(fd, view):]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                if reader.sha.hexdigest() != want["sha256"]:
                    raise ArchiveError(f"{archive} changed while it was imported ({member.name}). "
                                       "Nothing was kept.", "Import it again once it is complete.")
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise ArchiveError(f"The disk holding {staging.parent} filled up during the import (the library "
                               f"needs {manifest.total_bytes / 1e6:.0f} MB). Nothing was kept.",
                               "Free disk space, or import into a --library on another disk.") from None
        if isinstance(e, (PermissionError, FileExistsError)):
            raise ArchiveError(f"Cannot write {e.filename or staging.parent}: {e.strerror}. Nothing was kept.",
                               "Import into a folder you can write (--library PATH).") from None
        raise damaged(archive, e) from None
    except READ_ERRORS as e:
        raise damaged(archive, e) from None


def _remap(dbfile: Path, maps: Sequence[FolderMap]) -> RemapReport:
    con = sqlite3.connect(dbfile, isolation_level=None)
    try:
        return remap_database(con, maps)
    except sqlite3.Error as e:  # a full disk, mostly: SQLite needs room for its journal
        raise ArchiveError(f"Cannot rewrite the folders of the restored library in {dbfile.parent.parent}: "
                           f"{e}. Nothing was kept.", "Free disk space, then import again.") from None
    finally:
        con.close()


def _open_once(staging: Path) -> dict[str, dict]:
    """Open the restored library once: migrations, FAISS built from the vectors, reconcile."""
    from .library import Library

    with Library.open(staging, create=False, read_only=False) as lib:
        if lib.read_only:
            raise ArchiveError(f"The restored library in {staging.parent} cannot be written: "
                               f"{lib.read_only_reason}. Nothing was kept.",
                               "Import into a folder you can write, with free space (--library PATH).")
        return {name: {k: (int(v) if not isinstance(v, (bool, str)) else v) for k, v in done.items()}
                for name, done in lib.last_reconcile.items()}


def _install(staging: Path, target: Path, exists: bool) -> bool:
    """Rename the restored folder into place; an old library goes only once the new one is there."""
    old = None
    if exists:
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.replaced-", dir=target.parent))
        os.replace(target, old / "library")
    elif target.is_dir():
        target.rmdir()  # empty: rename does not replace a folder on every system
    try:
        os.replace(staging, target)
    except OSError:
        if old is not None:
            os.replace(old / "library", target)
            old.rmdir()
        raise
    fsync_dir(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return old is not None


def _make_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and missing parents; the ones created (deepest first), to undo."""
    made = []
    p = folder
    while not p.exists():
        made.append(p)
        p = p.parent
    folder.mkdir(parents=True, exist_ok=True)
    return made


def _remove_made(made: list[Path]) -> None:
    for p in made:
        try:
            p.rmdir()
        except OSError:
            break

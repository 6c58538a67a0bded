"""The library's folder: where a library lives (a name under the data folder, a path, or
$HEFSEARCH_LIBRARY), its files, whether this process may write them, and how its database is
opened (read-write, else read-only with the reason in words)."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from hefsearch.base import settings
from hefsearch.base.errors import HefsearchError
from hefsearch.base.locations import data_dir

from . import store
from .errors import LibraryError
from .lockfile import flock_held

DB_FILE = "library.db"
LOCK_FILE = "library.lock"
DEFAULT_NAME = "library"


def resolve_library_path(name_or_path: str | os.PathLike | None = None) -> Path:
    """``None`` -> $HEFSEARCH_LIBRARY or ``<data dir>/library``; a bare name (no path
    separator, not starting with ``.`` or ``~``) -> ``<data dir>/<name>``; else a path."""
    if name_or_path is None or str(name_or_path) == "":
        env = settings.LIBRARY.value()
        if env:
            return resolve_library_path(env)
        return data_dir() / DEFAULT_NAME
    text = str(name_or_path)
    is_name = (
        isinstance(name_or_path, str)
        and os.sep not in text
        and (os.altsep is None or os.altsep not in text)
        and not text.startswith((".", "~"))
    )
    return data_dir() / text if is_name else Path(text).expanduser().resolve()


def library_exists(name_or_path: str | os.PathLike | None = None) -> bool:
    """Whether a library (its ``library.db``) is at ``name_or_path`` (see
    :func:`resolve_library_path`)."""
    return (resolve_library_path(name_or_path) / DB_FILE).exists()


def discard_new_library(folder: Path, folder_existed: bool) -> None:
    """Remove a library a failed command created and never filled (its database, lock and
    empty ``spaces``; the folder too when the command made it), so no empty library stays
    behind to look like a real one."""
    for name in (DB_FILE, DB_FILE + "-wal", DB_FILE + "-shm", LOCK_FILE):
        with contextlib.suppress(OSError):
            (folder / name).unlink()
    spaces = folder / "spaces"
    if spaces.is_dir() and not any(p.is_file() for p in spaces.rglob("*")):
        shutil.rmtree(spaces, ignore_errors=True)
    if not folder_existed:
        with contextlib.suppress(OSError):
            folder.rmdir()


def connect(dbfile: Path, read_only_reason: str | None):
    """(connection, why it is read-only or None). A full disk refuses even the ``-shm`` a
    read-write connection needs: then the library is read without one."""
    def active() -> bool:
        return writer_active(dbfile.parent)

    try:
        try:
            db = store.connect(dbfile, read_only=read_only_reason is not None,
                               writer_active=active)
            return db, read_only_reason
        except LibraryError as e:
            if read_only_reason is not None or not store.refuses_writes(e):
                raise
            db = store.connect(dbfile, read_only=True, writer_active=active)
            return db, cannot_write_reason(dbfile.parent, e)
    except HefsearchError:
        raise
    except Exception as e:
        raise LibraryError(f"Cannot open {dbfile}: {e}", "Is it a hefsearch library?") from None


def cannot_write_reason(folder: Path, error: Exception) -> str:
    """Why writing failed, in words: a full disk often reaches us as an SQLite I/O error."""
    with contextlib.suppress(OSError):
        if os.statvfs(folder).f_bavail == 0:
            return "the disk holding it is full"
    return (getattr(error, "message", None) or str(error)).rstrip(".")


def writer_active(folder: Path) -> bool:
    """Whether a process holds the library's write lock (probed with a shared lock that is
    released at once; asked only when a reader must choose how to open SQLite)."""
    return flock_held(folder / LOCK_FILE, unknown=True)


def writable(folder: Path) -> bool:
    """Whether this process may write the library's files (a writer needs all three)."""
    files = [folder, folder / DB_FILE, folder / LOCK_FILE]
    return all(os.access(f, os.W_OK) for f in files if f == folder or f.exists())

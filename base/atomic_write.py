"""One way to replace a file so that a crash leaves the old file or the new one, never half.

The new content goes to a temp file in the same folder (so the rename stays on one file
system), is flushed and fsynced, renamed over the target, and the folder is fsynced so the
rename itself survives a power cut. The temp file is created with mode ``0o666`` and the
kernel applies the process umask to it, exactly as for a file made with ``open(path, "w")``:
a library or bundle shared with a group stays readable by it (``tempfile.mkstemp`` would make
every file ``0600``). Reading the umask would need ``os.umask`` to set and restore it, which
races with other threads; letting the kernel apply it does not.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any, Callable

#: temp files end with this; a folder's leftovers of a crashed writer can be found by it
TMP_SUFFIX = ".tmp"


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a rename or unlink in ``path`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _create_temp_beside(path: Path, mode: int | None = None) -> Path:
    """An empty new file next to ``path``, mode 0o666 minus the umask (applied by the kernel),
    or exactly ``mode`` when given (set before anything is written)."""
    for _attempt in range(100):
        tmp = path.with_name(f"{path.name}.{secrets.token_hex(6)}{TMP_SUFFIX}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:  # pragma: no cover - 48 random bits collided
            continue
        try:
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
        return tmp
    raise FileExistsError(f"cannot create a temp file beside {path}")  # pragma: no cover


def write_atomic(path: str | os.PathLike, write: Callable[[str], None], mode: int | None = None) -> None:
    """Replace ``path`` with what ``write(tmp_path)`` writes into the (empty) temp file; ``mode``:
    the file's permissions whatever the umask (default: as ``open(path, "w")`` would make it)."""
    path = Path(path)
    tmp = _create_temp_beside(path, mode)
    try:
        write(str(tmp))
        with open(tmp, "rb+") as f:  # the writer may have used its own handle: sync the file
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_bytes_atomic(path: str | os.PathLike, data: bytes, mode: int | None = None) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)

    write_atomic(path, write, mode)


def create_bytes_atomic(path: str | os.PathLike, data: bytes, mode: int | None = None) -> None:
    """Create ``path`` holding ``data``, whole or not at all, and never over an existing file or
    link (FileExistsError): written and fsynced beside it, then hard-linked to its name."""
    path = Path(path)
    tmp = _create_temp_beside(path, mode)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def write_json_atomic(path: str | os.PathLike, data: Any, mode: int | None = None) -> None:
    """JSON, indented, UTF-8, ending with a newline."""
    text = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"), mode)


def fsync_tree(folder: str | os.PathLike) -> None:
    """Make every file and folder under ``folder`` durable before the folder is renamed into
    place (a bundle is written whole in a temp folder, then renamed)."""
    for parent, _dirs, files in os.walk(folder):
        for name in files:
            with open(os.path.join(parent, name), "rb") as f:
                os.fsync(f.fileno())
        fsync_dir(parent)


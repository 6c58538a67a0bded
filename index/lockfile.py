"""The lock file's mechanics: an ``flock`` taken with a deadline (flock itself cannot time
out), probed without taking it, and the line naming its holder (pid, command, start time) that
another writer's :class:`~hefsearch.index.errors.LibraryBusy` message shows."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process lock, single writer assumed
    fcntl = None

#: how often a waiting writer tries the lock again
LOCK_POLL_S = 0.05


def flock_held(path: Path, *, unknown: bool = True) -> bool:
    """Whether a process holds an exclusive ``flock`` on ``path`` (probed with a shared lock,
    released at once); ``unknown`` when the file cannot be opened for another reason."""
    if fcntl is None:
        return False  # no cross-process lock here: single writer assumed
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return False
    except OSError:
        return unknown  # cannot tell
    with f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        return False



def acquire_before(lock: threading.RLock, deadline: float) -> bool:
    left = deadline - time.monotonic()
    return lock.acquire(timeout=left) if left > 0 else lock.acquire(blocking=False)



def flock_before(f, deadline: float) -> None:
    """``flock`` the file, polling until ``deadline`` (flock itself cannot time out);
    raises BlockingIOError when another process still holds it then."""
    while True:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(LOCK_POLL_S)



def _command_name() -> str:
    """'hefsearch index': the program and its verb, never its arguments (they may hold a
    private query)."""
    argv = sys.argv or [""]
    prog = Path(argv[0]).stem
    name = "hefsearch" if prog == "__main__" else prog  # python -m hefsearch
    verb = next((a for a in argv[1:] if not a.startswith("-")), "")
    return f"{name} {verb}".strip() if re.fullmatch(r"[a-z][a-z-]*", verb) else name



def write_holder(f) -> None:
    """Record who writes, for the LibraryBusy message of others (best effort: a full disk
    must not stop the lock)."""
    since = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    with contextlib.suppress(OSError):
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}, {_command_name() or 'hefsearch'}, since {since}")
        f.flush()


def read_holder(f) -> str:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        f.seek(0)
        return f.read(200).strip()
    return ""


def take_file_lock(path: Path, deadline: float, what: str):
    """The open lock file ``path``, flock'ed before ``deadline`` and naming this process as its
    holder; :class:`~hefsearch.index.errors.LibraryBusy` names the other holder (``what``: what
    it is writing to) when it is still held then."""
    from .errors import LibraryBusy

    f = open(path, "a+")
    if fcntl is not None:
        try:
            flock_before(f, deadline)
        except BlockingIOError:
            holder = read_holder(f)
            f.close()
            raise LibraryBusy(
                f"Another process{' (' + holder + ')' if holder else ''} is writing to {what}.",
                "Wait for it to finish, then run this again (searching still works meanwhile).") from None
        except BaseException:
            f.close()
            raise
    write_holder(f)
    return f


def release_file_lock(f) -> None:
    """The holder's line cleared and the file closed (closing releases the flock)."""
    with contextlib.suppress(OSError):
        f.truncate(0)
    with contextlib.suppress(OSError):
        f.close()

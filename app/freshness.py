"""How fresh a library is: when it was last synced, and whether a watcher keeps it current.

A running ``hefsearch watch`` (or ``serve --watch``) holds an exclusive ``flock`` on
``<library>/watch.lock`` for its whole life (so two watchers never follow one library, and a
watcher killed with ``kill -9`` is seen as gone at once: the kernel drops its lock) and writes
what it does to ``<library>/watch.json`` (atomic replace): pid, mode (events or polling),
folders, when it started, its last update and changes still pending. ``status``, the TUI and
every server answer read both through :func:`freshness`.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no watcher lock
    fcntl = None

WATCH_LOCK = "watch.lock"
WATCH_STATE = "watch.json"


@dataclass
class Freshness:
    #: when the last sync (full or of changed paths) finished, ISO 8601 UTC; None: never
    last_sync: str | None
    #: seconds since then
    age_s: float | None
    #: a watcher's state (None: no watcher runs)
    watcher: dict | None
    #: folders a run was stopped in and no run has finished since (the library's "unfinished")
    unfinished: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["age_s"] = None if self.age_s is None else round(self.age_s, 1)
        d["watched"] = self.watcher is not None
        return d

    def describe(self) -> str:
        """'synced 3 min ago; watched (inotify events, pid 4242), 2 changes pending'; a library
        a stopped run left unfinished says that first, not "synced" (it is not up to date)."""
        text = "no sync finished yet" if self.last_sync is None else f"synced {ago(self.age_s)}"
        if self.unfinished:
            text = (f"not up to date: a stopped run left {len(self.unfinished)} folder(s) unfinished"
                    + ("" if self.last_sync is None else f" (last sync finished {ago(self.age_s)})"))
        w = self.watcher
        if w is None:
            return text + "; not watched (run 'hefsearch watch' to keep it current)"
        text += f"; watched ({w.get('mode', '?')}, pid {w.get('pid', '?')})"
        if w.get("pending"):
            text += f", {w['pending']} change(s) pending"
        if w.get("last_error"):
            text += f"; last problem: {w['last_error']}"
        return text


def ago(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    s = max(0.0, seconds)
    if s < 90:
        return f"{s:.0f} s ago"
    if s < 5400:
        return f"{s / 60:.0f} min ago"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h ago"
    return f"{s / 86400:.0f} days ago"


def freshness(library) -> Freshness:
    settings = library.settings()
    last = (settings.get("last_sync") or {})
    at = last.get("at") if isinstance(last, dict) else None
    age = None
    if at:
        with contextlib.suppress(ValueError):
            age = time.time() - datetime.fromisoformat(at).timestamp()
    unfinished = sorted(settings.get("unfinished") or {})
    return Freshness(last_sync=at, age_s=age, watcher=watch_state(Path(library.path)), unfinished=unfinished)


def watcher_running(folder: Path) -> bool:
    """Whether a watcher holds ``<folder>/watch.lock``."""
    from hefsearch.index.lockfile import flock_held

    return flock_held(Path(folder) / WATCH_LOCK, unknown=False)


def watch_state(folder: Path) -> dict | None:
    """The running watcher's state, or None when none runs (a stale file is ignored)."""
    if not watcher_running(folder):
        return None
    try:
        return json.loads((folder / WATCH_STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"pid": None, "mode": "starting"}


class WatchLock:
    """The watcher's lock and state file (see the module doc)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._file = None
        self.state: dict = {}

    def acquire(self) -> None:
        from hefsearch.index.errors import LibraryBusy

        f = open(self.folder / WATCH_LOCK, "a+")
        if fcntl is not None:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                other = watch_state(self.folder) or {}
                raise LibraryBusy(f"Another watcher (pid {other.get('pid', '?')}) already follows the "
                                  f"library {self.folder}.",
                                  "One watcher per library is enough; stop that one first to start "
                                  "another (e.g. systemctl --user stop hefsearch-watch).") from None
        self._file = f

    def update(self, **values) -> None:
        """Merge ``values`` into the state file (atomic; best effort on a full disk)."""
        from hefsearch.base.atomic_write import write_json_atomic

        self.state.update(values, pid=os.getpid(), updated=_now())
        with contextlib.suppress(OSError):
            write_json_atomic(self.folder / WATCH_STATE, self.state)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            (self.folder / WATCH_STATE).unlink()
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

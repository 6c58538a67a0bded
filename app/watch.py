"""``hefsearch watch``: keep a library current while its folders change.

- One watcher per library, holding ``watch.lock`` and writing ``watch.json`` for ``status``,
  the TUI and the server (:mod:`hefsearch.app.freshness`).
- Events first, then the catch-up: the folder watch (``watchfiles``, inotify) starts before an
  ordinary incremental sync, so what changed while no watcher ran is indexed and nothing that
  changes during the catch-up is missed.
- Debounced, batched, changed paths only: events wait for ``step_ms`` of quiet (at most
  ``debounce_ms``); paths ``index`` would not read are dropped; the rest go through
  ``sync(..., paths=...)``, the same rules and crash-safe batches as ``index``. A changed
  ``.hefsearchignore`` re-syncs its folder.
- Polling every ``poll_interval_s`` where events do not arrive (network and FUSE mounts, from
  ``/proc/self/mountinfo``; ``--poll``/``--no-poll``; also when inotify runs out of watches).
- Sharing: the write lock is taken per run (bounded wait, then retried); encoders are closed
  after ``idle_close_s`` of quiet, so a quiet watcher holds no device. Searches never wait.
- A full rescan every ``rescan_s`` catches what events cannot see.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from hefsearch.base.errors import HefsearchError
from hefsearch.index.crawl import IGNORE_FILE, is_under

from .freshness import WatchLock
from .folders import LibraryFolders, library_folders
from .reindex import ReindexRun, reindex

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.index.crawl_options import CrawlOptions

log = logging.getLogger("hefsearch.watch")

#: filesystem types whose changes inotify does not see (changes made by other machines)
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "sshfs", "9p", "afs", "ceph", "glusterfs",
    "fuse.glusterfs", "fuse.rclone", "davfs", "fuse.davfs2", "fuse.s3fs", "lustre", "gpfs", "beegfs",
    "fuse.gcsfuse", "fuse.cephfs", "virtiofs", "vboxsf", "fuse.vmhgfs-fuse", "drvfs",
})


class WatchError(HefsearchError):
    title = "watch"


@dataclass
class WatchOptions:
    #: True: poll; False: events only; None: poll where events do not arrive (network mounts)
    poll: bool | None = None
    poll_interval_s: float = 2.0
    #: events are gathered until quiet for step_ms, at most debounce_ms
    debounce_ms: int = 1000
    step_ms: int = 200
    #: full incremental sync of every folder this often (0: only at start)
    rescan_s: float = 3600.0
    #: close the encoders (and the NPU) after this much quiet
    idle_close_s: float = 60.0
    #: seconds before paths are tried again after the library was busy or a run failed
    retry_s: float = 5.0
    #: paths per run (a copy of thousands of files is indexed in several runs, so other
    #: writers get the lock in between)
    max_paths: int = 2000


@dataclass
class WatchEvent:
    """What the watcher tells its front end (the CLI prints it)."""

    kind: str  # "start", "mode", "run", "busy", "error", "stop"
    message: str
    run: ReindexRun | None = None
    paths: int = 0
    seconds: float = 0.0


def filesystem_type(path: str | Path) -> str | None:
    """The type of the filesystem holding ``path`` (``ext4``, ``nfs4``, ``fuse.sshfs``...), from
    the longest matching mount point in ``/proc/self/mountinfo``; None when unknown."""
    real = os.path.realpath(path)
    best, kind = "", None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, rest = left.split(), right.split()
                if len(fields) < 5 or not rest:
                    continue
                mount = fields[4].replace("\\040", " ")
                if is_under(real, mount) and len(mount) >= len(best):
                    best, kind = mount, rest[0]
    except OSError:
        return None
    return kind


def choose_mode(roots: Sequence[Path], poll: bool | None) -> tuple[bool, str]:
    """(poll?, why) for these folders."""
    if poll is not None:
        return poll, "asked for" if poll else "events asked for"
    remote = [(r, t) for r in roots if (t := filesystem_type(r)) in NETWORK_FILESYSTEMS]
    if remote:
        return True, "network filesystem " + ", ".join(f"{r} ({t})" for r, t in remote)
    return False, "local filesystems"


class Watcher:
    """Follows ``folders`` (default: the library's own) and keeps the library at
    ``library_path`` current until :meth:`stop` (or the ``stop`` event given to :meth:`run`)."""

    def __init__(self, library_path, folders: Sequence[str | Path] | None = None,
                 options: WatchOptions | None = None, *, open_encoders: Callable | None = None,
                 on_event: Callable[[WatchEvent], None] | None = None):
        self.library_path = library_path
        self.folders = [Path(f).expanduser().resolve() for f in folders or ()]
        self.options = options or WatchOptions()
        self._open_encoders = open_encoders
        self.on_event = on_event or (lambda e: log.info("%s", e.message))
        self.stop_event = threading.Event()
        self._changes: queue.Queue = queue.Queue()
        self._choice = None
        self._last_used = 0.0
        self.polling = False
        self.runs = 0

    def stop(self) -> None:
        self.stop_event.set()

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> None:
        from hefsearch.index.library import Library

        library = Library.open(self.library_path, create=False)
        lock = WatchLock(Path(library.path))
        try:
            library.require_writable()
            lock.acquire()
            roots = self._roots(library)
            self.polling, why = choose_mode(roots, self.options.poll)
            lock.update(roots=[str(r) for r in roots], mode=self._mode_name(), mode_reason=why,
                        started=_utc(), pending=0)
            self.on_event(WatchEvent("start", f"watching {len(roots)} folder(s) with {self._mode_name()} "
                                              f"({why}): " + ", ".join(str(r) for r in roots)))
            watcher = self._start_events(roots, Path(library.path))
            self._catch_up(library, roots, lock)
            self._loop(library, roots, lock)
            watcher.join(timeout=2)
        finally:
            self.stop_event.set()
            self._close_encoders()
            lock.release()
            library.close()
            self.on_event(WatchEvent("stop", "watcher stopped"))

    def _roots(self, library) -> list[Path]:
        folders = LibraryFolders.of(self.folders) if self.folders else library_folders(library)
        if not folders.recorded:
            raise WatchError(f"The library {library.path} does not record which folders it indexes.",
                             "Name them: hefsearch watch FOLDER... (or index them once with "
                             "hefsearch index FOLDER).")
        for gone in folders.gone:  # folders, or files given to index
            self.on_event(WatchEvent("error", f"{gone} is not there (unmounted?); not watched, "
                                              "its documents are kept"))
        if not folders.present:
            raise WatchError("None of the library's folders is there: " + ", ".join(map(str, folders.recorded)),
                             "Mount or restore them, or name other folders: hefsearch watch FOLDER...")
        return folders.present

    def _mode_name(self) -> str:
        return f"polling every {self.options.poll_interval_s:g} s" if self.polling else "file events (inotify)"

    def _start_events(self, roots: list[Path], library_folder: Path) -> threading.Thread:
        thread = threading.Thread(target=self._events, args=(roots, library_folder), name="hefsearch-watch",
                                  daemon=True)
        thread.start()
        return thread

    def _events(self, roots: list[Path], library_folder: Path) -> None:
        """The event thread: every change set goes into the queue (the main loop filters)."""
        from watchfiles import watch

        lib = str(library_folder)
        while not self.stop_event.is_set():
            try:
                for changes in watch(*roots, watch_filter=lambda _c, p: not is_under(p, lib),
                                     debounce=self.options.debounce_ms, step=self.options.step_ms,
                                     stop_event=self.stop_event, force_polling=self.polling,
                                     poll_delay_ms=int(self.options.poll_interval_s * 1000),
                                     rust_timeout=1000, yield_on_timeout=False, raise_interrupt=False,
                                     ignore_permission_denied=True):
                    self._changes.put({p for _c, p in changes})
                return
            except Exception as e:  # inotify refused (watch limit), a root vanished ...
                if self.stop_event.is_set():
                    return
                if not self.polling and self.options.poll is not False:
                    self.polling = True
                    self._changes.put(("mode", f"file events failed ({e}); polling every "
                                               f"{self.options.poll_interval_s:g} s instead"))
                    continue
                self._changes.put(("error", f"watching failed: {e}; retrying in {self.options.retry_s:g} s"))
                self.stop_event.wait(self.options.retry_s)

    def _catch_up(self, library, roots, lock) -> None:
        """A full incremental sync: what changed while no watcher ran (retried while busy)."""
        while not self.stop_event.is_set():
            if self._sync(library, roots, None, lock, "caught up"):
                return
            self.stop_event.wait(self.options.retry_s)

    def _loop(self, library, roots, lock) -> None:
        pending: set[str] = set()
        next_rescan = time.monotonic() + self.options.rescan_s if self.options.rescan_s else None
        retry_at = 0.0
        while not self.stop_event.is_set():
            pending |= self._next_changes(lock, timeout=0.5 if pending else 1.0)
            now = time.monotonic()
            if pending and now >= retry_at:
                if not self._sync_some(library, roots, lock, pending):
                    retry_at = now + self.options.retry_s
            elif next_rescan is not None and now >= next_rescan and not pending:
                self._close_encoders()  # a new space (e.g. --also-fp32 since) gets its encoder
                if self._sync(library, roots, None, lock, "rescanned"):
                    next_rescan = now + self.options.rescan_s
            if self._choice is not None and time.monotonic() - self._last_used > self.options.idle_close_s:
                self._close_encoders()

    def _next_changes(self, lock, timeout: float) -> set[str]:
        """The paths changed since the last call, waiting up to ``timeout`` for the first; all
        that is queued behind it is taken too (one run for a burst). A message from the event
        thread (a new mode, an error) is said instead."""
        try:
            item = self._changes.get(timeout=timeout)
        except queue.Empty:
            return set()
        if isinstance(item, tuple):
            kind, message = item
            if kind == "mode":
                lock.update(mode=self._mode_name(), mode_reason=message)
            self.on_event(WatchEvent(kind if kind == "error" else "mode", message))
            return set()
        changed = set(item)
        while True:
            try:
                more = self._changes.get_nowait()
            except queue.Empty:
                return changed
            if not isinstance(more, set):
                self._changes.put(more)
                return changed
            changed |= more

    def _sync_some(self, library, roots, lock, pending: set[str]) -> bool:
        """One run over the first ``max_paths`` of ``pending`` (those done leave it), under the
        crawl options the library remembers, read once for the run; False: try again later."""
        batch = sorted(pending)[: self.options.max_paths]
        crawl = _remembered(library)
        relevant = self._relevant(library, roots, batch, crawl)
        lock.update(pending=len(pending))
        if relevant and not self._sync(library, roots, relevant, lock, "indexed", crawl):
            return False
        pending.difference_update(batch)
        lock.update(pending=len(pending))
        return True

    def _relevant(self, library, roots: list[Path], paths: list[str], crawl: "CrawlOptions | None") -> list[str]:
        """The paths worth a sync under ``crawl`` (the library's remembered options): under a
        root, not hidden below it (unless they include hidden files), and a folder, a file of a
        supported type, an ignore file (its folder is synced), or something gone under which
        documents are stored."""
        from hefsearch.index.crawl_options import CrawlOptions
        from hefsearch.readers.filetypes import indexed_suffixes, may_be_indexed

        crawl = crawl or CrawlOptions()
        suffixes = indexed_suffixes(crawl.extra_suffixes)
        out: set[str] = set()
        for p in paths:
            if p in {str(r) for r in roots if not r.is_dir()}:  # a file given to index as a root
                out.add(p)
                continue
            root = next((str(r) for r in roots if is_under(p, str(r)) and p != str(r)), None)
            if root is None:
                continue
            below = os.path.relpath(p, root).split(os.sep)
            if not crawl.include_hidden and any(part.startswith(".") and part != IGNORE_FILE for part in below):
                continue
            name = below[-1]
            if name == IGNORE_FILE:
                out.add(os.path.dirname(p))
            elif os.path.isdir(p) or may_be_indexed(p, suffixes):
                out.add(p)
            elif not os.path.lexists(p) and _has_documents_under(library, p):
                out.add(p)
        return sorted(out)

    def _sync(self, library, roots, paths: list[str] | None, lock, verb: str,
              crawl: "CrawlOptions | None" = None) -> bool:
        """One run with ``crawl`` (None: the sync reads what the library remembers); False when
        it must be tried again later (library busy, a failure)."""
        from hefsearch.index.errors import LibraryBusy
        from hefsearch.index.sync import SyncOptions

        t = time.perf_counter()
        try:
            run = reindex(library, roots, self._encoders(library), paths=paths, options=SyncOptions(crawl=crawl))
        except LibraryBusy as e:
            self.on_event(WatchEvent("busy", f"{e.message} Trying again in {self.options.retry_s:g} s."))
            lock.update(last_error="library busy (another writer)")
            return False
        except HefsearchError as e:
            self.on_event(WatchEvent("error", f"{e.message}" + (f" ({e.hint})" if e.hint else "")))
            lock.update(last_error=e.message)
            return False
        self._last_used = time.monotonic()
        self.runs += 1
        r = run.report
        seconds = time.perf_counter() - t
        what = "all folders" if paths is None else f"{len(paths)} path(s)"
        message = (f"{verb} {what} in {seconds:.2f} s: {r.added} added, {r.changed} changed, "
                   f"{r.removed} removed, {len(r.failed)} failed, {r.chunks_embedded} chunks embedded")
        lock.update(last_run=_utc(), last_error=None, runs=self.runs)
        self.on_event(WatchEvent("run", message, run=run, paths=0 if paths is None else len(paths), seconds=seconds))
        return True

    def _encoders(self, library):
        if self._choice is None:
            if self._open_encoders is not None:
                self._choice = self._open_encoders()
            else:
                from hefsearch.index.encoders import open_sync_encoders

                self._choice = open_sync_encoders(library)
        self._last_used = time.monotonic()
        return self._choice

    def _close_encoders(self) -> None:
        if self._choice is not None:
            choice, self._choice = self._choice, None
            try:
                choice.close()
            except Exception:  # pragma: no cover
                log.debug("closing the watcher's encoders failed", exc_info=True)


def _remembered(library) -> "CrawlOptions | None":
    """The crawl options the library remembers; None when it cannot be read now (the run's
    sync reads them again, or says why it cannot)."""
    from hefsearch.index.crawl_options import CrawlOptions

    try:
        return CrawlOptions.remembered(library.settings())
    except Exception:
        return None


def _has_documents_under(library, path: str) -> bool:
    from hefsearch.index import documents
    from hefsearch.base.terminal_text import printable

    return documents.any_under(library.query, printable(path))


def _utc() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")


SYSTEMD_UNIT = """\
# hefsearch watch as a systemd user service: keeps the library current while you work.
# Install:  mkdir -p ~/.config/systemd/user
#           hefsearch watch --print-systemd-unit > ~/.config/systemd/user/hefsearch-watch.service
#           systemctl --user daemon-reload && systemctl --user enable --now hefsearch-watch
#           loginctl enable-linger "$USER"    # keep it running when you are logged out (a Pi)
# Logs:     journalctl --user -u hefsearch-watch -f
# Hailo:    the service runs as you, so the NPU must be yours to open: 'hefsearch doctor' (as
#           you, not root) must find the device; 'hailortcli fw-control identify' names it. The
#           node is /dev/hailo0 (hailort-drivers 4.x to 5.2.0) or /dev/h1x-0 (5.3.0, and reported
#           with Raspberry Pi's 5.1.1 packages).
[Unit]
Description=hefsearch: keep the document library current
After=local-fs.target

[Service]
Type=simple
ExecStart={exec_start}
Restart=on-failure
RestartSec=10
Nice=10
{environment}
[Install]
WantedBy=default.target
"""


def systemd_unit(argv: Sequence[str], environment: dict[str, str] | None = None) -> str:
    """The unit text for running ``argv`` (``hefsearch watch ...``) as a user service."""
    import shlex

    env = "".join(f"Environment={shlex.quote(f'{k}={v}')}\n" for k, v in (environment or {}).items())
    return SYSTEMD_UNIT.format(exec_start=" ".join(shlex.quote(a) for a in argv), environment=env)

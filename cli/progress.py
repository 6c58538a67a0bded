"""Live progress bars on stderr: ``hefsearch index`` (files, chunks, chunks/s, ETA) and
``hefsearch backfill`` (chunks). Static tables are in render.py.

When stderr is not a terminal (a file, a pipe, the journal of a service) a live bar cannot be
drawn, so ``hefsearch index`` prints one plain line at each phase and then every
``$HEFSEARCH_PROGRESS_SECONDS`` (default 60): a long run is never silent.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from hefsearch.base import settings

PHASES = {"scan": "Scanning", "remove": "Removing deleted files", "index": "Indexing",
          "backfill": "Back-filling spaces", "done": "Done", "ocr": "OCR"}


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA --:--"
    s = int(seconds + 0.5)
    return f"ETA {s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"ETA {s // 60}:{s % 60:02d}"


DEFAULT_EVERY_S = 60.0


def _every_s() -> float:
    try:
        return max(1.0, float(settings.PROGRESS_SECONDS.value(DEFAULT_EVERY_S)))
    except ValueError:
        return DEFAULT_EVERY_S


def progress_line(ev, elapsed_s: float) -> str:
    """'Indexing: 1200/5400 files, 8300 chunks, 42.1 chunks/s, ETA 1:40, 2 failed, 5:00 elapsed'."""
    s = int(elapsed_s)
    parts = [f"{PHASES.get(ev.phase, ev.phase)}: {ev.files_done}/{ev.files_total or '?'} files",
             f"{ev.chunks_done} chunks", f"{ev.chunks_per_s:.1f} chunks/s", _eta(ev.eta_s)]
    if ev.failed:
        parts.append(f"{ev.failed} failed")
    line = ", ".join(parts + [f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d} elapsed"])
    return line + (f"; at {where_text(ev.where)}" if ev.where and ev.phase in ("index", "ocr") else "")


#: characters of the file name the live bar shows (its end: the name and the message or page)
WHERE_CHARS = 48


def where_text(where: str | None, width: int | None = None) -> str:
    """The file being read and where in it, safe for a terminal; cut from the left to ``width``."""
    from hefsearch.base.terminal_text import for_terminal

    text = for_terminal(where or "")
    return text if width is None or len(text) <= width else "…" + text[-(width - 1):]


class SyncProgress:
    """Feed it ``ProgressEvent``s (``update``); renders one live line on a terminal, else a
    plain line at each phase and every ``every_s`` seconds (see the module doc)."""

    def __init__(self, console: Console, *, every_s: float | None = None, clock=time.monotonic):
        self.console = console
        self.clock = clock
        self.every_s = _every_s() if every_s is None else every_s
        self.started = clock()
        self.last_line: tuple[float, str] | None = None  # (when, phase) of the last plain line
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} files"),
            TextColumn("{task.fields[chunks]} chunks"),
            TextColumn("{task.fields[rate]:.1f} chunks/s"),
            TextColumn("{task.fields[eta]}"),
            TextColumn("[red]{task.fields[failed]}[/]"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[where]}", markup=False),
            console=console, transient=True, disable=not console.is_terminal,
        )
        self.task = self.progress.add_task("Scanning", total=None, chunks=0, rate=0.0,
                                           eta=_eta(None), failed="", where="")

    def update(self, ev) -> None:
        if not self.console.is_terminal:
            now = self.clock()
            if self.last_line is None or self.last_line[1] != ev.phase or now - self.last_line[0] >= self.every_s:
                self.last_line = (now, ev.phase)
                self.console.print(progress_line(ev, now - self.started), markup=False, highlight=False,
                                   soft_wrap=True)
            return
        self.progress.update(
            self.task, description=(f"OCR {ev.ocr_done}/{ev.ocr_total} pages" if ev.phase == "ocr"
                                    else PHASES.get(ev.phase, ev.phase)), total=ev.files_total or None,
            completed=ev.files_done, chunks=ev.chunks_done, rate=ev.chunks_per_s, eta=_eta(ev.eta_s),
            failed=f"{ev.failed} failed" if ev.failed else "",
            where=where_text(ev.where, WHERE_CHARS) if ev.phase in ("index", "ocr") else "")

    def stop(self) -> None:
        self.progress.stop()

    def __enter__(self) -> "SyncProgress":
        self.started = self.clock()  # the sync's time, not the encoders' opening before it
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()


def backfill_progress() -> Progress:
    """'FP32 back-fill ━━━━ 120/400 chunks' and the time left; gone when done (transient)."""
    return Progress(TextColumn("FP32 back-fill"), BarColumn(), TextColumn("{task.completed}/{task.total} chunks"),
                    TimeRemainingColumn(), transient=True)

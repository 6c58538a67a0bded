"""Live progress bars on stderr: ``hefsearch index`` (files, chunks, chunks/s, ETA) and
``hefsearch backfill`` (chunks). Static tables are in render.py."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

PHASES = {"scan": "Scanning", "remove": "Removing deleted files", "index": "Indexing",
          "backfill": "Back-filling spaces", "done": "Done", "ocr": "OCR"}


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA --:--"
    s = int(seconds + 0.5)
    return f"ETA {s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"ETA {s // 60}:{s % 60:02d}"


class SyncProgress:
    """Feed it ``ProgressEvent``s (``update``); renders one live line, quiet when not a terminal."""

    def __init__(self, console: Console):
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} files"),
            TextColumn("{task.fields[chunks]} chunks"),
            TextColumn("{task.fields[rate]:.1f} chunks/s"),
            TextColumn("{task.fields[eta]}"),
            TextColumn("[red]{task.fields[failed]}[/]"),
            TimeElapsedColumn(),
            console=console, transient=True, disable=not console.is_terminal,
        )
        self.task = self.progress.add_task("Scanning", total=None, chunks=0, rate=0.0,
                                           eta=_eta(None), failed="")

    def update(self, ev) -> None:
        self.progress.update(
            self.task, description=(f"OCR {ev.ocr_done}/{ev.ocr_total} pages" if ev.phase == "ocr"
                                    else PHASES.get(ev.phase, ev.phase)), total=ev.files_total or None,
            completed=ev.files_done, chunks=ev.chunks_done, rate=ev.chunks_per_s, eta=_eta(ev.eta_s),
            failed=f"{ev.failed} failed" if ev.failed else "")

    def stop(self) -> None:
        self.progress.stop()

    def __enter__(self) -> "SyncProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()


def backfill_progress() -> Progress:
    """'FP32 back-fill ━━━━ 120/400 chunks' and the time left; gone when done (transient)."""
    return Progress(TextColumn("FP32 back-fill"), BarColumn(), TextColumn("{task.completed}/{task.total} chunks"),
                    TimeRemainingColumn(), transient=True)

"""The library screen: what is indexed (documents, chunks, spaces), what failed and why,
truncated chunks, and an incremental re-index with a progress bar.

The re-index runs in the app's thread worker (so it keeps going when this screen is closed
and searching stays responsive); this screen only shows its progress.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, ProgressBar, Static

from hefsearch.base.terminal_text import for_terminal

from ..present import space_label


def last_sync_words(status) -> str:
    """When the last run finished, or that it did not (interrupted) or is running."""
    if getattr(status, "writing", False):
        return "running now"
    if getattr(status, "interrupted", None):
        folders = getattr(status, "unfinished", None)
        where = f"; not finished: {for_terminal(', '.join(folders))}" if folders else ""
        return (f"interrupted (the run started {status.interrupted} did not finish{where}; its committed "
                "batches are kept; r finishes it)")
    return status.last_sync or "never"


class LibraryScreen(Screen):
    BINDINGS = [
        Binding("escape,f4", "app.pop_screen", "Back to search"),
        Binding("r", "app.reindex", "Re-index"),
        Binding("f5", "app.refresh_status", "Refresh"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="library-body"):
            yield Static(id="library-summary")
            yield Label("Vector spaces", classes="section")
            yield DataTable(id="spaces", cursor_type="row", zebra_stripes=True)
            yield Label("Files that could not be indexed, and files left out on purpose", classes="section")
            yield DataTable(id="failures", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="sync-row"):
            yield ProgressBar(id="sync-progress", show_eta=False)
            yield Static("Press r to re-index (new, changed and deleted files only).", id="sync-text")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#spaces", DataTable).add_columns("space", "device", "kind", "vectors", "dim", "index")
        self.query_one("#failures", DataTable).add_columns("file", "reason")
        self.query_one("#sync-progress", ProgressBar).display = False
        self.app.action_refresh_status()
        progress = getattr(self.app, "sync_progress", None)
        if progress is not None:
            self.show_progress(*progress)

    def show_status(self, status, library_path: str = "", freshness=None) -> None:
        skipped = status.skipped_text()
        notes = getattr(status, "notes", ())
        summary = Content.assemble(
            ("Library ", "bold"), (for_terminal(library_path), "$text-muted"), "\n",
            (f"{status.documents:,}", "bold"), " documents   ",
            (f"{status.chunks:,}", "bold"), " chunks   ",
            (f"{status.truncated_chunks:,}", "bold $text-warning" if status.truncated_chunks else "bold"),
            " chunks cut to fit the model window   ",
            (f"{len(status.failures):,}", "bold $text-error" if status.failures else "bold"), " failed",
            *((("   ", ""), (f"{len(notes):,}", "bold"), (" left out on purpose (listed below)", ""))
              if notes else ()),
            *((("   ", ""), (f"{stale:,}", "bold $text-warning"), (" stale (failing now; the previous "
                                                                   "version stays indexed)", ""))
              if (stale := getattr(status, "stale", 0)) else ()),
            "\n", ("folders ", "$text-muted"), (", ".join(getattr(status, "roots", ())) or "none yet", ""),
            "\n", ("last sync ", "$text-muted"), (last_sync_words(status), ""),
            (f"   skipped: {skipped}" if skipped else "", "$text-muted"),
            *((("\n", ""), ("freshness ", "$text-muted"), (freshness.describe(), "")) if freshness is not None else ()),
        )
        self.query_one("#library-summary", Static).update(summary)
        spaces = self.query_one("#spaces", DataTable)
        spaces.clear()
        for info in status.spaces:
            spaces.add_row(info.name, space_label(info), info.kind,
                           Text(f"{info.count:,}", justify="right"), Text(str(info.dim), justify="right"),
                           info.index_factory or "")
        failures = self.query_one("#failures", DataTable)
        failures.clear()
        for path, reason in status.failures:  # Text: a str cell is read as markup ("[/]x.txt")
            failures.add_row(Text(for_terminal(path)), Text(for_terminal(reason)))
        for path, reason in notes:  # not failures: a symlink not followed, a special file
            failures.add_row(Text(for_terminal(path), style="dim"), Text(for_terminal(f"left out: {reason}"), style="dim"))
        if not status.failures and not notes:
            failures.add_row("—", "none")

    def show_progress(self, done: int | None, total: int | None, text: Content) -> None:
        bar = self.query_one("#sync-progress", ProgressBar)
        bar.display = True
        bar.update(total=total, progress=done or 0)
        self.query_one("#sync-text", Static).update(text)  # Content (app._progress): file names are not markup

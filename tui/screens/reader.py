"""The reader: a document's text as the library holds it (its chunks in order, the hit marked
and scrolled to), inside the TUI. Ctrl+O opens it where a hit's file needs a desktop program and
there is no desktop (a Pi over SSH): the text hefsearch indexed, OCR text of a scan included.
"""

from __future__ import annotations

import asyncio

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from hefsearch.base.terminal_text import for_terminal

from ..widgets import PreviewPane

#: chunks shown before and after the hit (a book stays readable; the rest is a search away)
READER_AROUND = 200


class ReaderScreen(Screen):
    BINDINGS = [Binding("escape,q", "app.pop_screen", "Back to search")]

    def __init__(self, hit, session, query: str = "", reason: str = "") -> None:
        super().__init__()
        self.hit, self.session, self.search_query, self.reason = hit, session, query, reason

    def compose(self) -> ComposeResult:
        yield Static(for_terminal(self.reason + "\nBelow: the text hefsearch indexed from it. Esc goes back.",
                                  multiline=True), id="reader-reason", markup=False)
        yield PreviewPane(id="reader")
        yield Footer()

    async def on_mount(self) -> None:
        pane = self.query_one("#reader", PreviewPane)
        pane.focus()
        try:
            records = await asyncio.to_thread(self.session.neighbours, self.hit, READER_AROUND)
        except Exception as e:  # a library that cannot be read now: say so, keep the TUI
            pane.clear(f"cannot read the document's text: {for_terminal(str(e))}")
            return
        await pane.show(self.hit, records, self.search_query)

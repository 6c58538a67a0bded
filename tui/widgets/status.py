"""The status line (device, space, library size, mode, latency, indexing) and the notice bar
that appears when the NPU failed and the FP32 space answered instead."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from ..present import ms


class StatusBar(Static):
    backend = reactive("")
    space = reactive("")
    documents = reactive(-1)
    chunks = reactive(-1)
    mode = reactive("")
    latency = reactive(-1.0)
    activity = reactive("")
    indexing = reactive("")
    #: 'watched' or 'synced 3 min ago' (hefsearch.app.freshness)
    freshness = reactive("")

    def render(self) -> Content:
        sep = (" │ ", "$text-muted")
        parts: list = [("● ", "$text-success"), (self.backend or "no space yet", "bold")]
        if self.space:
            parts += [sep, (self.space, "bold")]
        if self.documents >= 0:
            parts += [sep, (f"{self.documents:,} docs · {self.chunks:,} chunks", "")]
        if self.mode:
            parts += [sep, (self.mode, "$text-accent")]
        if self.latency >= 0:
            parts += [sep, (ms(self.latency), "")]
        if self.activity:
            parts += [sep, (self.activity, "$text-warning")]
        if self.indexing:
            parts += [sep, (self.indexing, "$text-warning")]
        if self.freshness:
            parts += [sep, (self.freshness, "$text-muted")]
        return Content.assemble(*parts)


class NoticeBar(Static):
    """Hidden unless there is something the user must not miss (e.g. the FP32 fallback)."""

    def show(self, notice: str | None) -> None:
        # Content, not markup: a notice quotes queries, file names and error messages
        self.update(Content(f"⚠ {notice}") if notice else "")
        self.set_class(bool(notice), "visible")

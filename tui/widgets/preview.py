"""The preview pane: the hit in its document context (neighbouring chunks), scrolled to it."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from ..present import grouping_tag, location, query_terms, short_path, shown_text
from ._text import highlighted


def context_pieces(records, hit) -> list[tuple[str, bool]]:
    """(text, is_hit) in document order, without repeating the overlap between chunks.

    Chunks overlap by design (``overlap_tokens``); each chunk's text equals the document's
    text over [start, end), so the pieces are cut by char offsets: context before the hit
    stops where the hit starts, context after it starts where the previous piece ended.
    """
    spans = [(r.start, r.end, r.text, False) for r in records if r.id != hit.chunk_id]
    spans.append((hit.start, hit.end, hit.text, True))
    spans.sort(key=lambda s: (s[0], not s[3]))
    pieces: list[tuple[str, bool]] = []
    cursor = None
    for start, end, text, is_hit in spans:
        lo = start if cursor is None or is_hit else max(start, cursor)
        hi = min(end, hit.start) if (not is_hit and start < hit.start) else end
        if hi <= lo:
            continue
        piece = text[lo - start : hi - start]
        if piece.strip():
            pieces.append((piece.strip("\n"), is_hit))
        cursor = hi
    return pieces


class PreviewPane(VerticalScroll):
    """Shows one hit with the chunks around it; the hit is marked and scrolled into view."""

    can_focus = True

    def on_mount(self) -> None:
        self.border_title = "preview"

    def clear(self, message: str = "") -> None:
        self.remove_children(".piece")
        self.border_title = "preview"
        self.border_subtitle = message

    async def show(self, hit, records, query: str) -> None:
        terms = query_terms(query)
        self.border_title = Content.assemble((short_path(hit.path, 3), "bold"), "  ", (location(hit), ""))
        extra = grouping_tag(hit)
        self.border_subtitle = f"#{hit.rank} · score {hit.shown_score:.3f}" + (f" · {extra}" if extra else "")
        await self.remove_children(".piece")
        pieces = context_pieces(records, hit)
        widgets = []
        target = None
        for text, is_hit in pieces:
            w = Static(highlighted(shown_text(text), terms if is_hit else ()),
                       classes="piece hit" if is_hit else "piece context")
            widgets.append(w)
            if is_hit:
                target = w
        await self.mount_all(widgets)
        if target is not None:
            self.call_after_refresh(self.scroll_to_widget, target, top=True, animate=False)

    @property
    def hit_widget(self) -> Static | None:
        found = self.query(".hit")
        return found.first() if found else None

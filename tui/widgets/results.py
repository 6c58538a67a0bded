"""The ranked results list: rank, score, file, page/line, and the snippet with the query
terms highlighted."""

from __future__ import annotations

from textual import on
from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ..messages import HitChosen
from ..present import grouping_tag, location, one_line, query_terms, short_path
from ._text import highlighted

SNIPPET_CHARS = 220
INDENT = 5


def hits_in_view(hits: list, scroll_y: int, height: int, highlighted: int | None, rows_per_hit: int) -> list:
    """The hits a list scrolled to ``scroll_y`` rows shows in ``height`` rows when each takes
    at least ``rows_per_hit`` rows (so never fewer than are really shown), and the highlighted one."""
    first = max(0, scroll_y // rows_per_hit)
    last = first + max(1, height or 24) // rows_per_hit + 1
    shown = list(range(first, min(len(hits), last)))
    if highlighted is not None and highlighted < len(hits) and highlighted not in shown:
        shown.append(highlighted)
    return [hits[i] for i in shown]


def sources_tag(hit) -> str:
    """For hybrid hits: which retrievers found it, e.g. "vec 2 · kw 1"."""
    src = getattr(hit, "sources", None) or {}
    names = {"vector": "vec", "keyword": "kw"}
    return " · ".join(f"{names.get(k, k)} {v}" for k, v in src.items() if v is not None)


def relevance_rule(relevance: dict, width: int) -> Content:
    """'── weaker matches below (cosine under 0.818) ──': above the first hit under the line."""
    text = f" weaker matches below (cosine under {relevance['threshold']:.3f}) "
    return Content.styled(("──" + text).ljust(max(len(text) + 4, width - 1), "─"), "$text-warning")


def hit_prompt(hit, terms, width: int = 80, lines: int = 2, relevance: dict | None = None) -> Content:
    """Two-part option: a head line (rank, score, file, place) and the snippet wrapped to
    ``lines`` indented lines, query terms highlighted; then, for a hit standing for more chunks
    of its file or for copies in other files, a line saying so. ``relevance``: the answer's
    line, drawn above this hit when it is the first one below it."""
    head = Content.assemble(
        (f"{hit.rank:>2} ", "bold $text-primary"),
        (f" {hit.shown_score:6.3f} ", "$text-muted"),
        (f" {short_path(hit.path)}", "bold"),
        (f"  {location(hit)}", "$text-muted"),
    )
    tag = sources_tag(hit)
    if tag:
        head = head + Content.styled(f"  [{tag}]", "$text-secondary")
    text = one_line(hit.snippet or hit.text)[:SNIPPET_CHARS * 2]
    room = max(20, width - INDENT - 3)
    # Content.wrap counts terminal cells, so CJK text (two cells a character) fits too
    wrapped = highlighted(text, terms).wrap(room) or [Content("")]
    if len(wrapped) > lines:
        wrapped = wrapped[:lines]
        wrapped[-1] = (wrapped[-1] + " …").truncate(room, ellipsis=True)
    body = [Content.assemble(" " * INDENT, line.rstrip()) for line in wrapped]
    grouped = grouping_tag(hit)  # its own line: a file name cut off would say nothing
    if grouped:
        body.append(Content.styled(" " * INDENT + grouped, "$text-accent").truncate(room + INDENT, ellipsis=True))
    first_weak = relevance is not None and hit.rank == relevance["above"] + 1
    rule = [relevance_rule(relevance, width).truncate(max(20, width - 1))] if first_weak else []
    return Content("\n").join([*rule, head.truncate(max(20, width - 1), ellipsis=True), *body])


class ResultsList(OptionList):
    """Shows a SearchResult; highlighting a row posts :class:`HitChosen` for the preview."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hits: list = []
        self._result = None

    def welcome(self) -> None:
        self.clear_options()
        self.add_option(Option(Content.assemble(
            ("Type a query and press Enter.", "bold"), "\n",
            ("F2 switches vector / keyword / hybrid · F3 compares the NPU with FP32 · "
             "F4 shows the library · Ctrl+O opens a hit in your editor", "$text-muted")), disabled=True))

    def show(self, result, keep_highlight: bool = False) -> None:
        highlighted_index = self.highlighted if keep_highlight else 0
        self._result = result
        self.hits = list(result.hits)
        terms = query_terms(result.query)
        width = self.scrollable_content_region.width or self.size.width or 80
        self.clear_options()
        if not self.hits:
            self.add_option(Option(Content.styled(f"No results for {result.query!r}.", "$text-muted"),
                                   disabled=True))
            return
        line = getattr(result, "relevance", None)
        self.add_options(Option(hit_prompt(h, terms, width, relevance=line), id=str(i))
                         for i, h in enumerate(self.hits))
        self.highlighted = highlighted_index or 0

    def on_resize(self) -> None:
        if self._result is not None and self.hits:
            self.show(self._result, keep_highlight=True)

    def update_snippets(self, chunk_ids: set[int]) -> None:
        """Redraw the rows of these hits (their snippets changed) in place: the highlight, the
        scroll position and the preview stay."""
        if self._result is None:
            return
        terms = query_terms(self._result.query)
        width = self.scrollable_content_region.width or self.size.width or 80
        for i, hit in enumerate(self.hits):
            if hit.chunk_id in chunk_ids:
                self.replace_option_prompt_at_index(i, hit_prompt(hit, terms, width,
                                                                  relevance=getattr(self._result, "relevance", None)))

    def visible_hits(self) -> list:
        """The hits on screen (about: each takes 2-3 rows), plus the highlighted one."""
        return hits_in_view(self.hits, self.scroll_offset.y, self.size.height, self.highlighted,
                            rows_per_hit=2)

    @property
    def current_hit(self):
        i = self.highlighted
        if i is None or not self.hits or i >= len(self.hits):
            return None
        return self.hits[i]

    @on(OptionList.OptionHighlighted)
    def _on_highlight(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        hit = self.current_hit
        if hit is not None:
            self.post_message(HitChosen(hit))

    @on(OptionList.OptionSelected)
    def _on_select(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        hit = self.current_hit
        if hit is not None:
            self.post_message(HitChosen(hit))

"""The compare view: the same query in the NPU space and the FP32 space, side by side.

Each side lists its hits; a chunk found by both shows the other side's rank ("=" the same
rank, "↔3" rank 3 over there); a chunk found by one side only is marked "◆ only". The summary shows overlap@k and rank-biased overlap (computed by the search API's
``compare``), and each side shows its latency split into encode / search / fetch.
In narrow terminals the two sides stack vertically (breakpoints in app.tcss).
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ..messages import HitChosen
from ..present import (fit_name, location, one_line, query_terms, rank_move, ranks, short_path,
                       timing_parts)
from ._text import highlighted
from .results import hits_in_view


def meter(fraction: float, cells: int = 10) -> Content:
    """A small bar: ▰▰▰▰▰▰▰▱▱▱ for 0.7."""
    full = max(0, min(cells, round(fraction * cells)))
    return Content.assemble(("▰" * full, "$text-success"), ("▱" * (cells - full), "$text-muted"))


class CompareColumn(Vertical):
    """One side of the comparison."""

    def __init__(self, side: str, **kwargs):
        super().__init__(**kwargs)
        self.side = side
        self.hits: list = []
        self._result = None
        self._other: dict[int, int] = {}
        self._only: set[int] = set()

    def compose(self) -> ComposeResult:
        yield Static("", classes="timings")
        yield OptionList(classes="side-hits")

    @property
    def hit_list(self) -> OptionList:
        return self.query_one(".side-hits", OptionList)

    def show(self, title: tuple[str, ...], result, other_result, only: set[int]) -> None:
        label, space, *how = title
        self.border_title = Content.assemble((label, "bold"), *((f" · {h}", "italic") for h in how),
                                             "  ", (space, "$text-muted"))
        self._result = result
        self.hits = list(result.hits)
        self._other = ranks(other_result)
        self._only = set(only)
        self.query_one(".timings", Static).update(self._timings_line(result))
        self.border_subtitle = f"{len(self.only_ids())} only here"
        self.render_hits()

    def _timings_line(self, result) -> Content:
        """Where this side's time went: "encode 3.1 search 0.4 fetch 1.2 snippet 40 ms  total
        45 ms", with shorter labels (and no total) when the column is narrow."""
        parts = dict(timing_parts(result.timings))
        width = max(0, (self.size.width or 80) - 4)
        order = ("encode", "search", "keyword", "rerank", "fetch", "snippet")
        medium = {"encode": "enc", "keyword": "kw", "snippet": "snip"}
        short = {"encode": "enc", "search": "srch", "keyword": "kw", "rerank": "rr", "fetch": "fet",
                 "snippet": "snip"}
        for labels, with_total in ((None, True), (None, False), (medium, False), (short, False)):
            pieces = [((labels or {}).get(n, n), parts[n].removesuffix(" ms")) for n in order if n in parts]
            line = Content.assemble(*[p for name, value in pieces
                                      for p in ((f"{name} ", "$text-muted"), (value, "bold"), (" ", ""))])
            line = line + Content.styled("ms", "$text-muted")
            if with_total and "total" in parts:
                line = line + Content.assemble(("  total ", "$text-muted"), (parts["total"], "bold"))
            if line.cell_length <= width:
                break
        return line

    def only_ids(self) -> list[int]:
        return [h.chunk_id for h in self.hits if h.chunk_id in self._only]

    def render_hits(self) -> None:
        if self._result is None:
            return
        width = max(20, self.hit_list.size.width or self.size.width or 40)
        terms = query_terms(self._result.query)
        options = []
        for i, hit in enumerate(self.hits):
            only = hit.chunk_id in self._only
            move = rank_move(hit, self._other)
            mark = ("◆   ", "bold $text-warning") if only else (f"{move:<4}", "$text-success")
            loc = location(hit)
            name = fit_name(short_path(hit.path, 1), max(8, width - 18 - len(loc)))
            head = Content.assemble(
                (f" {hit.rank:>2} ", "bold $text-primary"), mark, (f" {hit.shown_score:5.3f} ", "$text-muted"),
                (name, "bold $text-warning" if only else "bold"), (f" {loc}", "$text-muted"),
            )
            snippet = highlighted(one_line(hit.snippet or hit.text)[: width * 2], terms,
                                  base="$text-muted").truncate(max(10, width - 7), ellipsis=True)
            options.append(Option(Content.assemble(head.truncate(width - 2, ellipsis=True), "\n    ",
                                                   snippet), id=str(i)))
        lst = self.hit_list
        lst.clear_options()
        if options:
            lst.add_options(options)
        else:
            lst.add_option(Option(Content.styled("no results", "$text-muted"), disabled=True))

    def visible_hits(self) -> list:
        """The hits on screen in this column (two rows each), plus the highlighted one."""
        lst = self.hit_list
        return hits_in_view(self.hits, lst.scroll_offset.y, lst.size.height, lst.highlighted, rows_per_hit=2)

    @property
    def current_hit(self):
        i = self.hit_list.highlighted
        return self.hits[i] if i is not None and i < len(self.hits) else None

    @on(OptionList.OptionHighlighted)
    def _on_highlight(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if self.current_hit is not None:
            self.post_message(HitChosen(self.current_hit))

    def on_resize(self) -> None:
        if self._result is not None:
            self.query_one(".timings", Static).update(self._timings_line(self._result))
        self.render_hits()


class CompareView(Vertical):
    """Summary line plus the two columns (NPU left, FP32 right)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.comparison = None
        self.k = 10

    def compose(self) -> ComposeResult:
        yield Static(Content.styled(
            "Compare the NPU space with the FP32 space: type a query and press Enter.", "$text-muted"),
            id="compare-summary")
        with Horizontal(id="compare-columns"):
            yield CompareColumn("left", id="compare-left", classes="side")
            yield CompareColumn("right", id="compare-right", classes="side")

    @property
    def left(self) -> CompareColumn:
        return self.query_one("#compare-left", CompareColumn)

    @property
    def right(self) -> CompareColumn:
        return self.query_one("#compare-right", CompareColumn)

    def unavailable(self, why: str) -> None:
        self.query_one("#compare-summary", Static).update(Content.styled(why, "$text-warning"))

    def show(self, comparison, k: int, titles: tuple[tuple[str, str], tuple[str, str]],
             reranked: bool = False) -> None:
        self.comparison = comparison
        self.k = k
        summary = Content.assemble(
            (f"overlap@{k} ", "$text-muted"), (f"{comparison.overlap_at_k:.2f} ", "bold"),
            meter(comparison.overlap_at_k),
            ("  RBO ", "$text-muted"), (f"{comparison.rbo:.2f} ", "bold"), meter(comparison.rbo),
            ("  ◆ ", "bold $text-warning"),
            (f"{len(comparison.only_left)} NPU-only", "$text-accent"), (" · ", "$text-muted"),
            (f"{len(comparison.only_right)} FP32-only", "$text-primary"),
        )
        self.query_one("#compare-summary", Static).update(summary)
        how = "re-ranked by FP32" if reranked else "raw"
        self.left.show((*titles[0], how), comparison.left, comparison.right, comparison.only_left)
        self.right.show(titles[1], comparison.right, comparison.left, comparison.only_right)

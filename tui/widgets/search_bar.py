"""The search bar: query input with history, mode switch, path glob and file-type filters, and
a filter line for dates, types and languages (``since:7d lang:de type:pdf``)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import Input, Select

from hefsearch.app.searching import is_blank, parse_filter_line
from hefsearch.search.request import MODES
from hefsearch.base.errors import HefsearchError
from hefsearch.base.terminal_text import for_terminal
from hefsearch.search.filters import Filters
from hefsearch.search.request import SearchRequest

from ..history import QueryHistory
from ..messages import BlankQuerySubmitted, SearchRequested
from ..present import KIND_FILTERS


class QueryInput(Input):
    """An Input whose Up/Down walk the query history; Tab, and Down past the newest query, go
    to the results (the mode and filter fields are Shift+Tab away from there)."""

    BINDINGS = [
        Binding("up", "history_older", "Older query", show=False),
        Binding("down", "history_newer", "Newer query", show=False),
        Binding("tab", "app.focus_results", "Results", show=False),
    ]

    def __init__(self, history: QueryHistory, **kwargs):
        super().__init__(**kwargs)
        self.history = history

    def _recall(self, value: str | None) -> None:
        if value is not None:
            self.value = value
            self.cursor_position = len(value)

    def action_history_older(self) -> None:
        self._recall(self.history.older(self.value))

    def action_history_newer(self) -> None:
        newer = self.history.newer()
        if newer is None:  # not walking the history: Down goes to the results
            self.app.action_focus_results()
        self._recall(newer)


class SearchBar(Horizontal):
    """Posts :class:`SearchRequested` on Enter, on a mode/filter change, and (when
    ``live``) shortly after typing stops."""

    DEBOUNCE_SECONDS = 0.35

    def __init__(self, history: QueryHistory, *, mode: str = "hybrid", k: int = 10,
                 live: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.history = history
        self._mode = mode
        self.k = k
        self.live = live
        self._debounce: Timer | None = None

    PLACEHOLDER = "Search your documents…  (Enter)"

    def compose(self) -> ComposeResult:
        yield QueryInput(self.history, placeholder=self.PLACEHOLDER, id="query")
        yield Select([(m, m) for m in MODES], value=self._mode, allow_blank=False, id="mode",
                     tooltip="Search mode (F2 cycles)")
        yield Input(placeholder="path glob", id="glob", tooltip="Only paths matching this glob, e.g. *notes*")
        yield Select([(label, label) for label in KIND_FILTERS], value="all",
                     allow_blank=False, id="kind", tooltip="File type")
        yield Input(placeholder="since:7d lang:de type:pdf", id="filters",
                    tooltip="Filters: since:/until: a date (2024-03-01) or an age (7d, 2w, 1y); "
                            "type: pdf, docx, epub, mbox, png, ...; lang: de, en, ...; path: a glob. Enter applies them.")

    # -- state -------------------------------------------------------------------------
    @property
    def query_input(self) -> QueryInput:
        return self.query_one("#query", QueryInput)

    @property
    def mode(self) -> str:
        return str(self.query_one("#mode", Select).value)

    @mode.setter
    def mode(self, value: str) -> None:
        self.query_one("#mode", Select).value = value

    def show_like(self, what: str | None) -> None:
        """After "more like this" (``what``: what the results are like) the box no longer holds
        the query they answer: it is emptied and says what they are like; ``None`` after a
        search puts the usual prompt back."""
        box = self.query_input
        if what is None:
            box.placeholder = self.PLACEHOLDER
            return
        with box.prevent(Input.Changed):  # emptying the box is not typing (no live search)
            box.value = ""
        box.placeholder = f"{for_terminal(what)}  ·  type a new query (Enter)"

    def cycle_mode(self) -> str:
        nxt = MODES[(MODES.index(self.mode) + 1) % len(MODES)]
        self.mode = nxt  # the Select posts Changed, which re-runs the search
        return nxt

    def build_request(self) -> SearchRequest:
        glob = self.query_one("#glob", Input).value.strip() or None
        kinds = KIND_FILTERS.get(str(self.query_one("#kind", Select).value))
        filters = Filters.of(self.filters(), path_glob=glob, kinds=kinds)  # the fields and the filter line
        # snippets by meaning are asked per visible hit (the app's snippets worker), not here
        return SearchRequest(query=self.query_input.value.strip(), mode=self.mode, k=self.k, filters=filters,
                             snippets="quick")

    def filters(self) -> Filters:
        """The filter line, parsed; an entry it cannot read is said once and left out."""
        text = self.query_one("#filters", Input).value
        try:
            return parse_filter_line(text)
        except HefsearchError as e:
            self.notify(for_terminal(f"{e.message} {e.hint or ''}".strip()), title="Filter not applied", severity="error",
                        markup=False)
            return Filters()

    def submit(self) -> None:
        if self._debounce is not None:
            self._debounce.stop()
            self._debounce = None
        request = self.build_request()  # the filter line is read (and its errors said) either way
        if not is_blank(request.query):
            self.post_message(SearchRequested(request))

    # -- events ------------------------------------------------------------------------
    @on(Input.Submitted)
    def _on_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id == "query":
            if is_blank(event.value):
                # handled here, after the keys typed before Enter (an app-level Enter binding
                # ran before the input had them and swallowed fast-typed queries)
                self.post_message(BlankQuerySubmitted())
                return
            self.history.add(event.value)
        self.submit()

    @on(Select.Changed)
    def _on_select(self, event: Select.Changed) -> None:
        event.stop()
        if self.is_mounted and self.query_input.value.strip():
            self.submit()

    @on(Input.Changed, "#query")
    def _on_typing(self, event: Input.Changed) -> None:
        if not self.live:
            return
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(self.DEBOUNCE_SECONDS, self.submit)

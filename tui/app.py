"""``HefsearchApp``: search, read and compare NPU vs FP32 results in the terminal.

The app holds no search logic. Widgets post request messages; the app calls its one
:class:`~hefsearch.tui.session.TuiSession` (search, compare, neighbours, status, re-index,
open a hit) in thread workers, and the workers post typed dataclass messages back
(:mod:`hefsearch.tui.messages`). What the user chose at start is a frozen
:class:`~hefsearch.tui.settings.TuiSettings`. Build it with :func:`hefsearch.tui.factory.make_app`.

Results appear at once: a search embeds no snippet sentences. Hits whose snippet needs the
meaning (``SearchResult.pending_snippets``, typically cross-lingual hits) show their first
sentence, and a ``snippets`` worker then asks the searcher for semantic snippets of the hits on
screen (and of any pending hit highlighted later), on the CPU in FP32 with per-chunk caching;
the list is redrawn when they arrive, if the result is still the one shown (inside every query
they would cost 200-300 ms on the CPU and 700+ ms in the 8-bit simulation).

Nothing a user's files or queries hold is read as markup: file names, chunk text, snippets and
error messages reach the screen as ``Content``/``Text`` objects, and notifications are sent
with ``markup=False`` (a file named ``[/]x.txt`` used to crash the library screen). Nor does
any of it drive the terminal: it goes through :func:`~hefsearch.base.terminal_text.for_terminal`
(``present.short_path``, ``one_line``, ``shown_text``, the library screen, notifications), so
ESC sequences, BEL, newlines and bidi overrides in a name or a document show escaped.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.widgets import ContentSwitcher, Footer

from hefsearch.app.requests import CompareRequest, SimilarRequest
from hefsearch.search.searcher import EMPTY_QUERY_NOTICE
from hefsearch.base.terminal_text import for_terminal
from hefsearch.search.request import SearchRequest

from .history import QueryHistory
from .launch import LaunchError, NoDesktop
from .messages import (BlankQuerySubmitted, CompareFinished, HitChosen, PreviewLoaded, SearchFailed,
                       SearchFinished, SearchRequested, SnippetsLoaded, StatusLoaded, SyncFailed,
                       SyncFinished, SyncProgressed)
from .present import compare_fix, pick_compare_spaces, side_title, space_label
from .screens.library import LibraryScreen
from .screens.reader import ReaderScreen
from .session import TuiSession
from .settings import DARK, LIGHT, TuiSettings
from .widgets import CompareView, NoticeBar, PreviewPane, ResultsList, SearchBar, StatusBar
from .widgets.compare import CompareColumn

if TYPE_CHECKING:
    from hefsearch.index.library import LibraryStatus
    from hefsearch.index.spaces import SpaceInfo
    from hefsearch.index.sync import ProgressEvent, SyncReport
    from hefsearch.search import Comparison, Hit, SearchResult

log = logging.getLogger("hefsearch.tui")


#: how each phase of a re-index reads in the progress line
SYNC_PHASES = {"scan": "scanning", "remove": "removing deleted files", "index": "indexing",
               "backfill": "back-filling spaces", "done": "finishing"}


def sync_progress_text(event: ProgressEvent) -> str:
    """One line for a re-index progress event: phase, files, chunks and rate, current file."""
    bits = [SYNC_PHASES.get(event.phase, event.phase)]
    if event.files_total:
        bits.append(f"{event.files_done}/{event.files_total} files")
    if event.chunks_done:
        bits.append(f"{event.chunks_done} chunks ({event.chunks_per_s:.0f}/s)")
    if event.where and event.phase in ("index", "ocr"):  # the file and the message or page in it
        bits.append(for_terminal(Path(str(event.where)).name))
    elif event.path and event.phase == "index":
        bits.append(for_terminal(Path(str(event.path)).name))
    return " · ".join(bits)


def sync_finished_text(r: SyncReport) -> str:
    """'done: 2 added, ... 40 chunks embedded in 3.1 s; 3 symlinks not followed': failures and
    what was left out on purpose only when there are some, each called what it is."""
    text = (f"done: {r.added} added, {r.changed} changed, {r.removed} removed, {r.unchanged} unchanged, "
            f"{r.chunks_embedded} chunks embedded in {r.seconds:.1f} s")
    extra = [f"{len(r.failed)} failed (F5 on the library screen lists them)"] if r.failed else []
    if r.stale:
        extra.append(f"{len(r.stale)} failing now (their previous version stays)")
    if r.links:
        extra.append(f"{len(r.links)} symlinks not followed")
    if r.notes:
        extra.append(f"{len(r.notes)} special files or loops left out")
    return "; ".join([text, *extra])


class HefsearchApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "hefsearch"
    # responsive layout (classes on the screen, rules in app.tcss): below 72 columns the compare
    # sides stack; below 110 the results list and the preview stack
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (72, "-medium"), (110, "-wide")]
    BINDINGS = [
        Binding("f2", "cycle_mode", "Mode"),
        Binding("f3", "toggle_compare", "Compare"),
        Binding("f4", "library", "Library"),
        Binding("ctrl+r", "toggle_rerank", "Re-rank"),
        Binding("ctrl+o", "open_hit", "Open"),
        Binding("f5", "similar", "Similar"),
        Binding("f6", "toggle_theme", "Theme"),
        Binding("escape", "focus_search", "Search", show=False),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(self, session: TuiSession, settings: TuiSettings, history: QueryHistory):
        super().__init__()
        self.session = session
        self.settings = settings
        self.history = history
        self.compare_spaces: tuple[str, str] | None = None
        #: compare view: False shows the NPU space's own ranking (what 8 bits cost); True lets
        #: the search API re-rank the NPU top-N with FP32 vectors (what re-ranking wins back)
        self.compare_rerank = False
        self.spaces: dict[str, SpaceInfo] = {}
        self.last_status: LibraryStatus | None = None
        self._warmed = False
        self.last_result: SearchResult | None = None
        self.last_comparison: Comparison | None = None
        self.last_sync_report: SyncReport | None = None
        self.sync_progress: tuple[int | None, int | None, Content] | None = None
        self.sync_running = False
        #: sequence number of the newest request: answers to older ones are dropped
        self._seq = 0
        #: seq of the last request answered (result or error); tests and scripts wait on it
        self.answered_seq = 0
        #: a compare asked for before the library status (and so its spaces) arrived: (seq, request)
        self._pending: tuple[int, SearchRequest] | None = None
        #: per result shown (by id): chunk ids whose semantic snippet was asked for
        self._snippets_asked: dict[int, set[int]] = {}
        #: SnippetsLoaded messages handled (tests and scripts wait on it)
        self.snippets_loaded = 0

    # -- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield SearchBar(self.history, mode=self.settings.mode, k=self.settings.k, live=self.settings.live,
                        id="search-bar")
        yield NoticeBar(id="notice")
        with ContentSwitcher(initial="results-view", id="views"):
            with Horizontal(id="results-view"):
                yield ResultsList(id="results")
                yield PreviewPane(id="preview")
            yield CompareView(id="compare-view")
        yield StatusBar(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.theme = self.settings.theme
        self.status_bar.mode = self.settings.mode
        self.search_bar.query_input.focus()
        self.results.welcome()
        self.action_refresh_status()

    def check_action(self, action: str, parameters) -> bool | None:
        # the search-view keys do nothing over the library screen: hide them from its footer
        if action in {"cycle_mode", "toggle_compare", "open_hit", "toggle_rerank", "similar"} and isinstance(
                self.screen, LibraryScreen):
            return False
        if action == "toggle_rerank" and not self.comparing:
            return False  # only the compare view has the raw / re-ranked switch
        return True

    # -- typed accessors -------------------------------------------------------------------
    @property
    def search_bar(self) -> SearchBar:
        return self.query_one("#search-bar", SearchBar)

    @property
    def results(self) -> ResultsList:
        return self.query_one("#results", ResultsList)

    @property
    def preview(self) -> PreviewPane:
        return self.query_one("#preview", PreviewPane)

    @property
    def compare_view(self) -> CompareView:
        return self.query_one("#compare-view", CompareView)

    @property
    def status_bar(self) -> StatusBar:
        return self.query_one("#status", StatusBar)

    @property
    def notice_bar(self) -> NoticeBar:
        return self.query_one("#notice", NoticeBar)

    @property
    def comparing(self) -> bool:
        return self.query_one("#views", ContentSwitcher).current == "compare-view"

    # -- searching -------------------------------------------------------------------------
    @on(SearchRequested)
    def _on_search_requested(self, message: SearchRequested) -> None:
        self.submit(message.request)

    def submit(self, request: SearchRequest) -> SearchRequest:
        """Start a search (or a comparison, in the compare view); newer requests win."""
        self._seq += 1
        seq = self._seq
        request = dataclasses.replace(request, all_chunks=self.settings.all_chunks,
                                      rerank_depth=self.settings.rerank)
        comparing = self.comparing
        self.status_bar.activity = "comparing…" if comparing else "searching…"
        if comparing:
            if self.last_status is None:  # spaces not known yet: run once they are
                self._pending = (seq, request)
                return request
            if self.compare_spaces is None:
                self.status_bar.activity = ""
                self.answered_seq = seq
                self.compare_view.unavailable(self._compare_unavailable_text())
                return request
            self.run_compare(seq, CompareRequest(search=request, spaces=self.compare_spaces,
                                                 rerank=self.compare_rerank))
        else:
            self.run_search(seq, request)
        return request

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def run_search(self, seq: int, request: SearchRequest) -> None:
        try:
            result = self.session.search(request)
        except Exception as e:  # shown to the user, never a crash
            self.post_message(SearchFailed(seq, e))
            return
        self.post_message(SearchFinished(seq, request, result))

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def run_compare(self, seq: int, request: CompareRequest) -> None:
        # keyword search does not depend on the vector space: compare the vector side instead
        if request.search.mode == "keyword":
            request = dataclasses.replace(request, search=dataclasses.replace(request.search, mode="vector"))
        try:
            comparison = self.session.compare(request)
        except Exception as e:
            self.post_message(SearchFailed(seq, e))
            return
        self.post_message(CompareFinished(seq, request, comparison))

    def action_similar(self) -> None:
        """More like this: the chunks of other documents nearest to the highlighted hit."""
        hit = self.current_hit()
        if hit is None:
            self.notify("No result selected.", severity="warning")
            return
        if self.comparing:
            self.action_toggle_compare()
        self._seq += 1
        request = self.search_bar.build_request()
        self.status_bar.activity = "finding similar…"
        self.run_similar(self._seq, SimilarRequest(chunk_id=hit.chunk_id, k=request.k, filters=request.filters))

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def run_similar(self, seq: int, request: SimilarRequest) -> None:
        try:
            result = self.session.similar(request)
        except Exception as e:
            self.post_message(SearchFailed(seq, e))
            return
        self.post_message(SearchFinished(seq, request, result))

    def _is_current(self, seq: int) -> bool:
        return seq == self._seq

    @on(SearchFinished)
    def _on_search_finished(self, message: SearchFinished) -> None:
        if not self._is_current(message.seq):
            return  # an older query answered late
        result = message.result
        self.last_result = result
        self.answered_seq = message.seq
        self.status_bar.activity = ""
        self.status_bar.backend = result.backend_label or self.status_bar.backend
        self.status_bar.space = result.space or ("keyword index" if result.mode == "keyword" else "")
        self.status_bar.latency = float(result.timings.get("total", -1.0))
        rr = result.rerank or {}
        self.status_bar.mode = result.mode + (f" + FP32 re-rank {rr.get('rescored', 0)}/{rr.get('depth')}"
                                              if rr.get("rescored") else "")
        self.show_notice(result.notice)
        self.search_bar.show_like(result.query if result.mode == "similar" else None)
        self.preview.clear("" if result.hits else "No results.")
        self.results.show(result)
        self._snippets_asked = {}  # earlier results are no longer on screen
        self.request_snippets(result, self.results.visible_hits())

    @on(CompareFinished)
    def _on_compare_finished(self, message: CompareFinished) -> None:
        if not self._is_current(message.seq):
            return
        c = message.comparison
        spaces = message.request.spaces or ("", "")
        self.last_comparison = c
        self.answered_seq = message.seq
        self.status_bar.activity = ""
        titles = (self._side_title(spaces[0], c.left), self._side_title(spaces[1], c.right))
        self.compare_view.show(c, message.request.search.k, titles, reranked=message.request.rerank)
        self._snippets_asked = {}
        for column, result in ((self.compare_view.left, c.left), (self.compare_view.right, c.right)):
            self.request_snippets(result, column.visible_hits())
        notice = c.left.notice or c.right.notice
        self.show_notice(notice)
        self.status_bar.backend = " vs ".join(filter(None, (c.left.backend_label, c.right.backend_label)))
        self.status_bar.space = ""
        self.status_bar.mode = message.request.search.mode
        self.status_bar.latency = float(c.left.timings.get("total", 0) + c.right.timings.get("total", 0))

    # -- semantic snippets, after the results -------------------------------------------------
    def request_snippets(self, result: SearchResult, hits) -> None:
        """Ask for semantic snippets of those ``hits`` whose snippet is pending (each once)."""
        asked = self._snippets_asked.setdefault(id(result), set())
        todo = [h for h in hits if h.chunk_id in result.pending_snippets and h.chunk_id not in asked]
        if todo:
            asked.update(h.chunk_id for h in todo)
            self.load_snippets(result, todo, self._seq)

    @work(thread=True, group="snippets", exit_on_error=False)
    def load_snippets(self, result: SearchResult, hits: list, seq: int) -> None:
        """One hit at a time, each posted when ready; stops as soon as a newer query was asked,
        so a query typed meanwhile waits for at most one hit's sentences (the searcher serves
        one caller at a time)."""
        for hit in hits:
            if not self._is_current(seq):
                return
            try:
                snippets = self.session.semantic_snippets(result, [hit])
            except Exception as e:  # the stand-in snippets stay
                log.info("semantic snippets failed: %s", e)
                return
            if snippets:
                self.post_message(SnippetsLoaded(result, snippets))

    @on(SnippetsLoaded)
    def _on_snippets_loaded(self, message: SnippetsLoaded) -> None:
        result = message.result
        result.apply_snippets(message.snippets)  # on the UI thread: widgets read the hits here
        if result is self.last_result:
            self.results.update_snippets(set(message.snippets))
        c = self.last_comparison
        if c is not None and (result is c.left or result is c.right):
            (self.compare_view.left if result is c.left else self.compare_view.right).render_hits()
        self.snippets_loaded += 1

    @on(SearchFailed)
    def _on_search_failed(self, message: SearchFailed) -> None:
        if not self._is_current(message.seq):
            return
        self.answered_seq = message.seq
        self.status_bar.activity = ""
        e = message.error
        text = getattr(e, "message", None) or str(e) or type(e).__name__
        hint = getattr(e, "hint", None)
        self.tell(f"{text}\n{hint}" if hint else text, title="Search failed", severity="error", timeout=8)
        self.show_notice(f"Search failed: {text}")

    def tell(self, text: str, **options) -> None:
        """A notification of text that may quote file names, queries or errors: shown as it is
        (never markup, no lone surrogates or control characters)."""
        self.notify(for_terminal(text, multiline=True), markup=False, **options)

    def show_notice(self, notice: str | None) -> None:
        self.notice_bar.show(for_terminal(notice, multiline=True) if notice else None)

    @on(BlankQuerySubmitted)
    def _on_blank_query(self, message: BlankQuerySubmitted) -> None:
        self.show_notice(EMPTY_QUERY_NOTICE)

    # -- reading ---------------------------------------------------------------------------
    @on(HitChosen)
    def _on_hit_chosen(self, message: HitChosen) -> None:
        shown = self._result_holding(message.hit)
        if shown is not None:  # scrolled to a hit below the first screen: its snippet now
            self.request_snippets(shown, [message.hit])
        if isinstance(message.control, CompareColumn) or self.comparing:
            return  # the compare view has no preview pane; Ctrl+O still opens the hit
        self.load_preview(message.hit)

    def _result_holding(self, hit: Hit) -> SearchResult | None:
        c = self.last_comparison
        candidates = [self.last_result, *((c.left, c.right) if c is not None else ())]
        return next((r for r in candidates if r is not None and any(h is hit for h in r.hits)), None)

    @work(thread=True, exclusive=True, group="preview", exit_on_error=False)
    def load_preview(self, hit: Hit) -> None:
        try:
            records = self.session.neighbours(hit, self.settings.neighbours)
        except Exception as e:
            log.warning("preview of chunk %s failed: %s", hit.chunk_id, e)
            records = []
        self.post_message(PreviewLoaded(hit, records))

    @on(PreviewLoaded)
    async def _on_preview_loaded(self, message: PreviewLoaded) -> None:
        current = self.results.current_hit
        if current is not None and current.chunk_id != message.hit.chunk_id:
            return
        query = self.last_result.query if self.last_result is not None else ""
        await self.preview.show(message.hit, message.records, query)

    def current_hit(self) -> Hit | None:
        focused = self.focused
        node = focused
        while node is not None:
            if isinstance(node, CompareColumn):
                return node.current_hit
            node = node.parent
        if self.comparing:
            return self.compare_view.left.current_hit or self.compare_view.right.current_hit
        return self.results.current_hit

    def action_open_hit(self) -> None:
        hit = self.current_hit()
        if hit is None:
            self.notify("No result selected.", severity="warning")
            return
        try:
            plan = self.session.plan_open(hit)
            if plan.terminal:
                try:
                    with self.suspend():
                        self.session.launch(plan)
                except SuspendNotSupported:
                    self.session.launch(plan)
            else:
                self.session.launch(plan)
        except NoDesktop as e:  # over SSH: no window to open; the indexed text, here
            self.tell(e.message, title="No desktop", severity="warning")
            query = self.last_result.query if self.last_result is not None else ""
            self.push_screen(ReaderScreen(hit, self.session, query, f"{e.message}\n{e.hint}"))
        except LaunchError as e:
            self.tell(f"{e.message}\n{e.hint or ''}".strip(), title="Cannot open", severity="error")
        except OSError as e:
            self.tell(str(e), title="Cannot open", severity="error")

    # -- views, modes, theme -------------------------------------------------------------
    def action_cycle_mode(self) -> None:
        self.search_bar.cycle_mode()

    def action_toggle_compare(self) -> None:
        switcher = self.query_one("#views", ContentSwitcher)
        switcher.current = "results-view" if self.comparing else "compare-view"
        self.refresh_bindings()
        if self.comparing and self.compare_spaces is None:
            self.compare_view.unavailable(self._compare_unavailable_text())
        self.show_notice(None)
        if self.search_bar.build_request().query:
            self.search_bar.submit()

    def action_toggle_rerank(self) -> None:
        self.compare_rerank = not self.compare_rerank
        self.notify("NPU side re-ranked with FP32 vectors (what re-ranking wins back)" if self.compare_rerank
                    else "NPU side as the NPU ranks it (what 8 bits cost)", timeout=3)
        if self.search_bar.build_request().query:
            self.search_bar.submit()

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT if self.theme == DARK else DARK

    def action_focus_search(self) -> None:
        self.search_bar.query_input.focus()

    def action_focus_results(self) -> None:
        """From the query to the results (Tab, Down): the list shown, else the next field."""
        target = self.compare_view.left.hit_list if self.comparing else self.results
        if target.option_count and not target.disabled:
            target.focus()
        else:
            self.screen.focus_next()

    def _compare_unavailable_text(self) -> str:
        have = ", ".join(self.spaces) or "none"
        return ("The compare view needs a quantised space (hef, npu-sim-*, cpu-int8) and a cpu-fp32 space; "
                f"this library has: {have}. To add the missing one: "
                + compare_fix(list(self.spaces), str(self.session.library_path)))

    def _side_title(self, name: str, result: SearchResult) -> tuple[str, str]:
        """(device, space) for a compare column; says so when the answer came from another
        space than the one asked (the NPU failed and the FP32 space answered)."""
        info = self.spaces.get(name)
        label, space = side_title(info) if info is not None else (name, name)
        if result.space and result.space != name:
            return f"{result.backend_label or result.space} (fallback)", f"{name} → {result.space}"
        return result.backend_label or label, space

    # -- library status and re-index ------------------------------------------------------
    def action_library(self) -> None:
        if isinstance(self.screen, LibraryScreen):
            self.pop_screen()
        else:
            self.push_screen(LibraryScreen())

    def action_refresh_status(self) -> None:
        self.load_status()

    @work(thread=True, exclusive=True, group="status", exit_on_error=False)
    def load_status(self) -> None:
        try:
            status = self.session.status()
        except Exception as e:
            log.warning("library status failed: %s", e)
            return
        try:
            fresh = self.session.freshness()
        except Exception as e:  # shown without it
            log.info("library freshness unknown: %s", e)
            fresh = None
        self.post_message(StatusLoaded(status, fresh))

    @on(StatusLoaded)
    def _on_status_loaded(self, message: StatusLoaded) -> None:
        status = message.status
        self.last_status = status
        self.spaces = {s.name: s for s in status.spaces}
        self.compare_spaces = pick_compare_spaces(status.spaces)
        bar = self.status_bar
        bar.documents, bar.chunks = status.documents, status.chunks
        if message.freshness is not None:
            fresh = message.freshness
            bar.freshness = "watched" if fresh.watcher else fresh.describe().split(";")[0]
        if not bar.space:
            default = self.session.default_space()
            if default and default in self.spaces:
                bar.space = default
                bar.backend = space_label(self.spaces[default])
        for screen in self.screen_stack:
            if isinstance(screen, LibraryScreen):
                screen.show_status(status, str(self.session.library_path), message.freshness)
        if self._pending is not None:
            (seq, pending), self._pending = self._pending, None
            if self._is_current(seq):
                self.submit(pending)
        if not self._warmed:
            self._warmed = True
            wanted = [self.session.default_space(), *(self.compare_spaces or ())]
            self.warm_up([name for name in dict.fromkeys(wanted) if name in self.spaces])

    @work(thread=True, group="warmup", exit_on_error=False)
    def warm_up(self, spaces: list[str]) -> None:
        """Open the encoders (and the device) and run one query per space before the user's
        first one, so its latency is the steady-state one."""
        for name in spaces:
            try:
                self.session.warm_up(name)
            except Exception as e:  # the real query will report it properly
                log.info("warm-up of %s failed: %s", name, e)

    def action_reindex(self) -> None:
        if self.sync_running:
            self.notify("A re-index is already running.", severity="warning")
            return
        roots = self.session.recorded_roots()
        if not roots:
            self.notify("This library does not record which folders it indexes; run "
                        "'hefsearch index PATH' once.", title="Nothing to re-index", severity="warning")
            return
        self.sync_running = True
        self._progress(0, None, f"re-indexing {', '.join(str(r) for r in roots)}…")
        self.run_sync(roots)

    @work(thread=True, exclusive=False, group="sync", exit_on_error=False)
    def run_sync(self, roots: list[Path]) -> None:
        try:
            # bursts of progress messages coalesce (SyncProgressed.can_replace)
            report = self.session.reindex(roots, lambda event: self.post_message(SyncProgressed(event)))
        except Exception as e:
            self.post_message(SyncFailed(e))
            return
        self.post_message(SyncFinished(report))

    def _progress(self, done, total, text) -> None:
        # Content, not str: the text names files and folders, which are not markup
        self.sync_progress = (done, total, Content(for_terminal(text)))
        pct = f" {100 * done // total}%" if done is not None and total else ""
        self.status_bar.indexing = f"indexing{pct}" if self.sync_running else ""
        for screen in self.screen_stack:
            if isinstance(screen, LibraryScreen):
                screen.show_progress(*self.sync_progress)

    @on(SyncProgressed)
    def _on_sync_progressed(self, message: SyncProgressed) -> None:
        if self.sync_running:
            event = message.event
            self._progress(event.files_done, event.files_total, sync_progress_text(event))

    @on(SyncFinished)
    def _on_sync_finished(self, message: SyncFinished) -> None:
        r = message.report
        self.sync_running = False
        self.last_sync_report = r
        failed = len(r.failed)
        text = sync_finished_text(r)
        total = max(1, r.added + r.changed + r.removed + r.unchanged)
        self._progress(total, total, text)
        self.tell(text, title="Re-index finished", severity="warning" if failed else "information")
        self.action_refresh_status()

    @on(SyncFailed)
    def _on_sync_failed(self, message: SyncFailed) -> None:
        self.sync_running = False
        e = message.error
        text = getattr(e, "message", None) or str(e) or type(e).__name__
        self._progress(None, None, f"failed: {text}")
        self.tell(text, title="Re-index failed", severity="error", timeout=10)


"""The TUI, headless (Textual ``run_test`` + Pilot), on real small libraries built in the test
with the tiny model: search, modes, preview, compare, the FP32 fallback notice, opening a hit,
the library screen and a re-index that runs while searches are answered; and what a new user
meets first: the results one Tab away from the query, one hit per file with its copies and
readable scores, a library screen that tells symlinks not followed from failures and an
interrupted run from one never made, the re-index summary, and a compare view that names the
command it needs.

The NPU side of the compare and fallback tests is ``tests.support.tui_support.NoisyBackend``, a
test-only distortion of the FP32 encoder (not a model of any hardware); everything else is the
real library, search API and app.
"""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("textual")

from textual import events  # noqa: E402
from textual.widgets import DataTable, Static  # noqa: E402

from hefsearch.embed.backends.cpu import CpuBackend  # noqa: E402
from hefsearch.embed.bundle import Bundle  # noqa: E402
from hefsearch.embed.encoder import Encoder  # noqa: E402
from hefsearch.index.library import Library  # noqa: E402
from hefsearch.index.sync import SyncOptions, sync  # noqa: E402
from hefsearch.search import compare  # noqa: E402
from hefsearch.search.request import SearchRequest  # noqa: E402
from hefsearch.tui.screens.library import LibraryScreen  # noqa: E402
from hefsearch.tui.present import one_line  # noqa: E402
from hefsearch.tui.widgets import ResultsList  # noqa: E402
from tests.support.library_helpers import ctrl_c_on_batch  # noqa: E402
from tests.support.tui_support import (CORPUS, build_app, cpu_encoder, noisy_encoder, search, wait_for,  # noqa: E402
                               write_corpus)

SIZE = (120, 36)
DOCS = len(CORPUS)


def option_texts(option_list) -> list[str]:
    return [str(option_list.get_option_at_index(i).prompt) for i in range(option_list.option_count)]


def chunk_ids(result) -> list[int]:
    return [h.chunk_id for h in result.hits]


# -- libraries ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_space_library(tiny_bert_bundle, tmp_path_factory):
    """A library with an "npu-sim" space (the test-only noisy encoder, made the default space)
    and the "cpu-fp32" space, plus one file that fails to extract."""
    root = write_corpus(tmp_path_factory.mktemp("docs"))
    (root / "broken.txt").write_bytes(b"\x00\x01\x02\x03\xff\xfe" * 50)
    noisy, cpu = noisy_encoder(tiny_bert_bundle), cpu_encoder(tiny_bert_bundle)
    library = Library.open(tmp_path_factory.mktemp("lib") / "library")
    report = sync(library, [root], [noisy, cpu])
    assert report.added == DOCS and len(report.failed) == 1
    # a simulation next to FP32 is not made the default (issue 21); here the test-only NPU side
    # is, as a real HEF space would be on a Pi
    assert library.settings()["default_space"] == "cpu-fp32"
    library.set_settings(default_space="npu-sim")
    yield library, {"npu-sim": noisy, "cpu-fp32": cpu}, root
    library.close()


@pytest.fixture
def app_factory(two_space_library):
    library, encoders, _ = two_space_library
    encoders["npu-sim"].backend.fail = False
    return lambda **kw: build_app(library, encoders, **kw)


# -- searching ---------------------------------------------------------------------------
async def test_enter_shows_ranked_results_with_highlighted_terms(app_factory):
    app = app_factory(k=5)
    async with app.run_test(size=SIZE) as pilot:
        await search(pilot, app, "invoice")
        result = app.last_result
        assert result.query == "invoice" and result.mode == "hybrid"
        expected = app.session.searcher.search(SearchRequest("invoice", k=5, mode="hybrid"))
        assert chunk_ids(result) == chunk_ids(expected)
        shown = option_texts(app.results)
        assert len(shown) == len(result.hits) > 0
        for line, hit in zip(shown, result.hits):
            # the first hit below the relevance line (if one is drawn) has the line above it
            first_weak = result.relevance is not None and hit.rank == result.relevance["above"] + 1
            assert line.startswith("── weaker matches below") == first_weak
            assert line.split("\n", 1)[first_weak].lstrip().startswith(f"{hit.rank} ")
            # the cosine a person can read (issue 21), not the fused rank value (0.016..0.033)
            assert hit.similarity is not None and f"{hit.similarity:6.3f}".strip() in line
            assert hit.path.rsplit("/", 1)[-1] in line
            assert f"l.{hit.line}" in line
        assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
        # the query term is highlighted in the snippets of hits that contain it
        prompt = app.results.get_option_at_index(0).prompt
        marked = [str(prompt)[s.start:s.end].lower() for s in prompt.spans if "accent-muted" in str(s.style)]
        assert "invoice" in marked
        # status: device of the default space, library size
        assert app.status_bar.backend == "NPU simulation (test noise)"
        assert app.status_bar.space == "npu-sim"
        assert app.status_bar.documents == DOCS
        assert not app.notice_bar.has_class("visible")


async def test_enter_right_after_fast_typing_searches_the_typed_query(app_factory):
    """Keys that arrive in one burst (a paste, a loaded machine, tmux send-keys): Enter is
    handled after the characters before it, so the query is searched, not called blank."""
    app = app_factory(k=3, mode="keyword")
    async with app.run_test(size=SIZE) as pilot:
        app.search_bar.query_input.focus()
        await pilot.pause()
        for key in [*"zanzibar", "enter"]:
            app.post_message(events.Key(key, "\r" if key == "enter" else key))
        await wait_for(pilot, lambda: app.answered_seq == 1, what="the answer")
        assert app.last_result.query == "zanzibar" and app.last_result.hits
        assert not app.notice_bar.has_class("visible")


async def test_semantic_snippets_follow_the_results_for_the_hits_shown(app_factory, monkeypatch):
    """Results appear with stand-in snippets (no sentence embedded in the query); the semantic
    ones arrive afterwards for the hits on screen and replace them in the list."""
    from hefsearch.search import snippets

    monkeypatch.setattr(snippets, "WINDOW_CHARS", 40)  # the tiny model's chunks are short
    app = app_factory(k=6, mode="vector")
    searcher = app.session.searcher

    def changes(query):  # {chunk id: semantic snippet} where it differs from the stand-in
        expected = searcher.search(SearchRequest(query, k=6, mode="vector"))
        semantic = searcher.semantic_snippets(expected)
        return {h.chunk_id: semantic[h.chunk_id] for h in expected.hits
                if h.chunk_id in semantic and semantic[h.chunk_id] != h.snippet}

    # words the corpus lacks (every long hit is pending); the first query where meaning moves a snippet
    query, changed = next((q, c) for q in ("xylophone quartet", "zebra umbrella", "quiet volcano",
                                           "yellow kayak", "frozen lantern") if (c := changes(q)))
    async with app.run_test(size=SIZE) as pilot:
        await search(pilot, app, query)
        result = app.last_result
        await wait_for(pilot, lambda: app.snippets_loaded >= 1, what="semantic snippets")
        await pilot.pause()
        assert not (result.pending_snippets & set(changed))
        shown = option_texts(app.results)
        for line, hit in zip(shown, result.hits):
            if hit.chunk_id in changed:  # the list was redrawn with the semantic snippet
                assert hit.snippet == changed[hit.chunk_id]
                assert one_line(hit.snippet).strip("…")[:15] in " ".join(line.split())


async def test_switching_modes_changes_results(app_factory):
    app = app_factory(k=5, mode="vector")
    async with app.run_test(size=SIZE) as pilot:
        await search(pilot, app, "invoice")
        vector = app.last_result
        assert vector.mode == "vector"
        seq = app._seq
        await pilot.press("f2")  # vector -> keyword (cycle order hybrid, vector, keyword)
        await wait_for(pilot, lambda: app._seq > seq and app.answered_seq == app._seq, what="keyword answer")
        keyword = app.last_result
        assert keyword.mode == "keyword" and app.search_bar.mode == "keyword"
        assert chunk_ids(keyword) == chunk_ids(app.session.searcher.search(SearchRequest("invoice", k=5, mode="keyword")))
        assert chunk_ids(vector) == chunk_ids(app.session.searcher.search(SearchRequest("invoice", k=5, mode="vector")))
        assert chunk_ids(keyword) != chunk_ids(vector)
        # keyword hits all contain the word; the vector list also ranks chunks that do not
        assert all("invoice" in h.text.lower() for h in keyword.hits)
        assert any("invoice" not in h.text.lower() for h in vector.hits)
        assert len(option_texts(app.results)) == len(keyword.hits)


async def test_path_glob_and_file_type_filters(app_factory):
    app = app_factory(k=10, mode="vector")
    async with app.run_test(size=SIZE) as pilot:
        app.query_one("#glob").value = "*travel*"
        await search(pilot, app, "train")
        assert app.last_result.hits and all("/travel/" in h.path for h in app.last_result.hits)
        app.query_one("#glob").value = ""
        app.query_one("#kind").value = "text"
        await search(pilot, app, "train")
        assert {h.doc_kind for h in app.last_result.hits} <= {"text", "markdown"}


class _HeldTimer:
    """Stands in for the debounce timer: it fires only when the test says so, so the test
    does not depend on how fast a loaded machine delivers the keys."""

    def __init__(self, delay, callback):
        self.delay, self.callback, self.stopped = delay, callback, False

    def stop(self):
        self.stopped = True


async def test_search_as_you_type_is_debounced(app_factory, monkeypatch):
    app = app_factory(k=3, mode="keyword", live=True)
    async with app.run_test(size=SIZE) as pilot:
        bar = app.search_bar
        timers: list[_HeldTimer] = []
        monkeypatch.setattr(bar, "set_timer",
                            lambda delay, callback: timers.append(_HeldTimer(delay, callback)) or timers[-1])
        await pilot.press(*"hedge")
        await pilot.pause()
        # each key restarts the wait: five timers, the first four stopped, nothing searched yet
        assert len(timers) == 5 and all(t.delay == bar.DEBOUNCE_SECONDS for t in timers)
        assert [t.stopped for t in timers] == [True] * 4 + [False]
        assert app._seq == 0
        timers[-1].callback()  # typing stopped: the last timer fires
        await wait_for(pilot, lambda: app.answered_seq == 1, what="debounced search")
        assert app._seq == 1 and app.last_result.query == "hedge"  # one search for five keys


async def test_preview_shows_the_hit_in_context(app_factory):
    app = app_factory(k=5, mode="keyword")
    async with app.run_test(size=SIZE) as pilot:
        await search(pilot, app, "hedge")
        hit = app.last_result.hits[0]
        await wait_for(pilot, lambda: app.preview.hit_widget is not None, what="preview")
        shown = str(app.preview.hit_widget.render())
        assert hit.text.strip("\n") in shown
        neighbours = app.session.library.neighbours(hit.chunk_id, before=2, after=2)
        assert len(app.preview.query(".piece")) == len([r for r in neighbours if r.text.strip()])
        assert "garden.txt" in str(app.preview.border_title)


async def test_preview_scrolls_to_a_hit_deep_in_a_long_document(app_factory):
    app = app_factory(k=3, mode="keyword", neighbours=8)
    async with app.run_test(size=(120, 20)) as pilot:
        await search(pilot, app, "zanzibar")
        hit = app.last_result.hits[0]
        assert hit.path.endswith("diary.txt") and "zanzibar" in hit.text
        await wait_for(pilot, lambda: app.preview.hit_widget is not None, what="preview")
        await pilot.pause(0.3)
        preview, target = app.preview, app.preview.hit_widget
        pieces = app.preview.query(".piece")
        assert len(pieces) > 3 and pieces.first() is not target  # context before the hit
        assert preview.scroll_y > 0  # scrolled down to the hit...
        top = preview.content_region.y
        assert top <= target.region.y < preview.content_region.bottom  # ...which is in view


async def test_history_up_down_in_the_input(app_factory, two_space_library):
    app = app_factory(k=3, mode="keyword")
    async with app.run_test(size=SIZE) as pilot:
        await search(pilot, app, "garden")
        await search(pilot, app, "tokyo")
        app.search_bar.query_input.value = "dra"
        await pilot.press("up")
        assert app.search_bar.query_input.value == "tokyo"
        await pilot.press("up")
        assert app.search_bar.query_input.value == "garden"
        await pilot.press("down", "down")
        assert app.search_bar.query_input.value == "dra"
    library = two_space_library[0]
    again = app_factory()
    assert again.history.entries[-2:] == ["garden", "tokyo"]
    assert (library.path / "tui-history.json").exists()


# -- compare -----------------------------------------------------------------------------
async def test_compare_view_two_columns_with_overlap_from_the_search_api(app_factory):
    k = 5
    app = app_factory(k=k, mode="vector")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.compare_spaces is not None, what="library status")
        assert app.compare_spaces == ("npu-sim", "cpu-fp32")
        await pilot.press("f3")
        assert app.comparing
        await search(pilot, app, "bus to the airport")
        shown = app.last_comparison
        # by default the NPU side is the NPU space's own ranking (re-ranking off: rerank=0)
        expected = compare(app.session.searcher, SearchRequest("bus to the airport", mode="vector", k=k, rerank_depth=0),
                           ("npu-sim", "cpu-fp32"))
        assert chunk_ids(shown.left) == chunk_ids(expected.left)
        assert chunk_ids(shown.right) == chunk_ids(expected.right)
        # the figure on screen is the API's, and the API's is |L ∩ R| / k
        shared = set(chunk_ids(expected.left)) & set(chunk_ids(expected.right))
        assert expected.overlap_at_k == pytest.approx(len(shared) / k)
        summary = str(app.query_one("#compare-summary", Static).render())
        assert f"overlap@{k} {expected.overlap_at_k:.2f}" in summary
        assert f"RBO {expected.rbo:.2f}" in summary
        assert f"{len(expected.only_left)} NPU-only · {len(expected.only_right)} FP32-only" in summary
        # the noisy space ranks differently: some hits are on one side only, and marked
        assert expected.only_left and expected.only_right
        left, right = app.compare_view.left, app.compare_view.right
        assert "NPU simulation (test noise)" in str(left.border_title)
        assert "CPU FP32" in str(right.border_title)
        for col, only in ((left, expected.only_left), (right, expected.only_right)):
            lines = option_texts(col.hit_list)
            assert len(lines) == k
            marked = [h.chunk_id for h, line in zip(col.hits, lines) if "◆" in line.split("\n")[0]]
            assert set(marked) == set(only)
        # per-side latency split into encode / search / fetch
        timings = str(left.query_one(".timings", Static).render())
        for part in ("encode", "search", "fetch"):
            assert part in timings
        # the two columns sit side by side at this width
        assert left.region.y == right.region.y and left.region.x < right.region.x
        assert "raw" in str(left.border_title)
        # Ctrl+R: the search API's default re-ranking of the NPU side, labelled as such
        seq = app._seq
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.answered_seq > seq, what="re-ranked comparison")
        reranked = compare(app.session.searcher, SearchRequest("bus to the airport", mode="vector", k=k),
                           ("npu-sim", "cpu-fp32"))
        assert chunk_ids(app.last_comparison.left) == chunk_ids(reranked.left)
        assert app.last_comparison.overlap_at_k == pytest.approx(reranked.overlap_at_k)
        assert "re-ranked by FP32" in str(left.border_title)


async def test_compare_view_at_80x24_and_stacked_when_narrow(app_factory):
    app = app_factory(k=5, mode="vector")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.compare_spaces is not None, what="library status")
        await pilot.press("f3")
        await search(pilot, app, "garden")
        left, right = app.compare_view.left, app.compare_view.right
        assert left.region.width >= 36 and right.region.width >= 36
        assert left.region.y == right.region.y
        assert len(option_texts(left.hit_list)) == 5
        await pilot.resize_terminal(60, 30)
        await pilot.pause(0.2)
        assert left.region.x == right.region.x and left.region.y < right.region.y


async def test_fallback_notice_when_the_npu_raises(app_factory, two_space_library):
    _, encoders, _ = two_space_library
    app = app_factory(k=5, mode="vector")
    async with app.run_test(size=SIZE) as pilot:
        encoders["npu-sim"].backend.fail = True
        try:
            await search(pilot, app, "garden")
        finally:
            encoders["npu-sim"].backend.fail = False
        result = app.last_result
        assert result.notice and result.space == "cpu-fp32"
        assert app.notice_bar.has_class("visible") and app.notice_bar.display
        assert result.notice in str(app.notice_bar.render())
        assert "failed" in result.notice and "answered from the FP32 space" in result.notice
        assert app.status_bar.backend == "CPU FP32" and app.status_bar.space == "cpu-fp32"
        assert result.hits  # answered from the FP32 space, not an error
        # the next search with a healthy NPU clears the notice
        await search(pilot, app, "garden")
        assert not app.notice_bar.has_class("visible")
        assert app.status_bar.space == "npu-sim"


# -- opening ---------------------------------------------------------------------------
async def test_open_key_calls_the_launcher_with_exact_argv(app_factory):
    app = app_factory(k=5, mode="keyword", env={"EDITOR": "vim -p"})
    async with app.run_test(size=SIZE) as pilot:
        await search(pilot, app, "hedge")
        await pilot.press("down")  # move into the list, then back to the first hit
        await pilot.press("ctrl+o")
        hit = app.results.current_hit
        assert app.launch_calls == [(["vim", "-p", f"+{hit.line}", hit.path], {"terminal": True})]
        assert isinstance(app.launch_calls[0][0], list)  # an argv list: no shell is involved


async def test_open_without_a_desktop_says_so_and_shows_the_reader(app_factory, monkeypatch):
    """Over SSH a hit whose file needs a desktop program (a PNG, PDF, DOCX) is not handed to
    xdg-open: the TUI says why and shows the document's indexed text in its reader. The test
    corpus is text, so the format table is told this one needs the desktop opener."""
    from hefsearch.tui import launch
    from hefsearch.tui.screens.reader import ReaderScreen

    monkeypatch.setattr(launch, "display_form", lambda path, kind: "opener")
    monkeypatch.setattr(launch.sys, "platform", "linux")
    app = app_factory(k=5, mode="keyword", env={"EDITOR": "vim", "TERM": "xterm"})  # no DISPLAY
    async with app.run_test(size=SIZE) as pilot:
        await search(pilot, app, "hedge")
        hit = app.results.current_hit
        await pilot.press("ctrl+o")
        assert app.launch_calls == []  # no opener started, so none can be left defunct
        assert isinstance(app.screen, ReaderScreen)
        notes = [n.message for n in app._notifications]
        assert any("no desktop" in m and "DISPLAY" in m for m in notes)
        await wait_for(pilot, lambda: app.screen.query(".hit"), what="the reader's text")
        shown = str(app.screen.query_one("#reader .hit").render())
        words = hit.text.split()
        assert words[0] in shown and words[-1] in shown  # the hit's own text, marked
        assert "no desktop" in str(app.screen.query_one("#reader-reason").render())
        await pilot.press("escape")
        assert not isinstance(app.screen, ReaderScreen)


# -- library screen and re-index -------------------------------------------------------
async def test_library_screen_lists_failed_file_with_reason(app_factory, two_space_library):
    library, _, root = two_space_library
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f4")
        assert isinstance(app.screen, LibraryScreen)
        table = app.screen.query_one("#failures", DataTable)
        await wait_for(pilot, lambda: table.row_count and str(table.get_row_at(0)[0]) != "—", what="failures")
        # cells are Text (a file name is never read as markup): compare what is shown
        rows = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
        path, reason = library.status().failures[0]
        assert rows == [[path, reason]]
        assert path == str(root / "broken.txt") and "binary" in reason
        spaces = app.screen.query_one("#spaces", DataTable)
        names = {spaces.get_row_at(i)[0] for i in range(spaces.row_count)}
        assert names == {"npu-sim", "cpu-fp32"}
        summary = str(app.screen.query_one("#library-summary", Static).render())
        assert f"{DOCS} documents" in summary and "1 failed" in summary
        await pilot.press("escape")
        assert not isinstance(app.screen, LibraryScreen)


class GatedCpuBackend(CpuBackend):
    """The CPU backend (same fingerprint, same space) that waits at a gate on its first run,
    so the test can search while a re-index is provably still running."""

    def __init__(self, bundle, **kw):
        super().__init__(bundle, **kw)
        self.entered = threading.Event()
        self.release = threading.Event()

    def run(self, embeddings, mask):
        self.entered.set()
        assert self.release.wait(30), "the test never released the gate"
        return super().run(embeddings, mask)


async def test_reindex_from_the_tui_completes_while_a_search_is_answered(tiny_bert_bundle, tmp_path):
    root = write_corpus(tmp_path / "docs")
    library = Library.open(tmp_path / "library")
    try:
        sync(library, [root], [cpu_encoder(tiny_bert_bundle)])
        (root / "notes" / "zeppelin.txt").write_text("The zeppelin landed in the harbour at dawn.")
        bundle = Bundle.open(tiny_bert_bundle)
        gated = GatedCpuBackend(bundle)
        app = build_app(library, {"cpu-fp32": cpu_encoder(tiny_bert_bundle)},
                        open_encoders=lambda: [Encoder(bundle, gated)], k=5, mode="keyword")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("f4")
            await pilot.press("r")
            await wait_for(pilot, gated.entered.is_set, what="the re-index to start embedding")
            assert app.sync_running
            await pilot.press("escape")
            await search(pilot, app, "garden")  # answered while the re-index waits at the gate
            assert app.last_result.hits and app.sync_running
            assert app.status_bar.indexing.startswith("indexing")
            gated.release.set()
            await wait_for(pilot, lambda: not app.sync_running, what="the re-index to finish")
            assert app.status_bar.indexing == ""
            report = app.last_sync_report
            assert report is not None and report.added == 1 and report.unchanged == DOCS
            await search(pilot, app, "zeppelin")
            assert [h.path for h in app.last_result.hits] == [str(root / "notes" / "zeppelin.txt")]
            await wait_for(pilot, lambda: app.status_bar.documents == DOCS + 1, what="status refresh")
    finally:
        library.close()


# A new user's first steps: navigation, one hit per file, the library screen, compare.

PASSAGE = ("Create a read stream with fs.createReadStream and hand it to readline.createInterface, then "
           "iterate over the lines with for await without loading the whole file into memory.")


@pytest.fixture
def fp32_library(tiny_bert_bundle, tmp_path):
    """An FP32-only library: a corpus, one text in two formats, and three symlinks that lead
    outside the folder (not followed)."""
    root = write_corpus(tmp_path / "docs")
    (root / "fs.md").write_text("# fs\n\n" + PASSAGE)
    (root / "fs.html").write_text(f"<html><body><h1>fs</h1><p>{PASSAGE}</p></body></html>")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for name in ("a", "b", "c"):
        (outside / f"{name}.txt").write_text("outside")
        (root / f"link-{name}.txt").symlink_to(outside / f"{name}.txt")
    library = Library.open(tmp_path / "library")
    enc = cpu_encoder(tiny_bert_bundle)
    sync(library, [root], [enc])
    yield library, enc
    library.close()
    enc.close()


def summary_text(app) -> str:
    return " ".join(str(app.screen.query_one("#library-summary", Static).render()).split())


async def test_tab_and_down_go_from_the_query_to_the_results(fp32_library):
    library, enc = fp32_library
    app = build_app(library, {"cpu-fp32": enc}, k=5, mode="keyword")
    async with app.run_test(size=SIZE) as pilot:
        await search(pilot, app, "invoice")
        assert app.last_result.hits
        await pilot.press("tab")
        await pilot.pause()
        assert isinstance(app.focused, ResultsList)
        await pilot.press("down")  # and the arrows move in the results
        assert app.results.highlighted == 1
        await pilot.press("shift+tab")  # the filters sit between the query and the results
        assert app.focused.id == "filters"  # the filter line (since:, lang:, type:), after the kind
        app.search_bar.query_input.focus()
        await pilot.press("down")
        await pilot.pause()
        assert isinstance(app.focused, ResultsList)


async def test_results_show_one_hit_per_file_with_its_copies_and_the_cosine(fp32_library):
    library, enc = fp32_library
    app = build_app(library, {"cpu-fp32": enc}, k=5)
    async with app.run_test(size=SIZE) as pilot:
        await search(pilot, app, "readline createInterface read stream")
        hits = app.last_result.hits
        paths = [h.path for h in hits]
        assert len(paths) == len(set(paths))
        fs = next(h for h in hits if h.path.endswith(("fs.md", "fs.html")))
        assert len(fs.also_in) == 1
        line = str(app.results.get_option_at_index(hits.index(fs)).prompt)
        assert "also in: fs." in line.splitlines()[-1]
        assert f"{fs.similarity:6.3f}".strip() in line


async def test_library_screen_calls_skipped_symlinks_what_they_are(fp32_library, tiny_bert_bundle):
    library, enc = fp32_library
    app = build_app(library, {"cpu-fp32": enc}, open_encoders=lambda: [cpu_encoder(tiny_bert_bundle)])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f4")
        assert isinstance(app.screen, LibraryScreen)
        await wait_for(pilot, lambda: "documents" in summary_text(app), what="the status")
        text = summary_text(app)
        assert "0 failed" in text and "3 failed" not in text and "outside_link" not in text
        assert "3 left out on purpose" in text and "3 symlinks not followed (outside the folders)" in text
        assert str(library.recorded_roots()[0]) in text
        await pilot.press("r")
        await wait_for(pilot, lambda: app.last_sync_report is not None and not app.sync_running,
                       what="the re-index")
        done = str(app.sync_progress[2])
        assert "failed" not in done and "3 symlinks not followed" in done


async def test_library_screen_says_a_run_was_interrupted(tiny_bert_bundle, tmp_path, monkeypatch):
    root = write_corpus(tmp_path / "docs")
    library = Library.open(tmp_path / "library")
    enc = cpu_encoder(tiny_bert_bundle)
    restore = ctrl_c_on_batch(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        sync(library, [root], [enc], SyncOptions(batch_chunks=4))
    restore()
    try:
        app = build_app(library, {"cpu-fp32": enc})
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("f4")
            await wait_for(pilot, lambda: "documents" in summary_text(app), what="the status")
            assert "last sync interrupted" in summary_text(app) and "never" not in summary_text(app)
    finally:
        library.close()
        enc.close()


async def test_compare_view_names_the_command_it_needs(fp32_library):
    library, enc = fp32_library
    app = build_app(library, {"cpu-fp32": enc})
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.last_status is not None, what="the status")
        await pilot.press("f3")
        text = " ".join(str(app.compare_view.query_one("#compare-summary", Static).render()).split())
        assert "hefsearch compile sim BUNDLE" in text and "hefsearch index --backend npu-sim" in text
        assert str(library.path) in text

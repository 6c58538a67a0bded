"""Issue 21 in the TUI (Textual Pilot, headless, real small libraries): the results one Tab away
from the query, one hit per file with its copies and readable scores, the library screen that
tells symlinks not followed from failures and an interrupted run from one never made, the
re-index summary, and a compare view that names the command it needs."""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from textual.widgets import Static  # noqa: E402

from hefsearch.index.library import Library  # noqa: E402
from hefsearch.index.sync import SyncOptions, sync  # noqa: E402
from hefsearch.tui.screens.library import LibraryScreen  # noqa: E402
from hefsearch.tui.widgets import ResultsList  # noqa: E402
from tests.library_helpers import ctrl_c_on_batch  # noqa: E402
from tests.tui_support import build_app, cpu_encoder, search, wait_for, write_corpus  # noqa: E402

SIZE = (120, 36)
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

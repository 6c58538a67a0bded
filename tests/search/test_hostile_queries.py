"""Hostile input on the query path (API, CLI and TUI): queries with lone surrogates, NUL, FTS5
syntax, 100k characters, only punctuation, right-to-left text or emoji in every mode and
surface, empty queries, an unknown ``--space``, a moved bundle, file names and texts that look like markup in
every TUI screen, and paths stored with escaped non-UTF-8 bytes."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from textual.widgets import DataTable, Static

from hefsearch.embed import Encoder
from hefsearch.index.encoders import resolve_bundle
from hefsearch.index.errors import LibraryError
from hefsearch.index.library import Library
from hefsearch.index.sync import sync
from hefsearch.search.filters import Filters
from hefsearch.search.request import SearchRequest
from hefsearch.search import Searcher
from hefsearch.search.searcher import EMPTY_QUERY_NOTICE, MAX_QUERY_CHARS, NO_WORDS_NOTICE, SearchError
from hefsearch.search.keyword import MAX_TERMS, clean_text, keyword_search, path_pattern
from hefsearch.cli.main import main
from hefsearch.tui.history import QueryHistory
from hefsearch.tui.launch import on_disk_path, plan_open
from hefsearch.tui.present import MAX_HIGHLIGHT_TERMS, query_terms
from hefsearch.tui.screens.library import LibraryScreen
from tests.support.tui_support import build_app, cpu_encoder, noisy_encoder, search, wait_for

MODES = ("keyword", "vector", "hybrid")

FILES = {
    # "[/]x.txt": a folder "[" holding "]x.txt", so the path reads ".../[/]x.txt"
    "[/]x.txt": "The invoice [bold]total[/bold] is due in March; see [/] and [link=https://x]here[/link].",
    "[bold]y.txt": "[red]Tomatoes[/red] grow in the garden all summer [/].",
    # a name as stored for a file whose name is not UTF-8 (bytes escaped as \xNN)
    "caf\\xe9.txt": "Cafe menu: espresso, croissant and a glass of water.",
    "rtl.txt": "שלום עולם — مرحبا بالعالم 🙂 the party starts at nine.",
    "plain.txt": "The train to the central station leaves from platform four every hour.",
}


def write_files(root: Path) -> Path:
    for rel, text in FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    (root / "[" / "]broken.txt").write_bytes(b"\x00\x01\x02\x03\xff\xfe" * 50)  # fails: binary
    return root


@pytest.fixture(scope="module")
def markup_library(tiny_bert_bundle, tmp_path_factory):
    """Files named like markup, text holding markup, an escaped non-UTF-8 name; an "npu-sim"
    space (test-only noisy encoder, the default) and a "cpu-fp32" space."""
    root = write_files(tmp_path_factory.mktemp("docs"))
    noisy, cpu = noisy_encoder(tiny_bert_bundle), cpu_encoder(tiny_bert_bundle)
    library = Library.open(tmp_path_factory.mktemp("lib") / "library")
    report = sync(library, [root], [noisy, cpu])
    assert report.added == len(FILES) and len(report.failed) == 1
    yield library, {"npu-sim": noisy, "cpu-fp32": cpu}, root
    library.close()


@pytest.fixture
def searcher(markup_library):
    library, encoders, _ = markup_library
    return Searcher(library, encoders=dict(encoders))


def plain(result) -> str:
    """A result as JSON encoded to UTF-8: fails on any lone surrogate left in it."""
    return json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8").decode("utf-8")


# -- 4: lone surrogates and control characters ------------------------------------------------
def test_clean_text_and_path_pattern():
    assert clean_text("caf\udce9") == "caf\ufffd"
    assert clean_text("\ud83d\ude42 ok") == "🙂 ok"  # a surrogate pair is its character
    assert clean_text("a\x00b\x1b[31mc\td") == "a b [31mc\td"
    assert path_pattern("caf\udce9*") == "caf\\xe9*"  # the form stored file names use
    assert path_pattern("*.txt") == "*.txt"


def test_lone_surrogates_are_cleaned_in_every_mode(searcher, markup_library):
    library, _, _ = markup_library
    for mode in MODES:
        result = searcher.search(SearchRequest("caf\udce9 menu", k=3, mode=mode))
        assert result.query == "caf\ufffd menu"
        assert "not valid UTF-8" in result.notice
        assert result.hits and "\\xe9" in plain(result)  # the hit is the escaped name, intact
    # keyword search directly (FTS5 never sees a surrogate) and a phrase with one
    assert keyword_search(library.db, '"caf\udce9" menu', 3, strength="any")


def test_history_never_stores_a_lone_surrogate(tmp_path):
    path = tmp_path / "tui-history.json"
    history = QueryHistory(path)
    history.add("caf\udce9")
    assert history.entries == ["caf\ufffd"]
    assert json.loads(path.read_text(encoding="utf-8")) == {"queries": ["caf\ufffd"]}
    # a file written by an older version with an escaped surrogate loads clean and saves again
    path.write_text('{"queries": ["old \\udce9 query", "ok"]}', encoding="utf-8")
    history = QueryHistory(path)
    assert history.entries == ["old \ufffd query", "ok"]
    history.add("next")
    assert json.loads(path.read_text(encoding="utf-8"))["queries"] == ["old \ufffd query", "ok", "next"]
    history.add("x" * 100_000)  # kept as searched: cut like the query itself
    assert history.entries[-1] == "x" * MAX_QUERY_CHARS


# -- 9: empty queries, hostile queries --------------------------------------------------------
@pytest.mark.parametrize("query", ["", "   ", "\t\n", "\x00", " \x00 "])
def test_blank_query_answers_no_hits_with_a_notice(searcher, query):
    for mode in MODES:
        result = searcher.search(SearchRequest(query, k=5, mode=mode))
        assert result.hits == [] and result.notice == EMPTY_QUERY_NOTICE, mode


def test_keyword_query_without_words_says_so(searcher):
    for query in ('"', "*", "-", ":", "^", "?!.,;", "🙂🙂", "((", "- : ^ *"):
        result = searcher.search(SearchRequest(query, k=5, mode="keyword"))
        assert result.hits == [] and result.notice == NO_WORDS_NOTICE, query
        assert searcher.search(SearchRequest(query, k=3, mode="vector")).hits  # meaning search still answers


def _check_sane(result, k):
    assert len(result.hits) <= k
    assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
    assert all(math.isfinite(h.score) for h in result.hits)
    plain(result)


def test_hostile_queries_end_to_end(searcher):
    distinct_cjk = " ".join(f"发票{i}号" for i in range(20000))  # more terms than SQLite takes
    long_latin = " ".join(f"word{i}" for i in range(20000))
    hostile = ["x" * 100_000, long_latin[:100_000], distinct_cjk[:100_000], "a\x00b invoice",
               'invoice" AND "', "invoice*", "NEAR(invoice total)", "-invoice", "total:invoice",
               "^invoice", "invoice OR NOT", "שלום עולם", "مرحبا", "🙂 party",
               "\u202eevil\u202c"]
    for query in hostile:
        for mode in MODES:
            t = time.perf_counter()
            result = searcher.search(SearchRequest(query, k=3, mode=mode))
            assert time.perf_counter() - t < 10, (query[:30], mode)
            _check_sane(result, 3)
            assert len(result.query) <= MAX_QUERY_CHARS
            if len(query) > MAX_QUERY_CHARS:
                assert "cut to its first 4,000 characters" in result.notice
    # FTS5 syntax is text: each of these is a keyword query for the word "invoice"
    for query in ('invoice" AND "', "NEAR(invoice", "-invoice", "^invoice", "invoice:", "invoice*"):
        hits = searcher.search(SearchRequest(query, k=3, mode="keyword")).hits
        assert hits and "invoice" in hits[0].text.lower(), query
    # right-to-left words are found by keyword search
    for query in ("שלום", "مرحبا"):
        hits = searcher.search(SearchRequest(query, k=3, mode="keyword")).hits
        assert hits and hits[0].path.endswith("rtl.txt"), query


def test_keyword_search_caps_the_number_of_terms(markup_library):
    library, _, _ = markup_library
    cjk = " ".join(f"发票{i}号" for i in range(2000))  # SQLite: "Expression tree is too large"
    for strength in ("all", "any"):
        assert keyword_search(library.db, cjk, 5, strength=strength) == []
    latin = " ".join(f"zz{i}" for i in range(3 * MAX_TERMS))
    assert keyword_search(library.db, latin + " invoice", 5, strength="any") == []  # cut before it
    assert keyword_search(library.db, "invoice " + latin, 5, strength="any")  # the first words count


def test_highlighting_keeps_a_bounded_number_of_terms():
    terms = query_terms(" ".join(f"term{i}" for i in range(5000)))
    assert len(terms) == MAX_HIGHLIGHT_TERMS


# -- 9: unknown space, moved bundle -----------------------------------------------------------
def test_unknown_space_is_an_error_naming_the_spaces_in_every_mode(searcher):
    for mode in MODES:
        with pytest.raises(SearchError) as e:
            searcher.search(SearchRequest("invoice", mode=mode, space="hef"))
        assert "no vector space 'hef'" in e.value.message, mode
        assert "npu-sim, cpu-fp32" in e.value.message and "--space" in e.value.hint


def test_moved_bundle_names_the_old_place_and_the_bundle_option(tiny_bert_bundle, tmp_path,
                                                                 monkeypatch):
    monkeypatch.delenv("HEFSEARCH_BUNDLE", raising=False)
    bundle = Path(shutil.copytree(tiny_bert_bundle, tmp_path / "bundle"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The invoice is due in March.")
    library = Library.open(tmp_path / "lib")
    try:
        with Encoder.open(bundle, backend="cpu") as enc:
            sync(library, [docs], [enc])
        bundle.rename(tmp_path / "moved-bundle")
        for attempt in (lambda: Searcher(library).search(SearchRequest("invoice", mode="vector")),
                        lambda: resolve_bundle(library, None)):
            with pytest.raises(LibraryError) as e:
                attempt()
            assert f"was built with the bundle at {bundle.resolve()}, which is gone" in e.value.message
            assert e.value.hint.startswith("Pass --bundle PATH (or set HEFSEARCH_BUNDLE)")
        # keyword search needs no bundle; --bundle with the new place works
        assert Searcher(library).search(SearchRequest("invoice", mode="keyword")).hits
        assert Searcher(library, bundle=str(tmp_path / "moved-bundle")).search(SearchRequest("invoice", mode="vector")).hits
        # the TUI has no --bundle option: HEFSEARCH_BUNDLE reaches it too
        monkeypatch.setenv("HEFSEARCH_BUNDLE", str(tmp_path / "moved-bundle"))
        assert Searcher(library).search(SearchRequest("invoice", mode="vector")).hits
    finally:
        library.close()
    r = CliRunner().invoke(main, ["search", "invoice", "--library", str(tmp_path / "lib")],
                           env={"HEFSEARCH_BUNDLE": None})
    assert r.exit_code == 2 and "which is gone" in r.output and "--bundle PATH" in r.output


# -- 4: paths with escaped non-UTF-8 bytes ------------------------------------------------------
def test_path_filter_matches_escaped_names_given_either_way(searcher):
    for glob in ("caf\udce9*", "caf\\xe9*", "*/caf\\xe9.txt"):  # from a shell: raw byte or typed escape
        for mode in MODES:
            hits = searcher.search(SearchRequest("menu espresso", k=3, mode=mode, filters=Filters(path_glob=glob))).hits
            assert hits and all(h.path.endswith("caf\\xe9.txt") for h in hits), (glob, mode)


def test_opening_a_hit_uses_the_file_name_bytes_on_disk(tmp_path):
    raw = os.fsencode(tmp_path) + b"/caf\xe9.txt"
    with open(raw, "wb") as f:
        f.write(b"text")
    stored = raw.decode("utf-8", "backslashreplace")  # how the library stores and shows it
    assert stored.endswith("caf\\xe9.txt")
    plan = plan_open(stored, line=3, env={"EDITOR": "vim"})
    assert os.fsencode(plan.argv[-1]) == raw and plan.argv[:2] == ["vim", "+3"]
    # a file really named with a backslash is left as it is
    literal = tmp_path / "caf\\xe9.txt"
    literal.write_text("x")
    assert on_disk_path(str(literal)) == str(literal)
    assert on_disk_path(str(tmp_path / "missing\\xe9.txt")) == str(tmp_path / "missing\\xe9.txt")


# -- CLI ----------------------------------------------------------------------------------------
def cli(*args):
    return CliRunner().invoke(main, ["search", *map(str, args)],
                              env={"HEFSEARCH_BUNDLE": None, "COLUMNS": "250"})


def test_cli_blank_query_is_a_usage_error(markup_library):
    library, _, _ = markup_library
    for query in ("", "   "):
        r = cli(query, "--library", library.path)
        assert r.exit_code == 2, r.output
        assert "The query is empty" in r.output and "hint:" in r.output and "Traceback" not in r.output


def test_cli_unknown_space_in_keyword_mode(markup_library):
    library, _, _ = markup_library
    r = cli("invoice", "--mode", "keyword", "--space", "hef", "--library", library.path)
    assert r.exit_code == 2 and "no vector space 'hef'" in r.output and "npu-sim, cpu-fp32" in r.output


def test_cli_prints_names_and_filters_that_look_like_markup(markup_library):
    library, _, _ = markup_library
    r = cli("invoice", "--mode", "keyword", "--library", library.path)
    assert r.exit_code == 0, r.output
    assert "[/]x.txt" in r.output and "[bold]total[/bold]" in r.output
    r = cli("invoice", "--mode", "keyword", "--path", "[/]*nothing", "--library", library.path)
    assert r.exit_code == 0 and "No results. (filters: path [/]*nothing)" in r.output


def test_cli_query_with_bytes_a_terminal_could_not_decode(markup_library):
    """A real process: the query arrives as raw bytes in argv (LC_ALL=C: Python decodes them
    with surrogateescape, as from a terminal whose encoding is not UTF-8)."""
    library, _, _ = markup_library
    env = {**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": "", "HEFSEARCH_THREADS": "1"}
    env.pop("HEFSEARCH_BUNDLE", None)
    r = subprocess.run([sys.executable, "-m", "hefsearch", "search", b"caf\xe9 menu", "--json",
                        "--mode", "keyword", "--library", library.path], capture_output=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    result = json.loads(r.stdout.decode("utf-8"))
    assert result["query"] == "caf\ufffd menu" and "not valid UTF-8" in result["notice"]
    assert result["hits"] and result["hits"][0]["path"].endswith("caf\\xe9.txt")


# -- TUI ----------------------------------------------------------------------------------------
SIZE = (120, 36)


def texts(option_list) -> str:
    return "\n".join(str(option_list.get_option_at_index(i).prompt) for i in range(option_list.option_count))


@pytest.fixture
def app_factory(markup_library):
    library, encoders, _ = markup_library
    return lambda **kw: build_app(library, encoders, **kw)


async def test_tui_shows_markup_names_and_texts_literally_everywhere(app_factory, markup_library):
    library, _, root = markup_library
    app = app_factory(k=5, mode="keyword")
    async with app.run_test(size=SIZE) as pilot:
        # results list and preview
        await search(pilot, app, "invoice tomatoes", type_keys=False)
        await search(pilot, app, "invoice", type_keys=False)
        shown = texts(app.results)
        assert "[/]x.txt" in shown and "[bold]total[/bold]" in shown
        await wait_for(pilot, lambda: app.preview.hit_widget is not None, what="preview")
        preview = str(app.preview.hit_widget.render())
        assert "[bold]total[/bold]" in preview and "[link=https://x]here[/link]" in preview
        await search(pilot, app, "tomatoes garden", type_keys=False)
        assert "[bold]y.txt" in texts(app.results) and "[red]Tomatoes[/red]" in texts(app.results)
        # compare view (npu-sim vs cpu-fp32)
        await pilot.press("f3")
        await search(pilot, app, "invoice total", type_keys=False)
        both = texts(app.compare_view.left.hit_list) + texts(app.compare_view.right.hit_list)
        assert "]x.txt" in both and "[bold]total[/bold]" in both
        await pilot.press("f3")
        # library screen: the failed file is "[/]broken.txt"
        await pilot.press("f4")
        assert isinstance(app.screen, LibraryScreen)
        table = app.screen.query_one("#failures", DataTable)
        await wait_for(pilot, lambda: table.row_count and str(table.get_row_at(0)[0]) != "—",
                       what="failures")
        rows = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
        assert rows == [[str(root / "[" / "]broken.txt"), library.status().failures[0][1]]]
        # re-index progress naming a file
        app._progress(1, 3, "indexing · 1/3 files · [/]x.txt [bold]y.txt")
        await pilot.pause()
        sync_text = str(app.screen.query_one("#sync-text", Static).render())
        assert "[/]x.txt [bold]y.txt" in sync_text
        await pilot.press("escape")
        await pilot.pause()


async def test_tui_errors_and_notices_are_not_markup(app_factory):
    app = app_factory(k=5, mode="keyword")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.last_status is not None, what="status")

        def failing(*args, **kwargs):
            raise SearchError("Cannot read [/]x.txt [bold]y", "Fix [red]it[/red] and retry.")
        app.session.searcher.search = failing
        await search(pilot, app, "invoice", type_keys=False)
        assert "Search failed: Cannot read [/]x.txt [bold]y" in str(app.notice_bar.render())
        await pilot.pause(0.3)
        toasts = " ".join(str(t.render()) for t in app.screen.query("Toast"))
        assert "Cannot read [/]x.txt [bold]y" in toasts and "Fix [red]it[/red] and retry." in toasts


async def test_tui_blank_query_says_why_nothing_is_searched(app_factory):
    app = app_factory(k=5, mode="vector")
    async with app.run_test(size=SIZE) as pilot:
        await search(pilot, app, "caf\udce9 menu", type_keys=False)  # a lone surrogate in the TUI too
        assert app.last_result.query == "caf\ufffd menu" and app.last_result.hits
        assert "not valid UTF-8" in str(app.notice_bar.render())
        assert app.history.entries[-1] == "caf\ufffd menu"
        seq = app._seq
        app.search_bar.query_input.value = "   "
        app.search_bar.query_input.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert app._seq == seq  # nothing searched
        assert EMPTY_QUERY_NOTICE in str(app.notice_bar.render()) and app.notice_bar.has_class("visible")
        # a real query afterwards clears it, and Enter still searches
        await search(pilot, app, "menu", type_keys=False)
        assert app.last_result.hits and not app.notice_bar.has_class("visible")

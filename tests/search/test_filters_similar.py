"""Filters everywhere (--since/--until by file mtime, --type, --lang stored once at indexing,
--path) and "more like this" (``hefsearch similar PATH[:CHUNK]``, the session, the TUI key)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from click.testing import CliRunner

from hefsearch.search.filters import FilterError, Filters, make_filters, parse_filter_line, parse_when
from tests.support.serve_fixtures import build_library, write_docs


@pytest.fixture
def small_library(tiny_bert_bundle, tmp_path):
    docs = write_docs(tmp_path / "docs")
    return docs, build_library(tmp_path / "lib", docs, tiny_bert_bundle)


def _cli(*args):
    from hefsearch.cli.main import main

    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result


def _names(out: str) -> list[str]:
    """The files of the hits (a file with several matching chunks once)."""
    return sorted({h["path"].rsplit("/", 1)[1] for h in json.loads(out)["hits"]})


def test_when_reads_dates_times_and_ages():
    now = 1_700_000_000.0
    assert parse_when("7d", now=now) == now - 7 * 86400
    assert parse_when("12h", now=now) == now - 12 * 3600
    assert parse_when("2w", now=now) == now - 14 * 86400
    assert parse_when("2024-03-01") == datetime(2024, 3, 1).timestamp()
    assert parse_when("2024-03-01T14:30") == datetime(2024, 3, 1, 14, 30).timestamp()
    assert parse_when("2024-03-01T14:30:00Z") == 1709303400.0
    assert parse_when(None) is None and parse_when("1700000000") == 1_700_000_000.0
    with pytest.raises(FilterError, match="Cannot read --since 'yesterday'"):
        make_filters(since="yesterday")
    with pytest.raises(FilterError, match="is not before --until"):
        make_filters(since="2024-02-01", until="2024-01-01")


def test_the_filter_line_and_its_errors():
    f = parse_filter_line("since:7d lang:de,FR type:PDF type:.md path:*/tax/*", now=1_700_000_000.0)
    assert f == Filters(path_glob="*/tax/*", types=("pdf", "md"), langs=("de", "fr"),
                        since=1_700_000_000.0 - 7 * 86400)
    assert parse_filter_line("").empty and not f.empty
    assert "lang de, fr" in f.describe() and "type pdf, md" in f.describe()
    with pytest.raises(FilterError, match="not a filter"):
        parse_filter_line("pdf")
    with pytest.raises(FilterError, match="Unknown file type 'exe'"):
        parse_filter_line("type:exe")
    for wrong in ("german", "xx", "deu"):  # a word, a made-up code, a 3-letter code: none is stored
        with pytest.raises(FilterError, match="not an ISO 639-1 language code"):
            parse_filter_line(f"lang:{wrong}")


def test_search_filters_on_the_command_line(small_library):
    docs, lib = small_library
    base = ["search", "zephyr turbine", "--mode", "keyword", "--json", "--library", str(lib)]
    assert _names(_cli(*base).output) == ["alpha.md", "archive.txt", "report.html"]
    assert _names(_cli(*base, "--type", "html").output) == ["report.html"]
    assert _names(_cli(*base, "--type", "md,txt").output) == ["alpha.md", "archive.txt"]
    assert _names(_cli(*base, "--type", "markdown").output) == ["alpha.md"]
    assert _names(_cli(*base, "--until", "2021-01-01").output) == ["archive.txt"]
    assert _names(_cli(*base, "--since", "30d").output) == ["alpha.md", "report.html"]
    assert _names(_cli(*base, "--path", "*/web/*").output) == ["report.html"]
    out = _cli(*base, "--since", "30d", "--type", "md").output
    assert _names(out) == ["alpha.md"] and json.loads(out)["filters"]["types"] == ["md"]
    vector = ["search", "turbine", "--mode", "vector", "--json", "--library", str(lib)]
    assert _names(_cli(*vector, "--lang", "de").output) == ["rechnung.txt"]
    assert _names(_cli(*vector, "--until", "2021-01-01").output) == ["archive.txt"]
    empty = _cli("search", "zephyr", "--mode", "keyword", "--type", "pdf", "--library", str(lib))
    assert "No results. (filters: type pdf)" in empty.output
    bad = _cli("search", "zephyr", "--since", "soon", "--library", str(lib))
    assert bad.exit_code == 2 and "Cannot read --since 'soon'" in bad.output


def test_chunk_languages_are_detected_once_at_indexing(small_library, monkeypatch, tiny_bert_bundle):
    """Stored with the chunk; searching with --lang and later syncs detect nothing again."""
    from hefsearch.embed import language
    from hefsearch.index.library import Library

    docs, lib = small_library
    with Library.open(lib) as library:
        langs = dict(library.query("SELECT d.path, c.lang FROM chunks c JOIN documents d ON d.id = c.doc_id"))
    assert langs[str(docs / "notes/rechnung.txt")] == "de" and langs[str(docs / "notes/alpha.md")] == "en"
    calls = []
    real = language.identify
    monkeypatch.setattr(language, "identify", lambda text, **kw: calls.append(text) or real(text, **kw))
    _cli("search", "Rechnung", "--mode", "keyword", "--lang", "de", "--library", str(lib))
    _cli("index", str(docs), "--library", str(lib))
    assert calls == []
    (docs / "notes/neu.txt").write_text("Ein neuer Text über die Heizung im Winter und ihre Kosten.\n")
    _cli("index", str(docs), "--library", str(lib))
    assert len(calls) == 1 and "Heizung" in calls[0]


def test_an_older_library_gets_its_chunk_languages_once(small_library):
    from hefsearch.index.library import Library
    from hefsearch.index.sync import fill_languages

    docs, lib = small_library
    with Library.open(lib) as library:
        before = library.query("SELECT id, lang FROM chunks ORDER BY id")
        with library.write_lock(), library.transaction():
            library.db.execute("UPDATE chunks SET lang = NULL")
        with library.write_lock():
            assert fill_languages(library) == len(before) and fill_languages(library) == 0
        assert library.query("SELECT id, lang FROM chunks ORDER BY id") == before


def test_similar_path_chunk_and_id(small_library):
    docs, lib = small_library
    alpha = str(docs / "notes/alpha.md")
    whole = json.loads(_cli("similar", alpha, "--json", "--library", str(lib)).output)
    assert whole["mode"] == "similar" and whole["query"] == f"like {alpha}"
    assert _names(json.dumps(whole)) == ["archive.txt", "rechnung.txt", "report.html"]
    assert alpha not in {h["path"] for h in whole["hits"]} and whole["backend"] == "CPU FP32"
    first = json.loads(_cli("similar", f"{alpha}:1", "--json", "--library", str(lib), "-k", "2").output)
    assert first["query"] == f"like {alpha} chunk 1" and len(first["hits"]) == 2
    by_id = json.loads(_cli("similar", "--id", str(first["hits"][0]["chunk_id"]), "--json", "--type", "md",
                            "--library", str(lib)).output)
    assert [h["path"] for h in by_id["hits"]] == [alpha]
    missing = _cli("similar", str(docs / "nope.md"), "--library", str(lib))
    assert missing.exit_code == 2 and "is not a document of the library" in missing.output
    beyond = _cli("similar", f"{alpha}:9", "--library", str(lib))
    assert beyond.exit_code == 2 and "has 1 chunk(s); there is no chunk 9" in beyond.output


async def test_tui_filter_line_and_similar_key(small_library, tiny_bert_bundle):
    pytest.importorskip("textual")
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from tests.support.tui_support import build_app, wait_for

    docs, lib = small_library
    with Library.open(lib) as library, Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        app = build_app(library, {"cpu-fp32": enc}, mode="keyword")
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_for(pilot, lambda: bool(app.status_bar.freshness), what="the library's freshness")
            assert app.status_bar.freshness.startswith("synced ")
            app.search_bar.query_one("#filters").value = "until:2021-01-01"
            app.search_bar.query_input.value = "zephyr"
            app.search_bar.submit()
            await wait_for(pilot, lambda: app.last_result is not None, what="a filtered search")
            assert [h.path for h in app.last_result.hits] == [str(docs / "old/archive.txt")]
            app.search_bar.query_one("#filters").value = ""
            app.search_bar.submit()
            await wait_for(pilot, lambda: len({h.path for h in app.last_result.hits}) == 3, what="the unfiltered search")
            app.results.focus()
            before = app.answered_seq
            await pilot.press("f5")
            await wait_for(pilot, lambda: app.answered_seq > before, what="similar")
            shown = app.last_result
            assert shown.mode == "similar" and shown.hits
            assert all(h.path != shown.query.removeprefix("like ").rsplit(" chunk", 1)[0] for h in shown.hits)
            # the box no longer shows the old query; it says what the results are like
            assert app.search_bar.query_input.value == ""
            assert app.search_bar.query_input.placeholder.startswith(shown.query)
            app.search_bar.query_one("#filters").value = "type:exe"
            app.search_bar.submit()
            await pilot.pause(0.2)
            assert any("Unknown file type" in str(n.message) for n in app._notifications)


def test_similar_lists_each_document_once_with_its_cosine(tiny_bert_bundle, tmp_path):
    """A long file whose chunks are all near the asked one appears once (its nearest chunk),
    as a search lists one hit per file; ``similarity`` carries the cosine that ``score`` holds."""
    paragraph = "Zephyr turbine blades need inspection before the winter storms arrive. "
    docs = write_docs(tmp_path / "docs", {
        "old/archive.txt": "zephyr turbine archive\n",
        "notes/ask.md": paragraph * 3,
        "notes/long.md": "\n\n".join(paragraph * 40 + f" part {n}" for n in range(6)),
        "notes/other.md": "Heating costs in winter and the invoice for the boiler.\n",
    })
    lib = build_library(tmp_path / "lib", docs, tiny_bert_bundle)
    from hefsearch.index.library import Library

    long_path = str(docs / "notes/long.md")
    with Library.open(lib) as library:
        chunks = library.query("SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id "
                               "WHERE d.path = ?", (long_path,))[0][0]
    assert chunks > 1, "the long file must have several chunks for this test to mean anything"
    out = json.loads(_cli("similar", str(docs / "notes/ask.md"), "--json", "-k", "10",
                          "--library", str(lib)).output)
    paths = [h["path"] for h in out["hits"]]
    assert len(paths) == len(set(paths)) and long_path in paths
    assert all(h["similarity"] is not None and h["similarity"] == pytest.approx(h["score"]) for h in out["hits"])

"""File names and document text cannot drive the terminal: ANSI/OSC escapes (colours, the
window title), BEL, newlines and bidi overrides show escaped in every CLI table (search hits,
index and status failure lists), in error messages and log lines, and in the TUI (results,
preview, library screen, re-index progress); ``--json`` keeps the exact text.
Before, ``hefsearch search`` printed ``ESC]0;pwned BEL`` raw (it set the terminal's title), a
U+202E reversed the name after it, and a newline split the table row."""

from __future__ import annotations

import json
import logging
import os

import pytest
from click.testing import CliRunner

from hefsearch.cli.main import TerminalSafeFormatter, main
from hefsearch.base.terminal_text import for_terminal

TITLE = "\x1b]0;pwned\x07"
RED = "\x1b[31mred\x1b[0m"
RLO = "\u202e"
#: hostile name -> the same name as the terminal must show it
NAMES = {
    f"{RED}{TITLE}.txt": "\\x1b[31mred\\x1b[0m\\x1b]0;pwned\\x07.txt",
    f"invoice{RLO}fdp.txt": "invoice\\u202efdp.txt",  # shown as "invoicetxt.pdf" if raw
    "two\nlines.txt": "two\\nlines.txt",
}
BAD_NAME = "broken\x1b[5m.txt"  # a file that fails (binary)
#: one text per file (copies would be folded into one hit), each with the escapes and "platform"
TEXTS = [f"{story} {TITLE}{RED} {RLO}at the desk." for story in (
    "Pack a sweater: the night train leaves from platform nine and the sea wind is cold.",
    "Invoices for group travel go to the office next to platform two before Friday.",
    "Bicycles ride in the last carriage; buy their ticket at platform seven.")]
RAW = ("\x1b", "\x07", RLO)


def test_for_terminal_escapes_controls_and_bidi_and_keeps_text():
    assert for_terminal("plain ✓ 日本語 👩\u200d💻 عربي.txt") == "plain ✓ 日本語 👩\u200d💻 عربي.txt"
    for raw, shown in NAMES.items():
        assert for_terminal(raw) == shown
    assert for_terminal(os.fsdecode(b"caf\xe9\x1b.txt")) == "caf\\xe9\\x1b.txt"  # on top of printable()
    assert for_terminal("a\u2066b\u2069c\u200fd\x9be\x7f") == "a\\u2066b\\u2069c\\u200fd\\x9be\\x7f"
    assert for_terminal("line 1\n\tline 2\r\x1b", multiline=True) == "line 1\n\tline 2\\r\\x1b"


def no_raw(text: str) -> bool:
    return not any(c in text for c in RAW)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, tiny_bert_bundle):
    """(library, docs, index result): hostile names and text, indexed through the CLI."""
    base = tmp_path_factory.mktemp("hostile")
    docs = base / "docs"
    docs.mkdir()
    for name, text in zip(NAMES, TEXTS):
        (docs / name).write_text(text, encoding="utf-8")
    (docs / BAD_NAME).write_bytes(b"\x00\x01\x02\x03\xff\xfe" * 64)
    res = CliRunner(env={"COLUMNS": "250"}).invoke(
        main, ["index", str(docs), "--library", str(base / "lib"), "--bundle", str(tiny_bert_bundle),
               "--backend", "cpu"])
    assert res.exit_code == 3, res.output  # partial: the binary file failed
    return base / "lib", docs, res


def cli(*args, library):
    return CliRunner(env={"COLUMNS": "1000"}).invoke(main, [*args, "--library", str(library)])  # long tmp paths under xdist


def test_index_failure_table_shows_the_name_escaped(hostile):
    _, _, res = hostile
    assert no_raw(res.output), res.output
    assert "broken\\x1b[5m.txt" in res.output


def test_search_table_shows_names_and_snippets_escaped_and_json_exact(hostile):
    lib, docs, _ = hostile
    res = cli("search", "platform", "-k", "5", "--mode", "keyword", library=lib)
    assert res.exit_code == 0, res.output
    assert no_raw(res.output), res.output
    for shown in NAMES.values():
        assert shown in res.output
    assert "\\x1b]0;pwned\\x07" in res.output and "\\u202eat the desk" in res.output  # the snippets
    assert "two\nlines" not in res.output  # the name stays on its row

    out = cli("search", "platform", "-k", "5", "--mode", "keyword", "--json", library=lib).stdout
    hits = json.loads(out)["hits"]
    assert sorted(h["path"] for h in hits) == sorted(str(docs / n) for n in NAMES)
    assert all(TITLE in h["text"] for h in hits)


def test_status_failures_and_errors_show_names_escaped(hostile, tmp_path):
    lib, docs, _ = hostile
    res = cli("status", library=lib)
    assert res.exit_code == 0 and no_raw(res.output), res.output
    assert "broken\\x1b[5m.txt" in res.output
    assert json.loads(cli("status", "--json", library=lib).stdout)["failures"][0]["path"] == str(docs / BAD_NAME)

    missing = tmp_path / f"gone{TITLE}"
    res = CliRunner().invoke(main, ["index", str(missing), "--library", str(lib)])
    assert res.exit_code == 2 and "does not exist" in res.output
    assert no_raw(res.output) and "gone\\x1b]0;pwned\\x07" in res.output


def test_log_lines_show_names_escaped():
    record = logging.LogRecord("hefsearch.index", logging.WARNING, __file__, 1, "cannot read %s", (f"a{TITLE}",), None)
    line = TerminalSafeFormatter("%(levelname)s %(name)s: %(message)s").format(record)
    assert line == "WARNING hefsearch.index: cannot read a\\x1b]0;pwned\\x07"


# -- the TUI -----------------------------------------------------------------------------------
async def test_tui_results_preview_and_library_screen_show_names_escaped(hostile, tiny_bert_bundle):
    pytest.importorskip("textual")
    from textual.widgets import DataTable

    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library
    from hefsearch.tui.app import sync_progress_text
    from hefsearch.index.sync import ProgressEvent
    from tests.support.tui_support import build_app, search, wait_for

    lib_path, docs, _ = hostile
    library = Library.open(lib_path, create=False)
    try:
        app = build_app(library, {"cpu-fp32": Encoder.open(tiny_bert_bundle, backend="cpu")}, k=5, mode="keyword")
        async with app.run_test(size=(160, 40)) as pilot:
            await search(pilot, app, "platform")
            shown = [str(app.results.get_option_at_index(i).prompt) for i in range(app.results.option_count)]
            assert len(shown) == len(NAMES)
            assert all(no_raw(line) for line in shown), shown
            assert any(NAMES[f"invoice{RLO}fdp.txt"] in line for line in shown)
            assert all("\\x1b]0;pwned\\x07" in line for line in shown)  # the snippet line
            await wait_for(pilot, lambda: app.preview.hit_widget is not None, what="preview")
            title, piece = str(app.preview.border_title), str(app.preview.hit_widget.render())
            assert no_raw(title) and no_raw(piece), (title, piece)
            assert "\\x1b[31mred" in piece

            await pilot.press("f4")
            table = app.screen.query_one("#failures", DataTable)
            await wait_for(pilot, lambda: table.row_count and str(table.get_row_at(0)[0]) != "—", what="failures")
            cells = [str(c) for c in table.get_row_at(0)]
            assert cells[0] == for_terminal(str(docs / BAD_NAME)) and no_raw(cells[0])
    finally:
        library.close()
    event = ProgressEvent(phase="index", files_done=1, files_total=3, path=str(docs / f"x{TITLE}.txt"))
    assert no_raw(sync_progress_text(event)) and "x\\x1b]0;pwned\\x07.txt" in sync_progress_text(event)

"""No C0, C1 or bidi control from a document or a file name reaches a terminal, in any front end,
over a library holding a hostile mail (its Message-ID carries U+009B, a C1 CSI, and U+202E) and
hostile file names (C1, bidi isolates, rich markup): ``index`` (its notices and tables), ``search``
(the location column: before, the message key showed the CSI and U+202E raw there), ``similar``,
``status``, ``doctor``, the watcher's lines, ``serve``/``mcp`` lines and the TUI's results and
preview. ``--json`` writes those characters as JSON escapes (before: raw U+009B and U+202E), so
it stays valid JSON that reads back as the exact text; "[bold]" in a name is shown, not applied.
"""

from __future__ import annotations

import json
import re
import threading

import pytest
from click.testing import CliRunner

from hefsearch.cli.main import main
from tests.support.container_builders import make_eml, make_mbox

#: every character a terminal must never receive raw from document text or a file name
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
CSI, RLO, LRI, PDI, NEL = "\x9b", "\u202e", "\u2066", "\u2069", "\x85"
MESSAGE_ID = f"<evil{CSI}31m{RLO}txt.exe@example.org>"
NAMES = [f"report{CSI}2J{RLO}fdp.txt", f"[bold]loud[red] {LRI}iso{PDI}.md", f"nel{NEL}line.txt"]
BROKEN = f"broken{CSI}5m.txt"  # fails to read (binary): listed in the failure tables
TEXT = "The lighthouse keeper logs every passing ship{c} before dawn: {n}."
#: one story per file (near copies would be folded into one hit)
STORIES = ["the ferry to the island was late again because of fog over the harbour",
           "a cargo vessel with red sails anchored near the northern rocks at midnight",
           "two fishing boats raced home ahead of the storm with their nets still full",
           "the postman rowed across the bay with letters wrapped in oilcloth"]


def clean(text: str) -> bool:
    """No raw control but the newline and tab a plain-text output is made of."""
    return RAW.search(text) is None


def cli(*args):
    return CliRunner(env={"COLUMNS": "1000"}).invoke(main, list(args))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, tiny_bert_bundle):
    base = tmp_path_factory.mktemp("hostile_mail")
    docs = base / f"docs{RLO}"
    docs.mkdir()
    for n, name in enumerate(NAMES):
        (docs / name).write_text(TEXT.format(c=f" {CSI}33m{RLO}", n=STORIES[n]), encoding="utf-8")
    mail = make_eml(f"Ship log {CSI}1m{RLO}", TEXT.format(c=RLO, n=STORIES[-1]))
    # raw UTF-8 in the header, as a hostile sender writes it (the parser decodes it as is)
    mail = mail.replace(b"Subject:", b"Message-ID: " + MESSAGE_ID.encode() + b"\nSubject:", 1)
    (docs / f"in{RLO}box.mbox").write_bytes(make_mbox([mail]))
    (docs / BROKEN).write_bytes(b"\x00\x01\x02\xff\xfe" * 64)
    lib = base / f"lib{CSI}{LRI}"
    res = cli("index", str(docs), "--library", str(lib), "--bundle", str(tiny_bert_bundle), "--backend", "cpu")
    assert res.exit_code == 3, res.output  # partial: the binary file failed
    return lib, docs, res


def test_the_message_key_is_made_safe_where_it_is_derived():
    from hefsearch.readers.extract_mail import member_key

    key = member_key(MESSAGE_ID.strip("<>"), b"", {})
    assert clean(key) and "/" not in key
    assert key == "evil_31m_txt.exe@example.org"
    assert member_key(f"a/b\\c{LRI}\u2028\x1b", b"", {}) == "a_b_c___"


def test_every_cli_output_is_terminal_safe(hostile):
    lib, docs, index_run = hostile
    assert clean(index_run.output), index_run.output
    assert f"broken\\x9b5m.txt" in index_run.output

    search = cli("search", "lighthouse keeper", "-k", "10", "--mode", "keyword", "--library", str(lib))
    assert search.exit_code == 0 and clean(search.output), search.output
    assert "message evil_31m_txt.exe@example.org" in search.output  # the location column
    assert "report\\x9b2J\\u202efdp.txt" in search.output and "in\\u202ebox.mbox" in search.output
    assert "[bold]loud[red]" in search.output  # markup in a name is shown, not applied

    as_json = cli("search", "lighthouse keeper", "-k", "10", "--mode", "keyword", "--json", "--library", str(lib))
    assert clean(as_json.stdout), as_json.stdout  # JSON escapes (\u009b, \u202e), not raw controls
    found = json.loads(as_json.stdout)
    paths = {p for h in found["hits"] for p in [h["path"], *h["also_in"]]}  # copies of a passage fold
    assert {str(docs / n) for n in NAMES} <= paths  # JSON keeps the exact names
    mail = next(h for h in found["hits"] if h.get("message"))
    assert mail["message"] == "evil_31m_txt.exe@example.org"

    for target in (str(docs / NAMES[0]), f"{docs / f'in{RLO}box.mbox'}/{mail['message']}"):
        similar = cli("similar", target, "--library", str(lib))
        assert similar.exit_code == 0 and clean(similar.output), similar.output
        assert "\\u202e" in similar.output

    status = cli("status", "--library", str(lib))
    assert status.exit_code == 0 and clean(status.output), status.output
    assert "broken\\x9b5m.txt" in status.output and "docs\\u202e" in status.output
    status_json = cli("status", "--json", "--library", str(lib)).stdout
    assert clean(status_json) and json.loads(status_json)["failures"][0]["path"] == str(docs / BROKEN)

    doctor = cli("doctor", "--library", str(lib))
    assert clean(doctor.output), doctor.output
    assert "lib\\x9b\\u2066" in doctor.output  # the library's path


def test_watcher_lines_are_terminal_safe(hostile, tiny_bert_bundle, capsys):
    from hefsearch.app.watch import WatchOptions, Watcher
    from hefsearch.cli.cmd_watch import print_watch_event
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.encoders import EncoderChoice
    from tests.app.test_watch import wait_until

    lib, docs, _ = hostile
    (docs / f"new{CSI}6n{RLO}.txt").write_bytes(b"\x00\xff" * 200)  # found by the catch-up, fails
    events = []

    def seen(event):
        events.append(event)
        print_watch_event(event)

    watcher = Watcher(lib, options=WatchOptions(debounce_ms=200, step_ms=50, rescan_s=0),
                      open_encoders=lambda: EncoderChoice([Encoder.open(tiny_bert_bundle, backend="cpu", threads=1)]),
                      on_event=seen)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: any(e.kind == "run" for e in events), what="the catch-up")
    finally:
        watcher.stop()
        thread.join(timeout=10)
    err = capsys.readouterr().err
    assert clean(err), err
    assert "docs\\u202e" in err and "\\x9b" in err, err  # the folder, the files that fail


async def test_tui_render_paths_are_terminal_safe(hostile, tiny_bert_bundle):
    pytest.importorskip("textual")
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library
    from tests.support.tui_support import build_app, search, wait_for

    lib_path, _, _ = hostile
    library = Library.open(lib_path, create=False)
    try:
        app = build_app(library, {"cpu-fp32": Encoder.open(tiny_bert_bundle, backend="cpu")}, k=10, mode="keyword")
        async with app.run_test(size=(200, 50)) as pilot:
            await search(pilot, app, "lighthouse keeper")
            shown = [str(app.results.get_option_at_index(i).prompt) for i in range(app.results.option_count)]
            assert len(shown) >= 2, shown  # the files (copies of one passage fold into one) and the mail
            assert all(clean(line) for line in shown), shown
            assert any("message evil_31m_txt.exe@example.org" in line for line in shown), shown
            for index in range(len(shown)):  # every hit's preview: title (name, location) and text
                app.results.highlighted = index
                await wait_for(pilot, lambda: app.preview.hit_widget is not None, what="preview")
                await pilot.pause()
                title, piece = str(app.preview.border_title), str(app.preview.hit_widget.render())
                assert clean(title) and clean(piece), (title, piece)
    finally:
        library.close()


def test_server_and_mcp_lines_are_terminal_safe(hostile, capsys):
    """``hefsearch serve`` and ``hefsearch mcp`` print the library's path, a recorded server's
    complaints (naming serve.json) and the watcher's events on stderr."""
    from hefsearch.cli.cmd_serve import _say
    from hefsearch.serve.trust import Untrusted, trusted_server

    lib, _, _ = hostile
    (lib / "serve.json").write_text(json.dumps({"pid": "x", "url": "http://127.0.0.1:1"}))
    (lib / "serve.json").chmod(0o644)
    with pytest.raises(Untrusted) as refused:
        trusted_server(lib)
    _say(f"hefsearch mcp: not using the recorded server: {refused.value.message}")
    _say(f"hefsearch mcp: answering from {lib} in this process")
    err = capsys.readouterr().err
    assert clean(err) and err.count("lib\\x9b\\u2066") == 2, err
    (lib / "serve.json").unlink()

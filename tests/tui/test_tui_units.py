"""The TUI's pure parts: how a hit is opened (argv, never a shell), query history, text
highlighting, the preview's context stitching, the choice of spaces to compare, and the
session's re-index."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from hefsearch.tui import launch
from hefsearch.tui.history import QueryHistory
from hefsearch.tui.present import (pick_compare_spaces, query_terms, rank_move, space_label,
                                   term_spans)


# -- launching ---------------------------------------------------------------------------
@pytest.mark.parametrize("editor, expected", [
    ("vim", ["vim", "+12", "/d/a b;rm -rf ~.txt"]),
    ("nvim -p", ["nvim", "-p", "+12", "/d/a b;rm -rf ~.txt"]),
    ("/usr/bin/nano", ["/usr/bin/nano", "+12", "/d/a b;rm -rf ~.txt"]),
    ("code --wait", ["code", "--wait", "--goto", "/d/a b;rm -rf ~.txt:12"]),
    ("hx", ["hx", "/d/a b;rm -rf ~.txt:12"]),
    ("'/opt/My Editor/ed' -x", ["/opt/My Editor/ed", "-x", "+12", "/d/a b;rm -rf ~.txt"]),
])
def test_editor_argv_keeps_the_path_one_argument(editor, expected):
    plan = launch.plan_open("/d/a b;rm -rf ~.txt", line=12, kind="text", env={"EDITOR": editor})
    assert plan.argv == expected
    assert plan.terminal is True


def test_visual_wins_over_editor_and_pdf_goes_to_the_system_opener():
    env = {"VISUAL": "vim", "EDITOR": "nano", "DISPLAY": ":0"}
    assert launch.plan_open("/d/x.md", line=3, env=env).argv == ["vim", "+3", "/d/x.md"]
    pdf = launch.plan_open("/d/report.pdf", line=40, kind="pdf", env=env, platform="linux")
    assert pdf.argv == ["xdg-open", "/d/report.pdf"] and pdf.terminal is False
    mac = launch.plan_open("/d/Report.PDF", line=1, env=env, platform="darwin")
    assert mac.argv == ["open", "/d/Report.PDF"]


def test_default_launcher_runs_argv_without_a_shell(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(launch.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(launch.subprocess, "run", lambda argv, **kw: calls.append(("run", argv, kw)))
    monkeypatch.setattr(launch.subprocess, "Popen",
                        lambda argv, **kw: calls.append(("popen", argv, kw)) or SimpleNamespace(wait=lambda: 0))
    launch.run_argv(["vim", "+2", "/x/a;b.txt"], terminal=True)
    launch.run_argv(["xdg-open", "/x/r.pdf"], terminal=False)
    assert [c[:2] for c in calls] == [("run", ["vim", "+2", "/x/a;b.txt"]), ("popen", ["xdg-open", "/x/r.pdf"])]
    assert all(not c[2].get("shell", False) for c in calls)
    assert calls[1][2]["start_new_session"] is True


@pytest.mark.parametrize("path,kind", [("/d/receipt.png", None), ("/d/report.pdf", "pdf"), ("/d/letter.docx", None)])
def test_without_a_desktop_a_binary_file_is_refused_with_the_reason(path, kind):
    """Over SSH (no DISPLAY, no WAYLAND_DISPLAY) xdg-open has nowhere to show a PNG, PDF or DOCX:
    the plan says so instead of starting it; text still goes to the terminal editor."""
    headless = {"EDITOR": "vim", "TERM": "xterm"}
    with pytest.raises(launch.NoDesktop) as err:
        launch.plan_open(path, line=2, kind=kind, env=headless, platform="linux")
    assert Path(path).name in err.value.message and "DISPLAY" in err.value.message
    assert "reader" in err.value.hint
    assert launch.plan_open("/d/notes.md", line=2, env=headless, platform="linux").argv == ["vim", "+2", "/d/notes.md"]
    for desktop in ({"DISPLAY": ":0"}, {"WAYLAND_DISPLAY": "wayland-0"}):
        assert launch.plan_open(path, kind=kind, env={**headless, **desktop}, platform="linux").argv[0] == "xdg-open"
    assert launch.plan_open(path, kind=kind, env=headless, platform="darwin").argv[0] == "open"


def test_a_detached_opener_is_reaped_and_leaves_no_defunct_child(tmp_path):
    """The opener (xdg-open) exits after handing the file on; the TUI must not keep it as a
    zombie. A real short-lived program stands in for it."""
    proc = launch.run_argv([sys.executable, "-c", "pass"], terminal=False)
    deadline = time.monotonic() + 30
    while proc.returncode is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.returncode == 0  # waited for by the launcher's thread, not by this test
    assert not Path(f"/proc/{proc.pid}").exists() or "Z" not in _proc_state(proc.pid)


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def test_missing_program_is_a_readable_error(monkeypatch):
    monkeypatch.setattr(launch.shutil, "which", lambda name: None)
    with pytest.raises(launch.LaunchError, match="Program not found: nosuch-editor"):
        launch.run_argv(["nosuch-editor", "x"], terminal=True)
    with pytest.raises(launch.LaunchError, match="No editor configured"):
        launch.editor_command({})


# -- history -----------------------------------------------------------------------------
def test_history_walks_like_a_shell_and_persists(tmp_path):
    path = tmp_path / "lib" / "tui-history.json"
    h = QueryHistory(path)
    for q in ["rechnung 2023", "bahnhof", "rechnung 2023", "  "]:
        h.add(q)
    assert h.entries == ["bahnhof", "rechnung 2023"]  # moved to the end, blanks ignored
    assert h.older("draft") == "rechnung 2023"
    assert h.older("ignored") == "bahnhof"
    assert h.older("ignored") is None  # at the oldest
    assert h.newer() == "rechnung 2023"
    assert h.newer() == "draft"  # back to what was typed before walking
    assert h.newer() is None
    again = QueryHistory(path)
    assert again.entries == ["bahnhof", "rechnung 2023"]
    assert json.loads(path.read_text())["queries"] == again.entries


def test_history_survives_a_damaged_file_and_keeps_a_limit(tmp_path):
    path = tmp_path / "h.json"
    path.write_text("{not json")
    h = QueryHistory(path, limit=3)
    assert h.entries == []
    for i in range(5):
        h.add(f"q{i}")
    assert h.entries == ["q2", "q3", "q4"]


# -- presentation ------------------------------------------------------------------------
def test_query_terms_and_spans_are_case_insensitive_longest_first():
    terms = query_terms("Where is the Note notebook a 发票")
    assert terms[0] == "notebook" and "发票" in terms
    assert not {"a", "the", "is", "where"} & set(terms)  # function words are not highlighted
    assert query_terms("the who") == ["the", "who"]  # unless there is nothing else
    text = "My NOTEBOOK has notes. 这是一张发票"
    spans = term_spans(text, terms)
    assert [text[a:b] for a, b in spans] == ["NOTEBOOK", "note", "发票"]


@dataclass
class _Info:
    name: str
    kind: str
    label: str = ""


def test_compare_pairs_an_npu_space_with_the_fp32_space():
    assert pick_compare_spaces([_Info("cpu-fp32", "cpu-fp32")]) is None
    assert pick_compare_spaces([_Info("npu-sim-a8", "npu-sim"), _Info("cpu-fp32", "cpu-fp32")]) == (
        "npu-sim-a8", "cpu-fp32")
    # a real HEF space wins over a simulation
    assert pick_compare_spaces([_Info("npu-sim", "npu-sim"), _Info("hef", "hef"),
                                _Info("cpu-fp32", "cpu-fp32")]) == ("hef", "cpu-fp32")
    assert space_label(_Info("hef", "hef", "Hailo-10H")) == "Hailo-10H"
    assert space_label(_Info("cpu-fp32", "cpu-fp32")) == "CPU FP32"


def test_rank_move_names_the_other_sides_rank():
    other = {10: 1, 11: 4}
    assert rank_move(SimpleNamespace(chunk_id=10, rank=1), other) == "="
    assert rank_move(SimpleNamespace(chunk_id=11, rank=2), other) == "↔4"
    assert rank_move(SimpleNamespace(chunk_id=12, rank=3), other) == ""


def test_context_pieces_do_not_repeat_chunk_overlap():
    pytest.importorskip("textual")
    from hefsearch.tui.widgets.preview import context_pieces

    doc = "Alpha one. Beta two. Gamma three. Delta four."
    def rec(i, a, b):
        return SimpleNamespace(id=i, ordinal=i, start=a, end=b, text=doc[a:b])
    records = [rec(0, 0, 20), rec(1, 11, 33), rec(2, 21, 45)]  # overlapping chunks
    hit = SimpleNamespace(chunk_id=1, start=11, end=33, text=doc[11:33])
    pieces = context_pieces(records, hit)
    assert pieces == [("Alpha one. ", False), ("Beta two. Gamma three.", True), (" Delta four.", False)]
    assert "".join(p for p, _ in pieces) == doc


def test_cli_modules_do_not_import_textual():
    code = ("import sys, json, hefsearch.cli.main, hefsearch.cli.cmd_tui, hefsearch.tui.launch, "
            "hefsearch.tui.history, hefsearch.tui.present; print(json.dumps('textual' in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) is False


def test_tui_command_help_and_missing_library(tmp_path):
    from click.testing import CliRunner

    from hefsearch.cli.main import main

    runner = CliRunner()
    help_out = runner.invoke(main, ["tui", "--help"])
    assert help_out.exit_code == 0
    for key in ("F2", "F3", "F4", "Ctrl+O", "--live", "--library"):
        assert key in help_out.output
    missing = runner.invoke(main, ["tui", "--library", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2
    assert "No library at" in missing.output and "Traceback" not in missing.output


def test_fit_name_keeps_the_extension_and_timings_keep_pipeline_order():
    from hefsearch.tui.present import fit_name, timing_parts

    assert fit_name("short.md", 20) == "short.md"
    assert fit_name("raspberry-pi-5-hailo-setup.md", 16) == "raspberry-pi….md"
    assert len(fit_name("a-very-long-name-without-extension", 10)) == 10
    parts = timing_parts({"total": 50.0, "snippet": 40.0, "fetch": 1.25, "encode": 3.0, "search": 0.5})
    assert [n for n, _ in parts] == ["encode", "search", "fetch", "snippet", "total"]
    assert dict(parts)["fetch"] == "1.2 ms" and dict(parts)["snippet"] == "40.0 ms"


def test_reindex_encoders_cover_every_space_default_first(tiny_bert_bundle, tmp_path):
    """The TUI's re-index embeds with the library's own backends (index.encoders' choice)."""
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from hefsearch.index.encoders import open_sync_encoders
    from tests.support.tui_support import cpu_encoder, write_corpus

    root = write_corpus(tmp_path / "docs", {"a.txt": "hello world"})
    with Library.open(tmp_path / "lib") as lib:
        sync(lib, [root], [cpu_encoder(tiny_bert_bundle)])
        encoders = open_sync_encoders(lib).encoders
        try:
            assert [e.backend.name for e in encoders] == ["cpu"]
            assert encoders[0].fingerprint == lib.space("cpu-fp32").info.fingerprint
        finally:
            for e in encoders:
                e.close()


def test_session_reindex_closes_the_encoders_it_opened(monkeypatch, tmp_path):
    """The app's re-index goes through its session: encoders opened for the run, closed after
    it even when the sync fails."""
    from hefsearch.index.encoders import EncoderChoice
    from hefsearch.index.sync import SyncReport
    from hefsearch.tui.session import TuiSession

    class Closing:
        closed = False

        def close(self):
            self.closed = True

    opened, seen = [], []

    def open_encoders():
        opened.extend([Closing(), Closing()])
        return EncoderChoice(opened)

    def fake_sync(library, roots, encoders, options=None, *, progress):
        seen.append((roots, encoders))
        if len(seen) > 1:
            raise OSError("disk gone")
        return SyncReport(added=1)

    monkeypatch.setattr("hefsearch.index.sync.sync", fake_sync)
    monkeypatch.setattr("hefsearch.search.language_neutral.keep_language_neutral", lambda *a: [])
    session = TuiSession(SimpleNamespace(path=tmp_path), searcher=None, open_encoders=open_encoders)
    assert session.reindex([tmp_path], progress=print).added == 1
    assert seen == [([tmp_path], opened)] and all(e.closed for e in opened)
    opened.clear()
    with pytest.raises(OSError):
        session.reindex([tmp_path], progress=print)
    assert len(opened) == 2 and all(e.closed for e in opened)


def test_sync_progress_line_names_phase_files_rate_and_file():
    pytest.importorskip("textual")
    from hefsearch.index.sync import ProgressEvent
    from hefsearch.tui.app import sync_progress_text

    event = ProgressEvent("index", files_total=9, files_done=3, chunks_done=40, chunks_per_s=12.4,
                          path="/d/notes/a b.txt")
    assert sync_progress_text(event) == "indexing · 3/9 files · 40 chunks (12/s) · a b.txt"
    assert sync_progress_text(ProgressEvent("scan")) == "scanning"
    assert sync_progress_text(ProgressEvent("backfill", path="/d/x.txt")) == "back-filling spaces"
    inside = ProgressEvent("index", files_total=1, path="/d/inbox.mbox/m1@x", where="/d/inbox.mbox: message 812")
    assert sync_progress_text(inside) == "indexing · 0/1 files · inbox.mbox: message 812"


def test_the_library_view_names_the_folders_an_interrupted_run_left_unfinished():
    pytest.importorskip("textual")
    from hefsearch.tui.screens.library import last_sync_words

    st = SimpleNamespace(writing=False, interrupted="2026-01-02T10:00:00+00:00", unfinished=["/d/a\x1b[31m"],
                         last_sync="2026-01-03T10:00:00+00:00")
    words = last_sync_words(st)
    assert "interrupted" in words and "not finished: /d/a" in words and "\x1b" not in words  # escaped
    assert last_sync_words(SimpleNamespace(writing=False, interrupted=None, unfinished=[],
                                           last_sync="2026-01-03")) == "2026-01-03"


def test_index_progress_without_a_terminal_prints_a_line_per_phase_and_interval():
    """A long ``index`` writing to a file or the journal is never silent."""
    import io

    from rich.console import Console

    from hefsearch.cli.progress import SyncProgress
    from hefsearch.index.sync_types import ProgressEvent

    out = io.StringIO()
    now = [0.0]
    progress = SyncProgress(Console(file=out, force_terminal=False, width=200), every_s=60, clock=lambda: now[0])
    events = [(0, ProgressEvent("scan")), (2, ProgressEvent("index", files_total=50, files_done=1)),
              *[(t, ProgressEvent("index", files_total=50, files_done=t // 10, chunks_done=t, chunks_per_s=1.0,
                                  eta_s=300 - t)) for t in range(5, 300, 5)],
              (300, ProgressEvent("done", files_total=50, files_done=50))]
    with progress:
        for t, ev in events:
            now[0] = t
            progress.update(ev)
    lines = out.getvalue().splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["Scanning", "Indexing", "Indexing", "Indexing", "Indexing",
                                                  "Indexing", "Done"]
    assert lines[2] == "Indexing: 6/50 files, 65 chunks, 1.0 chunks/s, ETA 3:55, 0:01:05 elapsed"


def test_the_results_list_draws_the_relevance_line_above_the_first_weaker_hit():
    from hefsearch.search.searcher import Hit
    from hefsearch.tui.widgets.results import hit_prompt

    hits = [Hit(rank=i, chunk_id=i, score=0.9, path=f"/d/f{i}.txt", page=None, line=1, start=0, end=5,
                snippet="a snippet", text="t", doc_kind="text", similarity=0.9) for i in (1, 2, 3)]
    line = {"above": 1, "cut": 4.5, "median": 0.8, "spread": 0.004, "threshold": 0.818}
    shown = [hit_prompt(h, [], 80, relevance=line).plain for h in hits]
    assert [("weaker matches below (cosine under 0.818)" in s) for s in shown] == [False, True, False]
    assert shown[1].index("weaker matches") < shown[1].index("f2.txt")  # the rule comes first
    assert all("weaker" not in hit_prompt(h, [], 80).plain for h in hits)  # no line, no rule

"""The app in a real terminal: ``hefsearch tui`` in a detached tmux session, keys sent,
screen captured (slow: a real process and terminal; run with -m slow)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from hefsearch.index.library import Library
from hefsearch.index.sync import sync
from tests.support.tui_support import CORPUS, cpu_encoder, write_corpus

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


def test_tui_runs_in_tmux_and_answers_a_query(tiny_bert_bundle, tmp_path):
    root = write_corpus(tmp_path / "docs")
    with Library.open(tmp_path / "library") as lib:
        sync(lib, [root], [cpu_encoder(tiny_bert_bundle)])
    sock = f"hefsearch-test-{tmp_path.name}"

    def tmux(*args):
        return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True)

    def screen_with(needle, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = tmux("capture-pane", "-p", "-t", "t").stdout
            if needle in out:
                return out
            time.sleep(0.2)
        raise AssertionError(f"{needle!r} never appeared:\n{out}")

    tmux("new-session", "-d", "-s", "t", "-x", "100", "-y", "30", "env", "TERM=xterm-256color",
         f"HEFSEARCH_HOME={tmp_path / 'home'}", sys.executable, "-m", "hefsearch", "tui",
         "--library", str(tmp_path / "library"), "--mode", "keyword")
    try:
        screen_with("Type a query")
        tmux("send-keys", "-t", "t", "-l", "zanzibar")
        tmux("send-keys", "-t", "t", "Enter")
        screen = screen_with("diary.txt")
        assert "CPU FP32" in screen and f"{len(CORPUS)} docs" in screen
        tmux("send-keys", "-t", "t", "F3")  # one space only: the compare view says what it needs
        flat = " ".join(screen_with("The compare view").split())
        assert "needs a quantised space" in flat and "this library has: cpu-fp32" in flat
        tmux("send-keys", "-t", "t", "C-q")
        deadline = time.monotonic() + 10
        while tmux("has-session", "-t", "t").returncode == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert tmux("has-session", "-t", "t").returncode != 0  # Ctrl+Q quit the app
    finally:
        tmux("kill-server")

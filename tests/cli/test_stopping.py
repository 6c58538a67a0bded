"""cli/stopping.exit_now: the executable skips the interpreter's shutdown while a daemon thread
of the run is alive; ``main`` invoked in-process (a test's worker, an embedding program) always
exits by SystemExit, whatever threads are alive (an ``os._exit`` there ended the test worker)."""

from __future__ import annotations

import threading

import pytest

import hefsearch.cli.main as cli_main
from hefsearch.cli import stopping


@pytest.fixture
def run_thread_alive():
    """A daemon thread named as the run's threads are (the language model loader, say)."""
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="hefsearch-langid", daemon=True)
    thread.start()
    yield
    release.set()
    thread.join(5)


class _Exited(Exception):
    pass


def _no_exit(code):
    raise _Exited(code)


def test_in_process_a_live_run_thread_still_exits_by_systemexit(run_thread_alive, monkeypatch):
    monkeypatch.setattr(cli_main, "_left_to_exit", None)  # main in-process, not the executable
    monkeypatch.setattr(stopping.os, "_exit", _no_exit)
    with pytest.raises(SystemExit) as e:
        stopping.exit_now(130)
    assert e.value.code == 130


def test_the_executable_skips_the_shutdown_while_a_run_thread_lives(run_thread_alive, monkeypatch):
    monkeypatch.setattr(cli_main, "_left_to_exit", [])  # as while run() runs
    monkeypatch.setattr(stopping.os, "_exit", _no_exit)
    with pytest.raises(_Exited) as e:
        stopping.exit_now(143)
    assert e.value.args == (143,)


"""An index run that will take hours says so once, early, with the ways to leave parts out."""

from __future__ import annotations

from types import SimpleNamespace

from hefsearch.app.long_run import LONG_RUN_S, MEASURED_S, LongRunNotice


def event(phase: str, eta_s: float | None, todo: int = 2430):
    return SimpleNamespace(phase=phase, eta_s=eta_s, files_todo=todo)


def test_a_long_run_is_said_once_after_the_rate_is_measured_and_progress_still_flows():
    now = [0.0]
    shown, said = [], []
    notice = LongRunNotice(shown.append, lambda text, todo: said.append((text, todo)), clock=lambda: now[0])
    notice(event("scan", None))
    notice(event("index", 9 * 3600))  # the first batches: the rate is not measured yet
    assert said == []
    now[0] = MEASURED_S + 1
    notice(event("index", 8.5 * 3600))
    notice(event("index", 8 * 3600))
    assert len(said) == 1 and len(shown) == 4
    text, todo = said[0]
    assert todo == 2430 and "2,430 files" in text and "about 8 hours" in text
    assert "--exclude" in text and ".hefsearchignore" in text and "Ctrl+C" in text


def test_a_run_of_minutes_says_nothing():
    now = [0.0]
    said = []
    notice = LongRunNotice(None, lambda text, todo: said.append(text), clock=lambda: now[0])
    for t in range(0, 600, 10):
        now[0] = float(t)
        notice(event("index", LONG_RUN_S - 60))
    assert said == []

"""Saying early that an index run will take hours, and how to leave parts out.

A folder such as the system's documentation takes a Pi many hours; the progress line shows an
ETA, but nothing said what the run is in for or what to do about it. Once the rate has been
measured for :data:`MEASURED_S` seconds of indexing, a run whose estimate (the sync's own ETA,
from the text still to embed) is :data:`LONG_RUN_S` or more says so once, with the ways out:
``--exclude`` or a ``.hefsearchignore`` for the parts not worth it, and Ctrl+C, which keeps
every batch committed (the next run continues).
"""

from __future__ import annotations

import time
from typing import Callable

#: an estimate of this many seconds or more is worth a word
LONG_RUN_S = 3600.0
#: seconds of indexing before the estimate is trusted (the first batches include warm-up)
MEASURED_S = 30.0


def hours_text(seconds: float) -> str:
    hours = seconds / 3600
    return f"about {hours:.0f} hours" if hours >= 2 else f"about {seconds / 60:.0f} minutes"


class LongRunNotice:
    """Wraps a progress callback; ``say(text, files_todo)`` is called once for a long run."""

    def __init__(self, update: Callable | None, say: Callable[[str, int], None], clock=time.monotonic):
        self._update, self._say, self._clock = update, say, clock
        self._indexing_since: float | None = None
        self.said = False

    def __call__(self, event) -> None:
        if self._update is not None:
            self._update(event)
        if self.said or event.phase != "index":
            return
        now = self._clock()
        if self._indexing_since is None:
            self._indexing_since = now
        if now - self._indexing_since >= MEASURED_S and (event.eta_s or 0) >= LONG_RUN_S:
            self.said = True
            self._say(f"This run has {event.files_todo:,} files to index and {hours_text(event.eta_s)} to go at "
                      "the rate so far. To leave parts out (changelogs, archives, generated files), stop it "
                      "with Ctrl+C (every batch committed is kept) and add --exclude PATTERN or a "
                      ".hefsearchignore in the folder; 'hefsearch index' then continues with the rest.",
                      event.files_todo)

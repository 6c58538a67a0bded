"""How ``hefsearch index`` stops on a signal: SIGTERM (what ``systemctl stop`` sends) and
SIGHUP stop a run as Ctrl+C does (the batch in flight dropped, every committed one kept, the
summary printed), with 128 + the signal as exit status (143, 129), as a shell reports it.

An interrupted run ends without the interpreter's shutdown once its output is written: a
daemon thread of the run still inside a native library then (the extraction thread in the
tokenizer, one file ahead) would be unwound by that shutdown and abort the process
("terminate called without an active exception", status 134 instead of 130).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

#: the signals that stop a run like Ctrl+C
STOP_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s)


class _Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP: unwinds like Ctrl+C; ``exit_code`` is 128 + the signal."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum}")
        self.exit_code = 128 + signum


def _raise_stopped(signum, frame):
    raise _Stopped(signum)


@contextlib.contextmanager
def stop_signals_interrupt():
    """Within it, SIGTERM and SIGHUP raise :class:`_Stopped` in the main thread (elsewhere, or
    where they are ignored, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s, handler in old.items():
        if handler is not signal.SIG_IGN:  # nohup: a hang-up stays ignored
            signal.signal(s, _raise_stopped)
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def exit_now(code: int) -> None:
    """Exit with ``code``; without the interpreter's shutdown while one of the run's daemon
    threads is still alive (see the module)."""
    from .main import in_executable

    # only the executable's own process: in-process (a test's worker) other threads are not ours
    if in_executable() and any(t.daemon and t.name.startswith("hefsearch-") and t.is_alive()
                               for t in threading.enumerate()):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
    sys.exit(code)

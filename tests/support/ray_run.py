"""Run ``hefsearch ARGS...`` the way a user's shell would, and report which of its processes
outlived it: ``python -m tests.support.ray_run REPORT [--hold READY] -- ARGS...``.

This process becomes a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``), so every process
the run leaves behind, even one re-parented when its own parent died (a Ray agent whose
raylet is gone), stays its descendant instead of init's and is found by psutil, immune to
other Ray clusters on the machine. After the hefsearch child exits it writes
``{"rc": ..., "survivors": [{"pid", "name"}...]}`` to REPORT and kills the survivors.

``--hold READY``: the driver blocks after its first batch came back from the Ray actors,
having written the actors' pids to READY, so a test can kill an actor and signal the run
mid-way. Start this module in a new session and signal its process group to act like a
terminal's Ctrl+C (SIGINT) or ``timeout``/a service manager (SIGTERM).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def survivors() -> list:
    import psutil

    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.Error:
            pass
    return alive


def supervise(report: Path, argv: list[str]) -> None:
    import psutil

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    child = subprocess.Popen([sys.executable, "-m", "tests.support.ray_run", "--driver", *argv])
    # a signal to the whole group reaches the child directly; this process only reports
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda *_: None)
    rc = child.wait()
    left = survivors()
    report.write_text(json.dumps({"rc": rc, "survivors": [{"pid": p.pid, "name": _name(p)} for p in left]}))
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=5)


def _name(p) -> str:
    try:
        return p.name()
    except Exception:  # noqa: BLE001
        return "?"


def drive(argv: list[str]) -> None:
    """The hefsearch command, optionally held after its first batch (see the module doc)."""
    # Ctrl+C at its default, as in a terminal's job: a test run started in the background of a
    # script ('pytest &', nohup) hands SIGINT down ignored, and Python then keeps ignoring it
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if argv[:1] == ["--hold"]:
        ready, argv = Path(argv[1]), argv[2:]
        from hefsearch.index import ray_pool

        real = ray_pool.RayEncoder.collect

        def collect_then_hold(self, ticket):
            vecs = real(self, ticket)
            ready.write_text(json.dumps([a.identity.get("pid") for a in self.live]))
            while True:
                time.sleep(0.05)

        ray_pool.RayEncoder.collect = collect_then_hold
    from hefsearch.cli.main import run

    # as the executable runs it (run, not main): its way out after an interrupted run is the real one
    sys.argv = ["hefsearch", *(argv[argv.index("--") + 1:] if "--" in argv else argv)]
    run(prog_name="hefsearch")


if __name__ == "__main__":
    if sys.argv[1] == "--driver":
        drive(sys.argv[2:])
    else:
        supervise(Path(sys.argv[1]), sys.argv[2:])

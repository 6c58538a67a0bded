"""Real hefsearch processes for the serve, mcp and watch tests: started with the test's
environment, their stderr read in a thread, waited on for a line, stopped at the end."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HEFSEARCH = [sys.executable, "-m", "hefsearch"]


class Proc:
    """A running ``hefsearch ...`` whose stderr lines are collected in ``lines``."""

    def __init__(self, args: list[str], env: dict | None = None, cwd: Path | None = None):
        self.args = args
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        self.popen = subprocess.Popen([*HEFSEARCH, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
                                      cwd=cwd)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.popen.stderr:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line)

    def wait_for(self, pattern: str, timeout: float = 60.0) -> re.Match:
        """The first stderr line (since the start) matching ``pattern``."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for line in self.lines[seen:]:
                m = rx.search(line)
                if m:
                    return m
            seen = len(self.lines)
            if self.popen.poll() is not None and seen == len(self.lines):
                raise AssertionError(f"hefsearch {' '.join(self.args)} exited ({self.popen.returncode}) "
                                     f"before {pattern!r}:\n" + "\n".join(self.lines[-30:]))
            if time.monotonic() > deadline:
                raise AssertionError(f"no {pattern!r} from hefsearch {' '.join(self.args)} in {timeout} s:\n"
                                     + "\n".join(self.lines[-30:]))
            try:
                self._queue.get(timeout=0.1)
            except queue.Empty:
                pass

    def kill9(self) -> None:
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=10)

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill9()
        return self.popen.returncode


def wait_until(condition, timeout: float = 30.0, what: str = "condition", step: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)

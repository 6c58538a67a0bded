"""What a ``compile hef`` build keeps in its work folder: finished stages and every attempt.

- ``state.json`` (:class:`BuildState`): the parse, each optimised model, each compiled HEF and
  each wall hit, keyed by what they depend on (:func:`stage_key`), so a re-run skips what is
  done: a failed compile never redoes an optimisation that took hours, and a profile that hit a
  wall is not tried again with the same network, script and calibration;
- ``build-report.json`` (:func:`write_build_report`): what was planned, every rung of the ladder
  tried (:class:`Attempt`: stage outcomes, the failure with its stage, exception class, message
  and time, the wall, seconds, the model script) and how it ended,
  written after every attempt so an interrupted build leaves what it learned;
- ``running-<key>.json`` (:func:`mark_running`): written before each ``optimize()`` and
  ``compile()`` and removed when the call returns or raises, so one left behind is an attempt
  whose process died without a Python exception (out of memory, a crash in native code, a power
  cut); the next run counts it as failed (:func:`take_unfinished`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hefsearch.base.atomic_write import write_json_atomic

STATE_FILE = "state.json"
_STATE_VERSION = 1
BUILD_REPORT = "build-report.json"


@dataclass
class Attempt:
    """One rung of the ladder: a profile and what each of its stages did."""

    profile: str
    sixteen_bit: list[str]
    optimize: str = "not run"  # "ran", "reused", "negative_exponent", "allocator", "failed"
    compile: str = "not run"  # "ok", "reused", "allocator", "failed"
    error: str | None = None
    seconds: dict = field(default_factory=dict)
    model_script: str | None = None  # the file name of the script this attempt optimised with
    wall: str | None = None  # the known wall it hit: "allocator" or "negative_exponent"
    #: how it failed, if it did: {"stage", "exception" (class name), "message", "seconds" (spent in
    #: that stage), "at" (UTC time)}; the same for a failure remembered from an earlier run
    failure: dict | None = None


def stage_key(*parts) -> str:
    """A short hash of what a stage depends on (its inputs, the DFC version, the script, ...)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


class BuildState:
    """The work folder's record of finished stages (state.json)."""

    def __init__(self, folder: Path, restart: bool):
        self.folder = folder
        self.path = folder / STATE_FILE
        self.data = {"version": _STATE_VERSION, "parse": None, "optimized": {}, "compiled": {}, "walls": {}}
        if self.path.is_file() and not restart:
            try:
                loaded = json.loads(self.path.read_text())
                if loaded.get("version") == _STATE_VERSION:
                    self.data = loaded
            except (OSError, json.JSONDecodeError):
                pass

    def save(self) -> None:
        write_json_atomic(self.path, self.data)


def _marker(folder: Path, key: str) -> Path:
    return folder / f"running-{key}.json"


def mark_running(folder: Path, key: str, stage: str, profile: str) -> Path:
    """Write (atomically) that ``stage`` ("optimize" or "compile") of the attempt keyed ``key``
    starts now; :func:`clear_running` removes it when the call comes back, however it ends."""
    path = _marker(folder, key)
    write_json_atomic(path, {"stage": stage, "profile": profile, "key": key, "pid": os.getpid(),
                             "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return path


def clear_running(path: Path) -> None:
    path.unlink(missing_ok=True)


def take_unfinished(folder: Path, key: str) -> dict | None:
    """The marker an earlier run left for the attempt keyed ``key`` (its stage, profile, pid and
    start time), removed as it is read; None when there is none. An unreadable marker still
    counts: the attempt it names did not finish."""
    path = _marker(folder, key)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {"stage": "optimize"}
    clear_running(path)
    return data if isinstance(data, dict) else {"stage": "optimize"}


def clear_all_running(folder: Path) -> None:
    """``--restart``: forget every unfinished attempt too."""
    for path in folder.glob("running-*.json"):
        clear_running(path)


def write_build_report(b, attempts: list[Attempt], outcome: dict) -> Path:
    """The work folder's record of this build ``b`` (compile/hef/build.py's ``_Build``: plan, options,
    SDK, work folder): what was planned, every attempt of the ladder (stage outcomes, the wall it
    hit, seconds, the script it used) and how it ended. Written after every attempt, so an
    interrupted build leaves what it learned."""
    path = b.work / BUILD_REPORT
    write_json_atomic(path, {
        "bundle": str(b.bundle.path),
        "hw_arch": b.opts.hw_arch,
        "seq_len": b.seq,
        "dfc_version": b.sdk.version,
        "mask_mode": b.plan.mask_mode,
        "recipe": b.plan.recipe,
        "ladder": [p.name for p in b.plan.ladder],
        "attempts": [asdict(a) for a in attempts],
        **outcome,
    })
    return path

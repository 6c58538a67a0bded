"""How the CPU backends drive ONNX Runtime on this processor: its family, read from the CPU's
flags, decides the settings (docs/performance.md has the figures behind each choice).

Two ways to use several cores for a bulk encode (index, ``embed`` of many texts, the benches):

- ``operators``: one run per batch, ONNX Runtime splitting each operator over ``threads``
  intra-op threads (the setting the earlier figures were measured with);
- ``batches``: each batch cut into pieces of neighbouring rows (the rows are length-sorted, so
  each piece is padded only to its own longest), run ``threads`` at a time on one session with
  one intra-op thread each. No barrier after every operator; measured on AMD Zen 4/5.

A search (one query, few texts) always runs ``operators``. ``HEFSEARCH_ORT_PARALLEL`` =
``batches`` or ``operators`` overrides the family's choice (to measure another processor).
The graph form: on Zen 4/5 ONNX Runtime's ``SkipLayerNormalization`` (residual Add + LayerNorm
in one node) cost 5x the two ops apart, so those sessions are built without that fusion.
Which int8 kernel ONNX Runtime's MLAS picks is read from the same flags, as MLAS reads them
(``platform.cpp``: AVX512-VNNI, AVX-VNNI, AVX2 on x86-64; the ``asimddp`` dot product, ``i8mm``
on arm64); it is reported, not chosen. Pure functions of the flags, so tests can ask what a
Pi or another processor gets.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from hefsearch.base import settings

OPERATORS, BATCHES = "operators", "batches"
MODES = (OPERATORS, BATCHES)


@dataclass(frozen=True)
class CpuFacts:
    """What the processor says about itself (``/proc/cpuinfo`` on Linux)."""

    machine: str  # platform.machine(): x86_64, aarch64 ...
    vendor: str = ""  # AuthenticAMD, GenuineIntel, or "" (arm64: the implementer is not kept)
    family: int = 0  # x86 cpu family (25 = Zen 3/4, 26 = Zen 5)
    model_name: str = ""
    flags: frozenset[str] = frozenset()

    @property
    def arm64(self) -> bool:
        return self.machine.lower() in ("aarch64", "arm64")


@dataclass(frozen=True)
class RunPlan:
    """The settings a bulk CPU encode uses, and why."""

    family: str  # what a person calls the processor family
    parallel: str  # OPERATORS or BATCHES
    threads: int  # cores used: intra-op threads (operators) or pieces run at once (batches)
    int8_kernel: str  # MLAS's int8 matrix-multiply path on these flags
    why: str
    #: ONNX Runtime graph fusions left out when a session is optimised (names of its transformers)
    unfused: tuple[str, ...] = ()

    @property
    def intra_op_threads(self) -> int:
        return 1 if self.parallel == BATCHES else self.threads

    @property
    def workers(self) -> int:
        """Pieces of one batch run at once (1: the batch runs whole)."""
        return self.threads if self.parallel == BATCHES else 1

    def line(self) -> str:
        """One line for ``doctor`` and the benches."""
        how = (f"each batch in pieces, {self.threads} at once, 1 ONNX Runtime thread each"
               if self.workers > 1 else f"{self.threads} ONNX Runtime thread(s) per operator")
        graph = f"; without {', '.join(self.unfused)}" if self.unfused else ""
        return f"{self.family}: bulk encoding runs {how} ({self.why}); int8 kernel {self.int8_kernel}{graph}"


def parse_cpuinfo(text: str, machine: str) -> CpuFacts:
    """The facts in a ``/proc/cpuinfo`` text (first processor; x86 ``flags`` or arm64 ``Features``)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())
    flags = frozenset((fields.get("flags") or fields.get("features") or "").split())
    try:
        family = int(fields.get("cpu family", "0"))
    except ValueError:
        family = 0
    return CpuFacts(machine=machine, vendor=fields.get("vendor_id", ""), family=family,
                    model_name=fields.get("model name", ""), flags=flags)


def read_cpu() -> CpuFacts:
    """This machine's facts; only the machine name where ``/proc/cpuinfo`` is absent (macOS, Windows)."""
    machine = platform.machine()
    try:
        return parse_cpuinfo(Path("/proc/cpuinfo").read_text(errors="replace"), machine)
    except OSError:
        return CpuFacts(machine=machine)


def int8_kernel(cpu: CpuFacts) -> str:
    """MLAS's u8s8 matrix-multiply kernel (uint8 activations x int8 weights, as ``cpu-int8``)."""
    f = cpu.flags
    if cpu.arm64:
        if "i8mm" in f:
            return "NEON i8mm (ummla)"
        return "NEON dot product (udot)" if "asimddp" in f else "NEON (no dot product)"
    if cpu.machine.lower() in ("x86_64", "amd64"):
        if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= f:
            return "AVX512-VNNI (vpdpbusd)" if "avx512_vnni" in f else "AVX512 core"
        if "avx2" in f and "fma" in f:
            return "AVX-VNNI" if "avx_vnni" in f else "AVX2"
        return "SSE"
    return "portable"


#: the fusion measured slower than the ops it replaces on AMD Zen 4/5 (docs/performance.md)
SKIP_LAYER_NORM = "SkipLayerNormFusion"


def family_of(cpu: CpuFacts) -> tuple[str, str, tuple[str, ...]]:
    """(family name, the bulk parallel mode measured best on it, fusions to leave out)."""
    f = cpu.flags
    if cpu.vendor == "AuthenticAMD" and cpu.family >= 25 and "avx512f" in f:
        # Zen 4 (family 25) and Zen 5 (26): ONNX Runtime's intra-op threads gained ~nothing here
        return "AMD Zen 4/5 (AVX-512)", BATCHES, (SKIP_LAYER_NORM,)
    if cpu.arm64:
        return ("arm64 with dot product" if "asimddp" in f else "arm64"), OPERATORS, ()
    if "avx512f" in f:
        return "x86-64 AVX-512", OPERATORS, ()
    if "avx2" in f:
        return "x86-64 AVX2", OPERATORS, ()
    return cpu.machine or "unknown", OPERATORS, ()


def choose(cpu: CpuFacts, cores: int, threads: int | None = None, override: str = "") -> RunPlan:
    """The plan for ``cpu`` with ``cores`` cores; ``threads``: the user's thread count (default:
    every core); ``override``: ``batches`` / ``operators`` (anything else: the family's choice)."""
    family, mode, unfused = family_of(cpu)
    why = "measured best on this family" if mode == BATCHES else "the default; not measured otherwise here"
    n = max(1, threads or cores)
    override = override.strip().lower()
    if override in MODES:
        mode, why = override, f"{settings.ORT_PARALLEL.name}={override}"
    if n == 1 and mode == BATCHES:
        mode, why = OPERATORS, "one thread"
    return RunPlan(family=family, parallel=mode, threads=n, int8_kernel=int8_kernel(cpu), why=why, unfused=unfused)


@functools.lru_cache(maxsize=1)
def _this_cpu() -> CpuFacts:
    return read_cpu()


def default_threads() -> int:
    """Threads a CPU encoder uses unless told: ``HEFSEARCH_THREADS``, else every core."""
    return int(settings.THREADS.value("0") or 0) or (os.cpu_count() or 1)


def current_plan(threads: int | None = None) -> RunPlan:
    """This machine's plan (``threads`` default: :func:`default_threads`)."""
    return choose(_this_cpu(), os.cpu_count() or 1, threads or default_threads(), settings.ORT_PARALLEL.value(""))

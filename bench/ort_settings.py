"""ONNX Runtime session settings for the FP32 body, measured rather than assumed (issue 22 item 1).

    python bench/ort_settings.py [--bundle B] [--reps 6]

Times one batch shape set (32 texts of 256 tokens, 32 of 64, 4 of 12: an indexing batch at the
window, a typical chunk batch, a query) on sessions that differ in one setting each, against
the one hefsearch opens for a search (``embed/ort_session.py``: intra-op threads = cores, no
spinning, the cached optimised model, fused attention when built; a bulk encode may run
``batches`` instead, per ``embed/cpu_plan.py``: ``bench/encode.py`` compares the two modes):
threads 1, spinning on, the unfused body, and the fused copy with and without ONNX Runtime's
``SkipLayerNormalization`` (residual Add + LayerNorm in one node: slower on AMD Zen 4/5).
Sessions run alternated round by round; each row is the median of the per-round time ratios
(the default's time / the variant's: above 1 the variant is faster), with min-max and the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

from hefsearch.bench.harness import export_temp_bundle, paired_ratios

SHAPES = [(32, 256), (32, 64), (4, 12)]


def skip_layer_norm_forms(body) -> dict:
    """The fused-attention copy with the residual Add + LayerNorm as one SkipLayerNormalization
    node and as two nodes, each optimised by ONNX Runtime (which would fuse them otherwise)."""
    import onnxruntime as ort

    from hefsearch.embed.attention_fusion import fuse
    from hefsearch.embed.cpu_plan import SKIP_LAYER_NORM
    from hefsearch.embed.ort_session import session_options

    tmp = tempfile.mkdtemp(prefix="hefsearch-ortset-skip-")
    out = {}
    for fused, name in ((True, "fused, SkipLayerNormalization"), (False, "fused, Add + LayerNorm apart")):
        path = f"{tmp}/{int(fused)}.onnx"
        fuse(str(body.path), path, body.heads, body.hidden, skip_layer_norm=fused)
        out[name] = ort.InferenceSession(path, sess_options=session_options(), providers=["CPUExecutionProvider"],
                                         disabled_optimizers=[] if fused else [SKIP_LAYER_NORM])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", help="an exported bundle (default: MiniLM exported to a temp dir)")
    ap.add_argument("--reps", type=int, default=6)
    args = ap.parse_args()
    os.environ.setdefault("HEFSEARCH_HOME", tempfile.mkdtemp(prefix="hefsearch-ortset-"))
    import onnxruntime as ort

    from hefsearch.embed.bundle import Bundle
    from hefsearch.embed.ort_session import BodyFile, make_session, open_body_session, session_options

    bundle = Bundle.open(args.bundle or export_temp_bundle())
    entry = bundle.encoder_entries("onnx")[0]
    body = BodyFile(bundle.path / entry.file, bundle.file_sha256(entry.file), heads=int(bundle.model["heads"]),
                    hidden=bundle.hidden, fusable=True)
    default, kind = open_body_session(body, bulk=True)

    def spinning():
        opts = session_options(spinning=True)
        return ort.InferenceSession(str(body.path), sess_options=opts, providers=["CPUExecutionProvider"])

    variants = {"threads 1": make_session(body.path, 1), "spinning on (unfused)": spinning(),
                "unfused body (ORT in memory)": make_session(body.path), **skip_layer_norm_forms(body)}
    rng = np.random.default_rng(0)
    feeds = [{"embeddings": rng.standard_normal((n, s, bundle.hidden), dtype=np.float32),
              "attention_mask": np.ones((n, s), dtype=np.int64)} for n, s in SHAPES]

    def timed(sess) -> float:
        t = time.perf_counter()
        for feed in feeds:
            sess.run(["last_hidden_state"], feed)
        return time.perf_counter() - t

    for sess in [default, *variants.values()]:
        timed(sess)  # warm-up
    base, times = [], {k: [] for k in variants}
    start = "/".join(f"{x:.1f}" for x in os.getloadavg())
    for r in range(args.reps):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        base.append(timed(default))
        for k in order:
            times[k].append(timed(variants[k]))
    end = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"default session ({kind}, {os.cpu_count()} threads, no spinning): {statistics.median(base) * 1000:.0f} ms "
          f"for batches {SHAPES}; load {start} -> {end}")
    for k, t in times.items():
        ratios = paired_ratios(base, t)
        print(f"  {k:<30}: {statistics.median(t) * 1000:7.0f} ms  {statistics.median(ratios):.2f}x the default's speed "
              f"(median of {len(ratios)} rounds, min-max {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()

"""Where the 8-bit error of a body sits: the all-8-bit simulation with one group of sites left
unrounded at a time (needs torch: the compile extra).

    python bench/site_groups.py --bundle BUNDLE [--body original|robust] [--texts FILE]
                                [--calib-rows 64] [--json out.json]

Every row is measured against the original FP32 body on the same texts (one per line in
``--texts``; default: both sides of the bundled parallel set, which training never sees), by the
mean cosine of the sentence vectors and the correlation of their similarity matrices (the
measure that follows ranking). Ranges are min/max over ``--calib-rows`` rows of the bundle's
calibration pool (cut to 256 tokens), weights per channel: the ``a8`` simulation's defaults.

Rows: the body in FP32 (its own drift from the original); all 8-bit; weights only; then per
site group (the LayerNorm internals one by one, then the variance path x - mean, squared
deviation and variance together), two columns: *only* this group rounded, and
*all but* this group rounded, with the gain of the latter over all 8-bit. A group whose *all
but* gain is large is where a 16-bit layer, or training, buys most; gains that are all small say
the error is spread over the network. Non-additive effects are real: the 8-bit range of the
reciprocal std, for one, caps the blow-up when a variance rounds to zero, so leaving it FP32 can
make things worse.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

#: the LayerNorm internals up to the variance, measured together as well
VARIANCE_PATH = ("LayerNorm x - mean", "LayerNorm squared deviation", "LayerNorm variance")


def load_texts(path: str | None) -> list[str]:
    if path:
        return [t.strip() for t in Path(path).read_text(encoding="utf-8").splitlines() if t.strip()]
    from hefsearch.evaluate.parallel import load_parallel

    pairs = load_parallel(None)
    return [p.text_a for p in pairs] + [p.text_b for p in pairs]


def measure(bundle_path: str, body_name: str, texts: list[str], calib_rows: int, say) -> dict:
    import onnx
    import torch

    from hefsearch.compile.body_choice import resolve_body
    from hefsearch.compile.robust.fake_quant import NOMINAL, Quantiser
    from hefsearch.compile.robust.onnx_torch import OnnxBody
    from hefsearch.compile.robust.train import make_student, set_ranges
    from hefsearch.compile.sim.graph import prepare_graph
    from hefsearch.compile.sim.ranges import calibration_from_bundle, calibration_from_texts
    from hefsearch.embed.bundle import Bundle
    from hefsearch.embed.host import l2_normalize, mean_pool
    from hefsearch.embed.metrics import similarity_correlation
    from hefsearch.embed.precision import load_profile

    bundle = Bundle.open(bundle_path)
    profile = load_profile("a8")
    student = make_student(bundle, profile)  # its frozen teacher is the original FP32 body
    reference = student.teacher
    body = OnnxBody(onnx.load(str(resolve_body(bundle, body_name).path(bundle))))
    sim = prepare_graph(student.model, profile, mask_mode="softmax", mask_value=-10000.0,
                        bundle_mask_value=bundle.mask_value)
    groups: dict[str, list[str]] = {}
    for s in sim.sites:  # the LayerNorm internals apart: they behave very differently
        key = s.role if s.group == "layernorm" else s.group
        groups.setdefault(key, []).append(s.tensor)

    calib = calibration_from_bundle(bundle, calib_rows) or calibration_from_texts(bundle, texts, "the texts")
    calib.embeddings, calib.mask = calib.embeddings[:, :256], calib.mask[:, :256]
    evaluation = calibration_from_texts(bundle, texts, "evaluation texts")

    def batches(c, size=8):
        lengths = c.mask.sum(1)
        order = np.argsort(lengths)
        for i in range(0, len(order), size):
            rows = order[i:i + size]
            s = int(lengths[rows].max())
            yield torch.from_numpy(c.embeddings[rows, :s]), torch.from_numpy(c.mask[rows, :s]), rows

    student.body = body  # ranges from the measured body, as its build would take them
    pool = SimpleNamespace(emb=calib.embeddings, mask=calib.mask, lengths=calib.mask.sum(1))  # what set_ranges reads
    ranges = set_ranges(student, pool, np.arange(len(calib.mask)))

    def vectors(net, sites: dict[str, int], weights: bool) -> np.ndarray:
        out = np.zeros((len(evaluation.mask), bundle.hidden), np.float32)
        with torch.no_grad():
            for e, m, rows in batches(evaluation):
                q = Quantiser(sites, student.weight_bits if weights else {}, NOMINAL, m.bool())
                q.ranges = dict(ranges)
                h = net(e, m, site=q.site, weight=q.weight).numpy()
                out[rows] = l2_normalize(mean_pool(h, m.numpy()))
        return out

    ref = vectors(reference, {}, False)

    def score(v: np.ndarray) -> dict:
        return {"cosine": round(float((v * ref).sum(1).mean()), 4),
                "sim_corr": round(float(similarity_correlation(v, ref)), 4)}

    t0 = time.perf_counter()
    rows = {"FP32": score(vectors(body, {}, False)),
            "all 8-bit": score(vectors(body, student.sites, True)),
            "weights only": score(vectors(body, {}, True))}
    say(f"all 8-bit: {rows['all 8-bit']} ({time.perf_counter() - t0:.0f} s so far)")
    for name, tensors in groups.items():
        only = {t: student.sites[t] for t in tensors if t in student.sites}
        rest = {t: b for t, b in student.sites.items() if t not in set(tensors)}
        rows[name] = {"sites": len(tensors), "only": score(vectors(body, only, False)),
                      "all_but": score(vectors(body, rest, True))}
        rows[name]["gain"] = round(rows[name]["all_but"]["sim_corr"] - rows["all 8-bit"]["sim_corr"], 4)
        say(f"{name}: {rows[name]} ({time.perf_counter() - t0:.0f} s so far)")
    # the variance path as one: what a LayerNorm computed with more than 8 bits inside would buy
    # (the reciprocal std stays 8-bit: its range is the clamp that keeps a zero variance finite)
    path = [g for g in VARIANCE_PATH if g in groups]
    if path:
        tensors = {t for g in path for t in groups[g]}
        rest = {t: b for t, b in student.sites.items() if t not in tensors}
        r = {"sites": len(tensors), "all_but": score(vectors(body, rest, True))}
        r["gain"] = round(r["all_but"]["sim_corr"] - rows["all 8-bit"]["sim_corr"], 4)
        rows["LayerNorm variance path"] = r
        say(f"LayerNorm variance path: {r}")
    return rows


def render(rows: dict, body: str, n_texts: int) -> str:
    out = [f"{body} body, {n_texts} texts, against the original FP32: cosine / similarity-matrix correlation"]
    for k in ("FP32", "all 8-bit", "weights only"):
        out.append(f"  {k:28s} {rows[k]['cosine']:.4f} / {rows[k]['sim_corr']:.4f}")
    out.append(f"  {'site group (sites)':28s} {'only it 8-bit':>17s}   {'all but it':>17s}   gain")
    groups = sorted((k for k in rows if "sites" in rows[k]), key=lambda k: -rows[k]["gain"])
    for k in groups:
        r = rows[k]
        label = f"{k} ({r['sites']})"
        only = f"{r['only']['cosine']:.4f} / {r['only']['sim_corr']:.4f}" if "only" in r else f"{'-':>17s}"
        out.append(f"  {label:28s} {only}   "
                   f"{r['all_but']['cosine']:.4f} / {r['all_but']['sim_corr']:.4f}   {r['gain']:+.4f}")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--body", default="original", choices=["original", "robust"])
    ap.add_argument("--texts", default=None, help="one text per line (default: the bundled parallel set)")
    ap.add_argument("--calib-rows", type=int, default=64, help="calibration rows for the ranges")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    texts = load_texts(args.texts)
    rows = measure(args.bundle, args.body, texts, args.calib_rows, say)
    print(render(rows, args.body, len(texts)))
    if args.json:
        Path(args.json).write_text(json.dumps({"body": args.body, "texts": len(texts), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

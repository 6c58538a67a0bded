"""Quality of the optimised (quantised) network before compiling, from the DFC's own emulator.

Runs the bundled multilingual sentences through the SDK's FP32 emulation (``SDK_FP_OPTIMIZED``,
else ``SDK_NATIVE``) and its quantised emulation (``SDK_QUANTIZED``), pools them as the runtime
does, and compares each with ONNX Runtime on ``encoder.onnx`` using **basis-independent**
measures only (:mod:`hefsearch.embed.metrics`): the correlation of the similarity matrices,
top-1 translation retrieval inside each space, and nearest-neighbour agreement (does every
text have the same nearest neighbour as in ONNX?).

Why not coordinate by coordinate: the public Hailo-10H report
(a user report on the Hailo Community forum, community.hailo.ai; section 6) found ``SDK_NATIVE`` and the HEF
at a cosine of about 0.1 against ONNX because the compiled network's channel basis differs
(Hailo reorders channels internally), while every basis-invariant measure held. So a permuted
or rotated basis passes here and is named as such (``basis``), and only a network that ranks
differently fails: the FP32 emulation's similarity correlation against ONNX below
``PARSE_MIN_CORRELATION`` means the parse changed the network; the quantised emulation is
called broken by the one rule ``doctor --verify`` uses too (:func:`metrics.ranking_lost`): by
retrieval, not by the similarity correlation, since the report's *working* 8-bit HEF scored a
correlation of 0.37 with top-1 70.8% against FP32's 100%. A low correlation alone is "degraded".
The per-text cosine between the two emulations is kept as information only.

Verified against the contract fake in ``tests/fakes/hailo_sdk_client`` only; no real Dataflow
Compiler has run this code.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from hefsearch.embed.bundle import Bundle
from hefsearch.embed.mask_layout import MaskLayout
from hefsearch.embed.host import POOLERS, HostPipeline, l2_normalize
from hefsearch.embed.samples import VERIFY_TEXTS
from hefsearch.embed import metrics

from .dfc_onnx import EMBEDDINGS, MASK, OUTPUT
from .preflight import InputLayer

#: translation pairs among VERIFY_TEXTS with distinct meanings (index of one side, the other)
VERIFY_PAIRS: tuple[tuple[int, int], ...] = ((0, 1), (15, 16), (17, 18), (19, 20), (28, 27), (31, 32))
#: the FP32 emulation must rank like encoder.onnx: below this the parse changed the network
PARSE_MIN_CORRELATION = 0.99
#: below this the report warns of heavy quantisation error (basis-independent)
WARN_CORRELATION = 0.9


def report_texts() -> tuple[list[str], list[tuple[int, int]]]:
    """Texts for the report and the translation pairs among them."""
    from hefsearch.embed import samples

    texts = list(VERIFY_TEXTS)
    pairs = list(VERIFY_PAIRS)
    for a, b in getattr(samples, "PARALLEL_PAIRS", ()) or ():
        texts += [a, b]
        pairs.append((len(texts) - 2, len(texts) - 1))
    return texts, pairs


def host_inputs(bundle: Bundle, seq_len: int, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """E [N,S,H] float32 and mask [N,S] int64 exactly as the runtime builds them for passages."""
    host = HostPipeline(bundle, max_tokens=seq_len)
    tok = host.tokenize([bundle.prefixes["passage"] + t for t in texts])
    return host.embed(tok.ids, pad_to=seq_len)


def network_inputs(layers: list[InputLayer], e: np.ndarray, mask: np.ndarray,
                   layout: MaskLayout) -> dict[str, np.ndarray]:
    """Host arrays laid out as the parsed input layers: {layer: (N,) + shape[1:]} float32, the
    mask in the HEF's layout (what the device will receive)."""
    n = e.shape[0]
    by_role = {EMBEDDINGS: e.astype(np.float32), MASK: layout.build(mask)}
    return {layer.name: np.ascontiguousarray(by_role[layer.role].reshape((n, *layer.sample_shape)))
            for layer in layers}


def as_hidden(out, n: int, seq_len: int, hidden: int) -> np.ndarray:
    """The emulator's output ([N,1,S,H], a dict or a one-item list of it) as [N,S,H]."""
    if isinstance(out, dict):
        if len(out) != 1:
            raise ValueError(f"expected one output, got {list(out)}")
        out = next(iter(out.values()))
    if isinstance(out, (list, tuple)):
        if len(out) != 1:
            raise ValueError(f"expected one output, got {len(out)}")
        out = out[0]
    out = np.asarray(out, dtype=np.float32)
    if out.size != n * seq_len * hidden:
        raise ValueError(f"output of shape {out.shape} does not hold [{n}, {seq_len}, {hidden}]")
    return out.reshape(n, seq_len, hidden)


def pooled(bundle: Bundle, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    v = POOLERS[bundle.pooling](hidden, mask)
    return l2_normalize(v) if bundle.normalize else v


def which_basis(ref: np.ndarray, test: np.ndarray) -> str:
    """"same", "permuted" (channels reordered, signs allowed), "rotated" (an orthogonal map fits)
    or "other": how ``test``'s coordinates relate to ``ref``'s (information, never a verdict)."""
    if float(np.median(metrics.paired_cosine(ref, test))) >= 0.99:
        return "same"
    perm = metrics.detect_permutation(ref, test, threshold=0.9)
    if perm.is_permutation:
        return "permuted"
    if len(ref) >= 2 and metrics.procrustes_fit(test, ref).cosine_after >= 0.99:
        return "rotated"
    return "other"


def compare_to_onnx(ref: np.ndarray, test: np.ndarray, ia: list[int], ib: list[int]) -> dict:
    """Basis-independent measures of one emulation against ONNX's vectors of the same texts."""
    return {
        "similarity_pearson": metrics.similarity_correlation(ref, test, "pearson"),
        "similarity_spearman": metrics.similarity_correlation(ref, test, "spearman"),
        "neighbour_agreement": metrics.neighbour_agreement(ref, test),
        "top1": metrics.top1_retrieval(test[ia], test[ib]),
        "basis": which_basis(ref, test),
    }


def emulator_report(runner, contexts, bundle: Bundle, layers: list[InputLayer], seq_len: int,
                    layout: MaskLayout, say: Callable[[str], None] | None = None) -> dict:
    """Run FP32 and quantised emulation on the report texts; return a JSON-able report.

    ``runner`` is an optimised ClientRunner, ``contexts`` the SDK's ``InferenceContext``.
    """
    from hefsearch.embed.backends.cpu import make_session

    texts, pairs = report_texts()
    e, mask = host_inputs(bundle, seq_len, texts)
    data = network_inputs(layers, e, mask, layout)
    n, h = len(texts), bundle.hidden
    outs = {}
    # FP_OPTIMIZED is the float model with the model script applied (set_input_mask_to_softmax
    # included), so it takes the same mask values as the quantised model and the device
    fp = getattr(contexts, "SDK_FP_OPTIMIZED", None) or contexts.SDK_NATIVE
    for label, ctx_kind in (("fp32", fp), ("quantized", contexts.SDK_QUANTIZED)):
        with runner.infer_context(ctx_kind) as ctx:
            outs[label] = as_hidden(runner.infer(ctx, data), n, seq_len, h)
    onnx_hidden = make_session(str(bundle.path / "encoder.onnx"), None).run([OUTPUT], {EMBEDDINGS: e, MASK: mask})[0]
    ref = pooled(bundle, onnx_hidden, mask)
    fp32 = pooled(bundle, outs["fp32"], mask)
    quant = pooled(bundle, outs["quantized"], mask)
    per_text = metrics.paired_cosine(fp32, quant)  # both emulations share the compiled basis
    ia, ib = [a for a, _ in pairs], [b for _, b in pairs]
    fp_vs_onnx = compare_to_onnx(ref, fp32, ia, ib)
    q_vs_onnx = compare_to_onnx(ref, quant, ia, ib)
    report = {
        "texts": n,
        "pairs": len(pairs),
        "seq_len": int(seq_len),
        "top1_onnx": metrics.top1_retrieval(ref[ia], ref[ib]),
        "fp32_vs_onnx": fp_vs_onnx,
        "quantized_vs_onnx": q_vs_onnx,
        "top1_fp32": fp_vs_onnx["top1"],
        "top1_quantized": q_vs_onnx["top1"],
        "similarity_pearson": metrics.similarity_correlation(fp32, quant, "pearson"),
        "similarity_spearman": metrics.similarity_correlation(fp32, quant, "spearman"),
        "basis": fp_vs_onnx["basis"],
        # information only: coordinate-wise, between the two emulations (which share a basis)
        "cosine_mean": float(per_text.mean()),
        "cosine_min": float(per_text.min()),
        "cosine_per_text": [round(float(c), 6) for c in per_text],
    }
    report["verdict"], report["warnings"] = _verdict(report)
    if say:
        for line in format_report(report, texts).splitlines():
            say(line)
    return report


def _verdict(r: dict) -> tuple[str, list[str]]:
    """("ok" | "degraded" | "broken", warnings) from the basis-independent measures."""
    out, verdict = [], "ok"
    fp, q = r["fp32_vs_onnx"], r["quantized_vs_onnx"]
    if fp["similarity_pearson"] < PARSE_MIN_CORRELATION:
        verdict = "broken"
        out.append(f"The DFC's FP32 emulation does not rank like encoder.onnx (similarity correlation "
                   f"{fp['similarity_pearson']:.4f}, below {PARSE_MIN_CORRELATION}): the parse or the mask "
                   "handling changed the network, not only quantisation.")
    if metrics.ranking_lost(q["similarity_pearson"], q.get("neighbour_agreement"), r.get("top1_onnx"),
                            r.get("top1_quantized")):
        verdict = "broken"
        out.append(f"The quantised emulation does not rank like encoder.onnx (similarity correlation "
                   f"{q['similarity_pearson']:.3f}, same nearest neighbour {q.get('neighbour_agreement', 0):.2f}, "
                   f"top-1 {r.get('top1_quantized', 0):.2f} vs {r.get('top1_onnx', 0):.2f}): this build is broken; "
                   "check the mask mode and the calibration.")
    elif q["similarity_pearson"] < WARN_CORRELATION:
        verdict = "degraded" if verdict == "ok" else verdict
        out.append(f"Quantised vs encoder.onnx similarity correlation {q['similarity_pearson']:.3f} is low; a 16-bit "
                   "profile, FP32 re-ranking or a robust body wins it back ('hefsearch bench quality' measures it).")
    if r["top1_quantized"] < r["top1_onnx"]:
        verdict = "degraded" if verdict == "ok" else verdict
        out.append(f"Top-1 translation retrieval drops from {r['top1_onnx']:.2f} (ONNX) to "
                   f"{r['top1_quantized']:.2f} (quantised).")
    return verdict, out


def format_report(r: dict, texts: list[str] | None = None, worst: int = 5) -> str:
    fp, q = r.get("fp32_vs_onnx", {}), r.get("quantized_vs_onnx", {})
    basis = {"same": "the same as ONNX's", "permuted": "ONNX's, permuted (expected: Hailo reorders channels)",
             "rotated": "a rotation of ONNX's", "other": "another one than ONNX's"}.get(r.get("basis"), "?")
    lines = [
        f"Emulator report on {r['texts']} multilingual texts ({r['pairs']} translation pairs), SEQ {r['seq_len']}: "
        f"{r.get('verdict', '?')}",
        "  against encoder.onnx (basis-independent):",
        f"    FP32 emulation: similarity correlation {fp.get('similarity_pearson', float('nan')):.4f}, "
        f"same nearest neighbour {fp.get('neighbour_agreement', float('nan')):.2f}",
        f"    quantised:      similarity correlation {q.get('similarity_pearson', float('nan')):.4f}, "
        f"same nearest neighbour {q.get('neighbour_agreement', float('nan')):.2f}",
        f"  top-1 translation retrieval: ONNX {r.get('top1_onnx', float('nan')):.3f}, FP32 emulation "
        f"{r['top1_fp32']:.3f}, quantised {r['top1_quantized']:.3f}",
        f"  output basis: {basis}",
        f"  quantised vs FP32 emulation (same basis): cosine mean {r['cosine_mean']:.4f}, min {r['cosine_min']:.4f}",
    ]
    cos = np.asarray(r["cosine_per_text"])
    if texts is not None and len(cos):
        lines.append("  worst texts:")
        for i in np.argsort(cos)[:worst]:
            t = texts[int(i)].replace("\n", " ")
            lines.append(f"    {cos[int(i)]:.4f}  {t[:60]}{'…' if len(t) > 60 else ''}")
    lines += [f"  warning: {w}" for w in r.get("warnings", [])]
    return "\n".join(lines)

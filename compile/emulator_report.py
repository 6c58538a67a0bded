"""Quality of the optimised (quantised) network before compiling, from the DFC's own emulator.

Runs the bundled multilingual sentences through the SDK's FP32 emulation (``SDK_FP_OPTIMIZED``,
else ``SDK_NATIVE``) and its quantised emulation (``SDK_QUANTIZED``) and compares the pooled sentence vectors with the
shared metrics (:mod:`hefsearch.embed.metrics`): per-sentence cosine, top-1 translation
retrieval inside each space, and the correlation of the two similarity matrices. The FP32
emulation is also checked against ONNX Runtime on ``encoder.onnx`` (a parse problem shows up
there, not as "quantisation noise").

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
#: below these the report adds a warning line
WARN_MEAN_COSINE = 0.95
WARN_PARSE_COSINE = 0.999


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
    per_text = metrics.paired_cosine(fp32, quant)
    parse_cos = metrics.paired_cosine(ref, fp32)
    ia, ib = [a for a, _ in pairs], [b for _, b in pairs]
    report = {
        "texts": n,
        "pairs": len(pairs),
        "seq_len": int(seq_len),
        "fp32_vs_onnx_min_cosine": float(parse_cos.min()),
        "cosine_mean": float(per_text.mean()),
        "cosine_min": float(per_text.min()),
        "cosine_per_text": [round(float(c), 6) for c in per_text],
        "top1_fp32": metrics.top1_retrieval(fp32[ia], fp32[ib]),
        "top1_quantized": metrics.top1_retrieval(quant[ia], quant[ib]),
        "similarity_pearson": metrics.similarity_correlation(fp32, quant, "pearson"),
        "similarity_spearman": metrics.similarity_correlation(fp32, quant, "spearman"),
    }
    report["warnings"] = _warnings(report)
    if say:
        for line in format_report(report, texts).splitlines():
            say(line)
    return report


def _warnings(r: dict) -> list[str]:
    out = []
    if r["fp32_vs_onnx_min_cosine"] < WARN_PARSE_COSINE:
        out.append(f"The DFC's FP32 emulation differs from encoder.onnx (min cosine "
                   f"{r['fp32_vs_onnx_min_cosine']:.4f}): the parse changed the network, not only quantisation.")
    if r["cosine_mean"] < WARN_MEAN_COSINE:
        out.append(f"Quantised vs FP32 mean cosine {r['cosine_mean']:.3f} is low; try --precision balanced "
                   "or a profile file with more 16-bit groups.")
    if r["top1_quantized"] < r["top1_fp32"]:
        out.append(f"Top-1 translation retrieval drops from {r['top1_fp32']:.2f} (FP32) to "
                   f"{r['top1_quantized']:.2f} (quantised).")
    return out


def format_report(r: dict, texts: list[str] | None = None, worst: int = 5) -> str:
    lines = [
        f"Emulator report on {r['texts']} multilingual texts ({r['pairs']} translation pairs), SEQ {r['seq_len']}:",
        f"  quantised vs FP32 cosine: mean {r['cosine_mean']:.4f}, min {r['cosine_min']:.4f}",
        f"  top-1 translation retrieval: FP32 {r['top1_fp32']:.3f}, quantised {r['top1_quantized']:.3f}",
        f"  similarity-matrix correlation: pearson {r['similarity_pearson']:.4f}, "
        f"spearman {r['similarity_spearman']:.4f}",
        f"  FP32 emulation vs encoder.onnx: min cosine {r['fp32_vs_onnx_min_cosine']:.6f}",
    ]
    cos = np.asarray(r["cosine_per_text"])
    if texts is not None and len(cos):
        lines.append("  worst texts:")
        for i in np.argsort(cos)[:worst]:
            t = texts[int(i)].replace("\n", " ")
            lines.append(f"    {cos[int(i)]:.4f}  {t[:60]}{'…' if len(t) > 60 else ''}")
    lines += [f"  warning: {w}" for w in r.get("warnings", [])]
    return "\n".join(lines)

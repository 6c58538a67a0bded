"""Build the NPU simulation: a fake-quantised copy of ``encoder.onnx`` (needs the ``onnx`` package).

``hefsearch compile sim BUNDLE --precision a8|balanced|FILE`` rewrites the FP32 encoder body
into ``encoder.npu-sim.<name>.onnx``, a graph that still runs on plain ONNX Runtime but rounds
every tensor an 8-bit NPU would store in 8 (or 16) bits, and lists it in the manifest as an
encoder of kind ``npu-sim``. The runtime backend (:mod:`hefsearch.embed.backends.npu_sim`)
only runs that file, so the Pi and a laptop need no ``onnx`` package.

What the simulation does (the same site groups as ``compile hef``, :mod:`hefsearch.embed.precision`):

- weights of every dense layer: per-output-channel symmetric integers (int8, or int16 where
  the profile puts the group at 16 bits), rounded once here;
- activations: per-tensor asymmetric unsigned integers (uint8 / uint16) with min/max ranges
  measured on calibration data, at the embeddings input, inside every LayerNorm (decomposed
  into x - mean, squared deviation, variance, reciprocal std, normalised x, and its output),
  Q/K/V, attention scores, softmax, context, every dense output, GELU, the residual adds and
  the last hidden state;
- the attention mask either inside softmax (``softmax``, as the DFC's
  ``set_input_mask_to_softmax()``: scores are quantised without it) or ``additive`` with a
  given value, quantised together with the scores (a -10000 mask there swamps the 8-bit score
  range; about -50 does not).

It is a simulation: the ranges are plain min/max of FP32 activations and rounding is to
nearest, so it predicts what a build choice costs, not a HEF's exact numbers. Biases and
LayerNorm gamma/beta stay in float.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from hefsearch.embed.bundle import Bundle, EncoderEntry
from hefsearch.embed.errors import ExportError, HefsearchError
from hefsearch.embed.precision import SITE_GROUPS, PrecisionProfile, classify_onnx_node, load_profile
from hefsearch.embed.samples import VERIFY_TEXTS

log = logging.getLogger("hefsearch.compile")

#: mask value of the "softmax" mode: applied after quantisation, in float, so it only has to
#: drive exp() to zero
_SOFTMAX_MASK = -10000.0
SIM_KIND = "npu-sim"
DEFAULT_CALIB_LIMIT = 512
CALIB_BATCH = 8


class SimBuildError(HefsearchError):
    """The encoder body could not be turned into an NPU simulation."""

    title = "simulation build error"


# -- naming --------------------------------------------------------------------------------
def parse_mask(spec: str | None, profile: PrecisionProfile, bundle_mask_value: float) -> tuple[str, float]:
    """``None`` (the profile's own), ``inside``/``softmax``, ``additive`` or ``additive:-10000``
    -> (mode, value). The value of ``additive`` defaults to the bundle's export value."""
    if spec is None:
        mode, value = profile.mask, None
    else:
        s = spec.strip().lower()
        head, _, tail = s.partition(":")
        if head in ("inside", "softmax"):
            if tail:
                raise SimBuildError(f"Mask {spec!r}: the inside-softmax mode takes no value.",
                                    "Use --mask inside, or --mask additive:-10000.")
            mode, value = "softmax", None
        elif head == "additive":
            mode = "additive"
            try:
                value = float(tail) if tail else None
            except ValueError:
                raise SimBuildError(f"Mask {spec!r}: {tail!r} is not a number.",
                                    "Write e.g. --mask additive:-10000 or --mask additive:-50.") from None
        else:
            raise SimBuildError(f"Mask {spec!r} is unknown.", "Use inside, additive or additive:VALUE (e.g. -50).")
    if mode == "softmax":
        return "softmax", _SOFTMAX_MASK
    value = bundle_mask_value if value is None else value
    if not value < 0:
        raise SimBuildError(f"An additive mask value must be negative, not {value:g}.")
    return "additive", float(value)


def sim_name(profile: PrecisionProfile, mask_mode: str, mask_value: float, bundle_mask_value: float) -> str:
    """File-safe name of a simulation variant: ``a8``, ``balanced``, ``a8-additive10000``."""
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in profile.name)
    if mask_mode == profile.mask and (mask_mode == "softmax" or mask_value == bundle_mask_value):
        return name
    if mask_mode == "softmax":
        return f"{name}-inside"
    return f"{name}-additive{abs(mask_value):g}".replace(".", "p")


def sim_label(name: str) -> str:
    return f"NPU simulation ({name})"


# -- graph surgery -------------------------------------------------------------------------
@dataclass
class Site:
    tensor: str  # the FP32 tensor that gets rounded
    group: str  # a SITE_GROUPS key
    role: str  # what it is, for reports ("layernorm x-mean", "dense output", ...)


@dataclass
class SimGraph:
    model: object  # onnx.ModelProto, FP32 with the LayerNorms decomposed and weights rounded
    sites: list[Site]
    weights: dict[str, int]  # quantised initializer -> bits


def _const(g, name: str, value) -> str:
    from onnx import numpy_helper

    g.initializer.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
    return name


def _opset(model) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 17


def _quantise_weight(w: np.ndarray, bits: int, axis: int) -> np.ndarray:
    """Symmetric per-channel rounding along ``axis`` (the output channels)."""
    qmax = 2 ** (bits - 1) - 1
    red = tuple(i for i in range(w.ndim) if i != axis)
    amax = np.max(np.abs(w), axis=red, keepdims=True)
    scale = np.where(amax > 0, amax / qmax, 1.0)
    return (np.clip(np.round(w / scale), -qmax, qmax) * scale).astype(np.float32)


def prepare_graph(model, profile: PrecisionProfile, *, mask_mode: str, mask_value: float,
                  bundle_mask_value: float) -> SimGraph:
    """Decompose LayerNorms, round weights, set the mask, and list the activation sites.

    The returned model is still FP32 between sites; :func:`insert_fake_quant` adds the
    rounding once ranges are known.
    """
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    g = model.graph
    opset = _opset(model)
    inits = {i.name: i for i in g.initializer}
    input_names = [i.name for i in g.input]
    if "embeddings" not in input_names or "attention_mask" not in input_names:
        raise SimBuildError(f"encoder.onnx has inputs {input_names}; expected embeddings and attention_mask.",
                            "Re-export the bundle with 'hefsearch compile export'.")
    out_names = {o.name for o in g.output}
    # Identity aliases of initializers (the exporter dedups equal tensors this way)
    alias = {n.output[0]: n.input[0] for n in g.node if n.op_type == "Identity" and n.input[0] in inits}

    def resolve_init(name: str):
        return inits.get(alias.get(name, name))

    # protobuf hands out new wrapper objects on each access: work on one list, by index
    nodes = list(g.node)
    groups = [classify_onnx_node(n.op_type, n.name) for n in nodes]
    consumers: dict[str, list[int]] = {}
    for k, n in enumerate(nodes):
        for t in n.input:
            consumers.setdefault(t, []).append(k)

    # tensors computed from the embeddings (everything else is mask prep or constants)
    from_emb = {"embeddings"}
    for n in nodes:
        if any(t in from_emb for t in n.input):
            from_emb.update(n.output)

    if bundle_mask_value == 0:
        raise SimBuildError("The bundle records mask_value 0; the additive mask cannot be rescaled.")
    mask_add_ids = {k for k, n in enumerate(nodes) if groups[k] == "attention_scores" and n.op_type == "Add"
                    and sum(t in from_emb for t in n.input) == 1}
    mask_adds = [nodes[k] for k in sorted(mask_add_ids)]
    if not mask_adds:
        raise SimBuildError("Found no attention-mask Add in encoder.onnx (scores + mask bias).",
                            "The simulation understands the body written by 'hefsearch compile export'.")
    # one rescaled bias for all layers: (1 - m) * old * (new / old) = (1 - m) * new
    new_bias: dict[str, str] = {}
    extra_nodes_front: list = []
    for n in mask_adds:
        bias = next(t for t in n.input if t not in from_emb)
        if bias not in new_bias:
            k = _const(g, f"npu_sim/mask_ratio_{len(new_bias)}", mask_value / bundle_mask_value)
            out = f"npu_sim/mask_bias_{len(new_bias)}"
            extra_nodes_front.append(helper.make_node("Mul", [bias, k], [out], name=out))
            new_bias[bias] = out
        for i, t in enumerate(n.input):
            if t == bias:
                n.input[i] = new_bias[bias]

    sites: list[Site] = [Site("embeddings", "input", "embeddings input")]
    weights: dict[str, int] = {}
    new_nodes: list = []
    ln_count = 0
    seen_sites = {"embeddings"}

    def add_site(t: str, group: str, role: str) -> None:
        if t not in seen_sites:
            seen_sites.add(t)
            sites.append(Site(t, group, role))

    def reduce_mean(x: str, out: str):
        if opset >= 18:  # axes became an input in opset 18
            axes = out + "_axes"
            g.initializer.append(numpy_helper.from_array(np.array([-1], dtype=np.int64), axes))
            return helper.make_node("ReduceMean", [x, axes], [out], name=out, keepdims=1)
        return helper.make_node("ReduceMean", [x], [out], name=out, axes=[-1], keepdims=1)

    for k, n in enumerate(nodes):
        grp = groups[k]
        if n.op_type == "LayerNormalization":
            axis = next((a.i for a in n.attribute if a.name == "axis"), -1)
            eps = next((a.f for a in n.attribute if a.name == "epsilon"), 1e-5)
            if axis != -1:
                raise SimBuildError(f"LayerNorm {n.name} normalises axis {axis}; expected the last axis.")
            x, gamma = n.input[0], n.input[1]
            beta = n.input[2] if len(n.input) > 2 and n.input[2] else None
            p = f"npu_sim/ln{ln_count}"
            ln_count += 1
            eps_c = _const(g, p + "/eps", eps)
            one_c = _const(g, p + "/one", 1.0)
            y = n.output[0]
            new_nodes += [
                reduce_mean(x, p + "/mean"),
                helper.make_node("Sub", [x, p + "/mean"], [p + "/xmu"], name=p + "/xmu"),
                helper.make_node("Mul", [p + "/xmu", p + "/xmu"], [p + "/sq"], name=p + "/sq"),
                reduce_mean(p + "/sq", p + "/var"),
                helper.make_node("Add", [p + "/var", eps_c], [p + "/var_eps"], name=p + "/var_eps"),
                helper.make_node("Sqrt", [p + "/var_eps"], [p + "/std"], name=p + "/std"),
                helper.make_node("Div", [one_c, p + "/std"], [p + "/rstd"], name=p + "/rstd"),
                helper.make_node("Mul", [p + "/xmu", p + "/rstd"], [p + "/xhat"], name=p + "/xhat"),
            ]
            scaled = p + "/scaled" if beta else y
            new_nodes.append(helper.make_node("Mul", [p + "/xhat", gamma], [scaled], name=p + "/gamma"))
            if beta:
                new_nodes.append(helper.make_node("Add", [scaled, beta], [y], name=p + "/beta"))
            for t, role in (("/xmu", "x - mean"), ("/sq", "squared deviation"), ("/var", "variance"),
                            ("/rstd", "reciprocal std"), ("/xhat", "normalised x")):
                add_site(p + t, "layernorm", f"LayerNorm {role}")
            if y in out_names:
                add_site(y, "output", "last hidden state")
            else:
                add_site(y, "layernorm", "LayerNorm output")
            continue

        if n.op_type in ("MatMul", "Gemm") and grp is not None:
            for i, t in enumerate(n.input[:2]):
                w = resolve_init(t)
                if w is None or len(w.dims) != 2:
                    continue
                arr = numpy_helper.to_array(w).astype(np.float32)
                trans_b = n.op_type == "Gemm" and any(a.name == "transB" and a.i for a in n.attribute)
                axis = 0 if (i == 1 and trans_b) else 1  # output channels of B in A @ B
                if i == 0:
                    continue  # a constant left operand is not a dense layer
                bits = profile.bits_for(grp)
                qname = f"npu_sim/w{bits}/{t}"
                if qname not in inits:
                    q = numpy_helper.from_array(_quantise_weight(arr, bits, axis), qname)
                    g.initializer.append(q)
                    inits[qname] = q
                n.input[i] = qname
                weights[qname] = bits

        new_nodes.append(n)
        if grp is None:
            continue
        if k in mask_add_ids:
            if mask_mode == "softmax":
                scores = next(t for t in n.input if t in from_emb)
                add_site(scores, "attention_scores", "attention scores (mask applied inside softmax)")
                continue  # the masked sum itself is never stored: the mask lives inside softmax
            add_site(n.output[0], "attention_scores", f"attention scores + additive mask {mask_value:g}")
            continue
        for t in n.output:
            users = consumers.get(t, [])
            boundary = t in out_names or any(
                groups[u] != grp or (u in mask_add_ids and mask_mode == "softmax") for u in users
            )
            if boundary:
                add_site(t, grp, _ROLE.get(grp, grp))

    del g.node[:]
    g.node.extend(extra_nodes_front + new_nodes)
    _toposort(g)
    unknown = {s.group for s in sites} - set(SITE_GROUPS)
    if unknown:  # pragma: no cover - classify_onnx_node only returns known groups
        raise SimBuildError(f"Unknown site groups {unknown}.")
    return SimGraph(model=model, sites=sites, weights=weights)


_ROLE = {
    "qkv": "Q/K/V projection output",
    "attention_scores": "attention scores",
    "softmax": "softmax output",
    "attention_context": "attention context",
    "attention_out": "attention output projection",
    "residual_add": "residual add",
    "ffn_in": "FFN input projection",
    "ffn_act": "GELU output",
    "ffn_out": "FFN output projection",
}


def _toposort(g) -> None:
    """Order nodes so every input is produced before use (the mask rescale went in front)."""
    available = {i.name for i in g.input} | {i.name for i in g.initializer} | {""}
    pending = list(g.node)
    ordered = []
    while pending:
        rest = []
        for n in pending:
            if all(t in available for t in n.input):
                ordered.append(n)
                available.update(n.output)
            else:
                rest.append(n)
        if len(rest) == len(pending):
            raise SimBuildError(f"Cannot order the simulated graph (stuck at {rest[0].name}).")
        pending = rest
    del g.node[:]
    g.node.extend(ordered)


def with_site_outputs(sim: SimGraph):
    """A copy of the prepared FP32 graph that also outputs every site tensor (for calibration)."""
    import onnx
    from onnx import helper

    m = onnx.ModelProto.FromString(sim.model.SerializeToString())
    have = {o.name for o in m.graph.output} | {i.name for i in m.graph.input}
    for s in sim.sites:
        if s.tensor not in have:
            m.graph.output.append(helper.make_tensor_value_info(s.tensor, onnx.TensorProto.FLOAT, None))
            have.add(s.tensor)
    return m


def quant_params(lo: float, hi: float, bits: int) -> tuple[float, int, int] | None:
    """Per-tensor asymmetric unsigned quantisation of [lo, hi] (widened to hold 0).

    Returns (scale, qmin, qmax) in "centred" integers (zero point folded in), or None when the
    range is empty (the tensor is constant zero).
    """
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    levels = 2**bits - 1
    if hi - lo <= 0:
        return None
    scale = (hi - lo) / levels
    zp = int(np.clip(np.round(-lo / scale), 0, levels))
    return scale, -zp, levels - zp


def insert_fake_quant(sim: SimGraph, ranges: dict[str, tuple[float, float]], profile: PrecisionProfile):
    """The final simulated model: round every site to its group's bits with the given ranges."""
    import onnx
    from onnx import helper

    m = onnx.ModelProto.FromString(sim.model.SerializeToString())
    g = m.graph
    out_names = {o.name for o in g.output}
    by_tensor = {s.tensor: s for s in sim.sites}
    nodes_out = []
    rename: dict[str, str] = {}

    def fq_chain(src: str, dst: str, site: Site) -> list:
        bits = profile.bits_for(site.group)
        qp = quant_params(*ranges[site.tensor], bits)
        if qp is None:
            return [helper.make_node("Identity", [src], [dst], name=dst + "/id")]
        scale, qmin, qmax = qp
        p = dst + "/fq"
        inv = _const(g, p + "/inv_scale", 1.0 / scale)
        sc = _const(g, p + "/scale", scale)
        lo = _const(g, p + "/qmin", float(qmin))
        hi = _const(g, p + "/qmax", float(qmax))
        return [
            helper.make_node("Mul", [src, inv], [p + "/x"], name=p + "/div"),
            helper.make_node("Round", [p + "/x"], [p + "/r"], name=p + "/round"),
            helper.make_node("Clip", [p + "/r", lo, hi], [p + "/q"], name=p + "/clip"),
            helper.make_node("Mul", [p + "/q", sc], [dst], name=p + "/dequant"),
        ]

    # the graph input: round it first, everything downstream reads the rounded copy
    if "embeddings" in by_tensor:
        rename["embeddings"] = "npu_sim/embeddings_q"
        nodes_out += fq_chain("embeddings", "npu_sim/embeddings_q", by_tensor["embeddings"])
    for n in g.node:
        for i, t in enumerate(n.input):
            if t in rename:
                n.input[i] = rename[t]
        chains = []
        for j, t in enumerate(n.output):
            if t not in by_tensor:
                continue
            if t in out_names:  # keep the output's name on the rounded tensor
                n.output[j] = t + "/fp"
                chains.append((t + "/fp", t, by_tensor[t]))
            else:  # consumers read the rounded copy
                rename[t] = t + "/q"
                chains.append((t, t + "/q", by_tensor[t]))
        nodes_out.append(n)
        for src, dst, site in chains:
            nodes_out += fq_chain(src, dst, site)
    del g.node[:]
    g.node.extend(nodes_out)
    _toposort(g)
    _prune(g)
    onnx.checker.check_model(m)
    return m


def _prune(g) -> None:
    """Drop nodes nobody reads and initializers nothing uses (the FP32 weights that were
    replaced by rounded copies), so the file is no bigger than the FP32 body."""
    outputs = {o.name for o in g.output}
    while True:
        used = outputs | {t for n in g.node for t in n.input}
        keep = [n for n in g.node if any(t in used for t in n.output)]
        if len(keep) == len(g.node):
            break
        del g.node[:]
        g.node.extend(keep)
    used = outputs | {t for n in g.node for t in n.input}
    inits = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(inits)


# -- calibration ---------------------------------------------------------------------------
@dataclass
class Calibration:
    embeddings: np.ndarray  # [N, S, H] float32
    mask: np.ndarray  # [N, S] int64
    source: str  # what it is, for the manifest and the user


def calibration_from_bundle(bundle: Bundle, limit: int | None = DEFAULT_CALIB_LIMIT) -> Calibration | None:
    """The 4D arrays ``compile calib`` stored in the bundle (``calib/calib_s<SEQ>.npz``),
    reshaped to the body's 3D contract. Prefers the bundle's own SEQ, else the longest set."""
    from .calib import load_calibration

    sets = bundle.manifest.get("calibration")
    if not isinstance(sets, dict):
        return None
    seqs = sorted(int(k[1:]) for k in sets if isinstance(k, str) and k.startswith("s") and k[1:].isdigit())
    if not seqs:
        return None
    seq = bundle.seq_len if bundle.seq_len in seqs else seqs[-1]
    e, m, info = load_calibration(bundle, seq)
    if e.ndim == 4:  # [N,1,S,H]
        e = e.reshape(e.shape[0], e.shape[2], e.shape[3])
    m = np.asarray(m).reshape(m.shape[0], m.shape[-1])
    if e.ndim != 3 or e.shape[:2] != m.shape or e.shape[2] != bundle.hidden:
        raise SimBuildError(
            f"Calibration arrays in {bundle.path} ({info.get('file')}) have shapes {list(e.shape)} and "
            f"{list(m.shape)}; expected [N,1,S,{bundle.hidden}] and [N,1,1,S].",
            "Rebuild them with 'hefsearch compile calib'.",
        )
    total = int(e.shape[0])
    n = total if limit is None else min(limit, total)
    # an even spread over the set, not its first rows (it is not shuffled by length)
    pick = np.linspace(0, total - 1, n).round().astype(int) if n < total else np.arange(total)
    return Calibration(np.ascontiguousarray(e[pick], dtype=np.float32), (m[pick] > 0.5).astype(np.int64),
                       f"bundle calibration set {info.get('file')} ({n} of {total} rows, SEQ {e.shape[1]})")


def calibration_from_texts(bundle: Bundle, texts: Sequence[str], note: str) -> Calibration:
    """Embed texts with the host pipeline, padded to the bundle's fixed length as on the NPU
    (an additive mask only shows up in the score ranges when there is padding)."""
    from hefsearch.embed.host import HostPipeline

    host = HostPipeline(bundle)
    texts = [t for t in texts if t and not t.isspace()]
    tok = host.tokenize(list(texts))
    e, m = host.embed(tok.ids, pad_to=host.max_tokens)
    return Calibration(e, m, note)


def measure_ranges(model, calib: Calibration, sites: Sequence[Site], batch: int = CALIB_BATCH,
                   progress: Callable[[str], None] | None = None) -> dict[str, tuple[float, float]]:
    """Min/max of every site tensor over the calibration set, on the FP32 graph."""
    from hefsearch.embed.backends.cpu import make_session

    sess = _session_from_bytes(model.SerializeToString(), make_session)
    inputs = {"embeddings", "attention_mask"}
    names = [s.tensor for s in sites if s.tensor not in inputs]
    lo = {s.tensor: np.inf for s in sites}
    hi = {s.tensor: -np.inf for s in sites}
    n = len(calib.embeddings)
    for i in range(0, n, batch):
        e = np.ascontiguousarray(calib.embeddings[i : i + batch])
        m = calib.mask[i : i + batch]
        feeds = {"embeddings": e, "attention_mask": m}
        got = list(zip(names, sess.run(names, feeds)))
        got += [(t, v) for t, v in feeds.items() if t in lo]
        real = m.astype(bool)
        for t, v in got:
            v = _real_rows(v, real)
            if v.size == 0:
                continue
            lo[t] = min(lo[t], float(np.min(v)))
            hi[t] = max(hi[t], float(np.max(v)))
        if progress and (i // batch) % 16 == 0:
            progress(f"calibrating: {min(i + batch, n)}/{n} texts")
    return {t: (lo[t], hi[t]) for t in lo}


def _real_rows(v: np.ndarray, real: np.ndarray) -> np.ndarray:
    """The values of real (unpadded) query tokens. Padded rows are zero vectors whose LayerNorm
    variance is 0, so their reciprocal std is 1/sqrt(eps) (1e6 for BERT): counting them would
    stretch every range by orders of magnitude, and their outputs are discarded by pooling.
    Padded *keys* stay in the score ranges, so an additive mask value is measured as the NPU sees it."""
    n, s = real.shape
    if v.ndim == 3 and v.shape[:2] == (n, s):
        return v[real]
    if v.ndim == 4 and v.shape[0] == n and v.shape[2] == s:  # [N, heads, S(queries), *]
        return v.transpose(0, 2, 1, 3)[real]
    return v


def _session_from_bytes(data: bytes, make_session):
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(suffix=".onnx")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return make_session(tmp)
    finally:
        Path(tmp).unlink(missing_ok=True)


# -- the command's work --------------------------------------------------------------------
@dataclass
class SimReport:
    name: str
    label: str
    file: str
    profile: dict
    mask: dict
    calibration: str
    sites: int
    weights: int
    check: dict = field(default_factory=dict)
    seconds: float = 0.0
    notices: list[str] = field(default_factory=list)


def build_sim(
    bundle: Bundle | str | Path,
    precision: str | Path | PrecisionProfile | None = "balanced",
    *,
    mask: str | None = None,
    texts: Sequence[str] = (),
    calib_limit: int | None = DEFAULT_CALIB_LIMIT,
    progress: Callable[[str], None] | None = None,
) -> SimReport:
    """Write ``encoder.npu-sim.<name>.onnx`` into the bundle and list it in the manifest."""
    try:
        import onnx
    except ImportError:
        raise ExportError("Building the NPU simulation needs the onnx package.",
                          "pip install 'hefsearch[compile]'") from None
    t0 = time.perf_counter()
    say = progress or (lambda m: None)
    if not isinstance(bundle, Bundle):
        bundle = Bundle.open(bundle)
    profile = load_profile(precision)
    mode, value = parse_mask(mask, profile, bundle.mask_value)
    name = sim_name(profile, mode, value, bundle.mask_value)
    entries = bundle.encoder_entries("onnx")
    if not entries:
        raise SimBuildError(f"Bundle {bundle.path} has no FP32 encoder body to simulate.", "Re-export the bundle.")
    src = bundle.path / entries[0].file
    notices: list[str] = []

    calib = calibration_from_bundle(bundle, calib_limit)
    if calib is None:
        calib = calibration_from_texts(
            bundle, list(VERIFY_TEXTS) + list(texts),
            f"built-in sample texts ({len(VERIFY_TEXTS)})" + (f" + {len(texts)} given texts" if texts else ""),
        )
        notices.append(
            "The bundle has no calibration set (hefsearch compile calib); activation ranges come from "
            f"{calib.source}. A HEF build calibrates on your documents; run 'compile calib' for a closer match."
        )
    elif texts:
        notices.append("Given texts were not used: the bundle's calibration set is.")
    sixteen = ", ".join(profile.sixteen_bit) or "none"
    say(f"simulating {profile.name} (16-bit: {sixteen}) with the mask {'inside softmax' if mode == 'softmax' else f'additive {value:g}'}")

    sim = prepare_graph(onnx.load(str(src)), profile, mask_mode=mode, mask_value=value,
                        bundle_mask_value=bundle.mask_value)
    ranges = measure_ranges(with_site_outputs(sim), calib, sim.sites, progress=say)
    final = insert_fake_quant(sim, ranges, profile)

    rel = f"encoder.npu-sim.{name}.onnx"
    tmp = bundle.path / (rel + ".tmp")
    onnx.save(final, str(tmp))
    tmp.replace(bundle.path / rel)

    check = self_check(bundle, rel)
    mask_info = {"mode": mode, "value": value}
    by_group: dict[str, int] = {}
    for s in sim.sites:
        by_group[s.group] = by_group.get(s.group, 0) + 1
    bundle.add_file(rel)
    bundle.upsert_encoder(EncoderEntry(
        kind=SIM_KIND, file=rel, seq_len=None, hw_arch=None,
        extra={
            "name": name,
            "label": sim_label(name),
            "precision": profile.to_dict(),
            "mask": mask_info,
            "weights": "per-channel symmetric (int8; int16 in 16-bit groups)",
            "activations": "per-tensor asymmetric min/max (uint8; uint16 in 16-bit groups)",
            "calibration": {"source": calib.source, "texts": int(len(calib.embeddings)),
                            "seq_len": int(calib.embeddings.shape[1])},
            "sites_per_group": by_group,
            "ranges": {s.tensor: [round(ranges[s.tensor][0], 6), round(ranges[s.tensor][1], 6), s.group]
                       for s in sim.sites},
            "check": check,
        },
    ))
    bundle.save_manifest()
    return SimReport(
        name=name, label=sim_label(name), file=rel, profile=profile.to_dict(), mask=mask_info,
        calibration=calib.source, sites=len(sim.sites), weights=len(sim.weights), check=check,
        seconds=time.perf_counter() - t0, notices=notices,
    )


def self_check(bundle: Bundle, rel: str) -> dict:
    """The simulation against FP32 on the built-in sample texts (basis-invariant metrics first)."""
    from hefsearch.embed.backends.cpu import make_session
    from hefsearch.embed.host import HostPipeline, POOLERS, l2_normalize
    from hefsearch.embed.metrics import paired_cosine, similarity_correlation

    host = HostPipeline(bundle)
    tok = host.tokenize(list(VERIFY_TEXTS))
    fp32 = make_session(str(bundle.path / bundle.encoder_entries("onnx")[0].file))
    sim = make_session(str(bundle.path / rel))
    pool = POOLERS[bundle.pooling]
    a, b = [], []
    for ids in tok.ids:  # one at a time: no padding effects in the comparison
        e, m = host.embed([ids])
        feeds = {"embeddings": e, "attention_mask": m}
        a.append(pool(fp32.run(["last_hidden_state"], feeds)[0], m))
        b.append(pool(sim.run(["last_hidden_state"], feeds)[0], m))
    a, b = l2_normalize(np.vstack(a)), l2_normalize(np.vstack(b))
    pc = paired_cosine(a, b)
    return {
        "texts": len(a),
        "cosine_mean": round(float(pc.mean()), 6),
        "cosine_min": round(float(pc.min()), 6),
        "similarity_pearson": round(similarity_correlation(a, b), 6),
    }

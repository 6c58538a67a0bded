"""The NPU simulation's graph rewrite (needs the ``onnx`` package), in named stages.

:func:`prepare_graph` turns the FP32 encoder body into a graph that is still FP32 but has the
shape the NPU computes: the attention-mask bias rescaled to the simulated value, every
LayerNorm decomposed into the steps the DFC quantises one by one, dense weights rounded
per output channel, and a list of the activation *sites* (tensors an 8-bit NPU stores in 8 or
16 bits). :func:`insert_fake_quant` then rounds every site once ranges are known
(:mod:`hefsearch.compile.sim.ranges`). The stages, in order:

    read_graph      model -> GraphView (nodes, their site groups, consumers, what the embeddings feed)
    rescale_mask    GraphView -> MaskRewrite (the mask Adds, one rescaled bias in front of the graph)
    rewrite_nodes   GraphView + MaskRewrite -> nodes with LayerNorms decomposed, weights rounded, sites
    finish_graph    the new node list -> SimGraph (toposorted)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hefsearch.base.errors import HefsearchError
from hefsearch.embed.precision import SITE_GROUPS, PrecisionProfile, classify_onnx_node


class SimBuildError(HefsearchError):
    """The encoder body could not be turned into an NPU simulation."""

    title = "simulation build error"


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


def _const(g, name: str, value) -> str:
    from onnx import numpy_helper

    g.initializer.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
    return name


def _opset(model) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 17


def _quantise_weight(w: np.ndarray, bits: int, axis: int | None) -> np.ndarray:
    """Symmetric per-channel rounding along ``axis`` (the output channels); None: per tensor."""
    qmax = 2 ** (bits - 1) - 1
    red = tuple(i for i in range(w.ndim) if i != axis)
    amax = np.max(np.abs(w), axis=red, keepdims=True)
    scale = np.where(amax > 0, amax / qmax, 1.0)
    return (np.clip(np.round(w / scale), -qmax, qmax) * scale).astype(np.float32)


# -- stage 1: read the graph ----------------------------------------------------------------
@dataclass
class GraphView:
    """What the rewrite needs to know about the (copied) FP32 graph."""

    model: object  # the copy being rewritten
    opset: int
    nodes: list  # protobuf hands out new wrapper objects on each access: one list, by index
    groups: list  # site group of each node (None: not a site)
    consumers: dict[str, list[int]]  # tensor -> indices of the nodes reading it
    from_emb: set[str]  # tensors computed from the embeddings (the rest is mask prep or constants)
    out_names: set[str]
    inits: dict  # initializer name -> TensorProto (grows as rounded weights are added)
    alias: dict[str, str]  # Identity aliases of initializers (the exporter dedups equal tensors so)

    @property
    def graph(self):
        return self.model.graph

    def resolve_init(self, name: str):
        return self.inits.get(self.alias.get(name, name))


def read_graph(model) -> GraphView:
    """Consumes the FP32 body; produces a private copy and its :class:`GraphView`."""
    import onnx

    model = onnx.ModelProto.FromString(model.SerializeToString())
    g = model.graph
    opset = _opset(model)
    inits = {i.name: i for i in g.initializer}
    input_names = [i.name for i in g.input]
    if "embeddings" not in input_names or "attention_mask" not in input_names:
        raise SimBuildError(f"encoder.onnx has inputs {input_names}; expected embeddings and attention_mask.",
                            "Re-export the bundle with 'hefsearch compile export'.")
    out_names = {o.name for o in g.output}
    alias = {n.output[0]: n.input[0] for n in g.node if n.op_type == "Identity" and n.input[0] in inits}
    nodes = list(g.node)
    groups = [classify_onnx_node(n.op_type, n.name) for n in nodes]
    consumers: dict[str, list[int]] = {}
    for k, n in enumerate(nodes):
        for t in n.input:
            consumers.setdefault(t, []).append(k)
    from_emb = {"embeddings"}
    for n in nodes:
        if any(t in from_emb for t in n.input):
            from_emb.update(n.output)
    return GraphView(model, opset, nodes, groups, consumers, from_emb, out_names, inits, alias)


# -- stage 2: the attention mask ------------------------------------------------------------
@dataclass
class MaskRewrite:
    add_ids: set[int]  # indices of the "scores + mask bias" Adds
    front_nodes: list  # the rescaled bias, computed once in front of the graph


def rescale_mask(view: GraphView, mask_value: float, bundle_mask_value: float) -> MaskRewrite:
    """Consumes the view; points every mask Add at one bias rescaled from the export's value to
    ``mask_value``: (1 - m) * old * (new / old) = (1 - m) * new."""
    from onnx import helper

    if bundle_mask_value == 0:
        raise SimBuildError("The bundle records mask_value 0; the additive mask cannot be rescaled.")
    nodes, from_emb = view.nodes, view.from_emb
    add_ids = {k for k, n in enumerate(nodes) if view.groups[k] == "attention_scores" and n.op_type == "Add"
               and sum(t in from_emb for t in n.input) == 1}
    if not add_ids:
        raise SimBuildError("Found no attention-mask Add in encoder.onnx (scores + mask bias).",
                            "The simulation understands the body written by 'hefsearch compile export'.")
    new_bias: dict[str, str] = {}
    front: list = []
    for n in (nodes[k] for k in sorted(add_ids)):
        bias = next(t for t in n.input if t not in from_emb)
        if bias not in new_bias:
            k = _const(view.graph, f"npu_sim/mask_ratio_{len(new_bias)}", mask_value / bundle_mask_value)
            out = f"npu_sim/mask_bias_{len(new_bias)}"
            front.append(helper.make_node("Mul", [bias, k], [out], name=out))
            new_bias[bias] = out
        for i, t in enumerate(n.input):
            if t == bias:
                n.input[i] = new_bias[bias]
    return MaskRewrite(add_ids, front)


# -- stage 3: rewrite node by node ----------------------------------------------------------
@dataclass
class _Sites:
    """The activation sites in graph order, each tensor once (the embeddings input first)."""

    sites: list[Site] = field(default_factory=lambda: [Site("embeddings", "input", "embeddings input")])
    seen: set[str] = field(default_factory=lambda: {"embeddings"})

    def add(self, t: str, group: str, role: str) -> None:
        if t not in self.seen:
            self.seen.add(t)
            self.sites.append(Site(t, group, role))


def _reduce_mean(g, opset: int, x: str, out: str):
    from onnx import helper, numpy_helper

    if opset >= 18:  # axes became an input in opset 18
        axes = out + "_axes"
        g.initializer.append(numpy_helper.from_array(np.array([-1], dtype=np.int64), axes))
        return helper.make_node("ReduceMean", [x, axes], [out], name=out, keepdims=1)
    return helper.make_node("ReduceMean", [x], [out], name=out, axes=[-1], keepdims=1)


def decompose_layernorm(view: GraphView, n, index: int, sites: _Sites) -> list:
    """One LayerNormalization -> mean, x - mean, squared deviation, variance, reciprocal std,
    normalised x, gamma (and beta), each intermediate a site as the DFC quantises them."""
    from onnx import helper

    g = view.graph
    axis = next((a.i for a in n.attribute if a.name == "axis"), -1)
    eps = next((a.f for a in n.attribute if a.name == "epsilon"), 1e-5)
    if axis != -1:
        raise SimBuildError(f"LayerNorm {n.name} normalises axis {axis}; expected the last axis.")
    x, gamma = n.input[0], n.input[1]
    beta = n.input[2] if len(n.input) > 2 and n.input[2] else None
    p = f"npu_sim/ln{index}"
    eps_c = _const(g, p + "/eps", eps)
    one_c = _const(g, p + "/one", 1.0)
    y = n.output[0]
    out = [
        _reduce_mean(g, view.opset, x, p + "/mean"),
        helper.make_node("Sub", [x, p + "/mean"], [p + "/xmu"], name=p + "/xmu"),
        helper.make_node("Mul", [p + "/xmu", p + "/xmu"], [p + "/sq"], name=p + "/sq"),
        _reduce_mean(g, view.opset, p + "/sq", p + "/var"),
        helper.make_node("Add", [p + "/var", eps_c], [p + "/var_eps"], name=p + "/var_eps"),
        helper.make_node("Sqrt", [p + "/var_eps"], [p + "/std"], name=p + "/std"),
        helper.make_node("Div", [one_c, p + "/std"], [p + "/rstd"], name=p + "/rstd"),
        helper.make_node("Mul", [p + "/xmu", p + "/rstd"], [p + "/xhat"], name=p + "/xhat"),
    ]
    scaled = p + "/scaled" if beta else y
    out.append(helper.make_node("Mul", [p + "/xhat", gamma], [scaled], name=p + "/gamma"))
    if beta:
        out.append(helper.make_node("Add", [scaled, beta], [y], name=p + "/beta"))
    for t, role in (("/xmu", "x - mean"), ("/sq", "squared deviation"), ("/var", "variance"),
                    ("/rstd", "reciprocal std"), ("/xhat", "normalised x")):
        sites.add(p + t, "layernorm", f"LayerNorm {role}")
    if y in view.out_names:
        sites.add(y, "output", "last hidden state")
    else:
        sites.add(y, "layernorm", "LayerNorm output")
    return out


def round_weights(view: GraphView, n, group: str, profile: PrecisionProfile, weights: dict[str, int],
                  per_channel: bool = True) -> None:
    """Point a dense MatMul/Gemm at a per-output-channel rounded copy of its weight (the right
    operand; a constant left operand is not a dense layer); records it in ``weights``."""
    from onnx import numpy_helper

    if len(n.input) < 2:
        return
    t = n.input[1]
    w = view.resolve_init(t)
    if w is None or len(w.dims) != 2:
        return
    bits = profile.bits_for(group)
    qname = f"npu_sim/w{bits}/{t}"
    if qname not in view.inits:  # a weight shared by several nodes is rounded once
        trans_b = n.op_type == "Gemm" and any(a.name == "transB" and a.i for a in n.attribute)
        axis = (0 if trans_b else 1) if per_channel else None  # output channels of B in A @ B
        arr = numpy_helper.to_array(w).astype(np.float32)
        q = numpy_helper.from_array(_quantise_weight(arr, bits, axis), qname)
        view.graph.initializer.append(q)
        view.inits[qname] = q
    n.input[1] = qname
    weights[qname] = bits


def mark_sites(view: GraphView, k: int, mask: MaskRewrite, mask_mode: str, mask_value: float,
               sites: _Sites) -> None:
    """The sites of node ``k``: its outputs read by another group (or the graph's output); for a
    mask Add, the scores as the NPU stores them in this mask mode."""
    n, grp = view.nodes[k], view.groups[k]
    if k in mask.add_ids:
        if mask_mode == "softmax":
            scores = next(t for t in n.input if t in view.from_emb)
            sites.add(scores, "attention_scores", "attention scores (mask applied inside softmax)")
            return  # the masked sum itself is never stored: the mask lives inside softmax
        sites.add(n.output[0], "attention_scores", f"attention scores + additive mask {mask_value:g}")
        return
    for t in n.output:
        users = view.consumers.get(t, [])
        boundary = t in view.out_names or any(
            view.groups[u] != grp or (u in mask.add_ids and mask_mode == "softmax") for u in users
        )
        if boundary:
            sites.add(t, grp, _ROLE.get(grp, grp))


@dataclass
class Rewritten:
    nodes: list
    sites: list[Site]
    weights: dict[str, int]


def rewrite_nodes(view: GraphView, mask: MaskRewrite, profile: PrecisionProfile, mask_mode: str,
                  mask_value: float, per_channel: bool = True) -> Rewritten:
    """Consumes the view and its mask rewrite; produces the new node list and the sites."""
    sites = _Sites()
    weights: dict[str, int] = {}
    new_nodes: list = []
    ln_count = 0
    for k, n in enumerate(view.nodes):
        grp = view.groups[k]
        if n.op_type == "LayerNormalization":
            new_nodes += decompose_layernorm(view, n, ln_count, sites)
            ln_count += 1
            continue
        if n.op_type in ("MatMul", "Gemm") and grp is not None:
            round_weights(view, n, grp, profile, weights, per_channel)
        new_nodes.append(n)
        if grp is not None:
            mark_sites(view, k, mask, mask_mode, mask_value, sites)
    return Rewritten(mask.front_nodes + new_nodes, sites.sites, weights)


# -- stage 4 ---------------------------------------------------------------------------------
def finish_graph(view: GraphView, done: Rewritten) -> SimGraph:
    """Consumes the rewritten nodes; produces the ordered graph as a :class:`SimGraph`."""
    g = view.graph
    del g.node[:]
    g.node.extend(done.nodes)
    _toposort(g)
    unknown = {s.group for s in done.sites} - set(SITE_GROUPS)
    if unknown:  # pragma: no cover - classify_onnx_node only returns known groups
        raise SimBuildError(f"Unknown site groups {unknown}.")
    return SimGraph(model=view.model, sites=done.sites, weights=done.weights)


def prepare_graph(model, profile: PrecisionProfile, *, mask_mode: str, mask_value: float,
                  bundle_mask_value: float, per_channel_weights: bool = True) -> SimGraph:
    """Decompose LayerNorms, round weights, set the mask, and list the activation sites.

    The returned model is still FP32 between sites; :func:`insert_fake_quant` adds the
    rounding once ranges are known.
    """
    view = read_graph(model)
    mask = rescale_mask(view, mask_value, bundle_mask_value)
    done = rewrite_nodes(view, mask, profile, mask_mode, mask_value, per_channel_weights)
    return finish_graph(view, done)


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


# -- after calibration: the rounding -------------------------------------------------------
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


def _fake_quant_chain(g, src: str, dst: str, site: Site, ranges, profile: PrecisionProfile) -> list:
    """Nodes computing ``dst`` = ``src`` rounded to the site's bits (Identity for an empty range)."""
    from onnx import helper

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


def insert_fake_quant(sim: SimGraph, ranges: dict[str, tuple[float, float]], profile: PrecisionProfile):
    """The final simulated model: round every site to its group's bits with the given ranges."""
    import onnx

    m = onnx.ModelProto.FromString(sim.model.SerializeToString())
    g = m.graph
    out_names = {o.name for o in g.output}
    by_tensor = {s.tensor: s for s in sim.sites}
    nodes_out = []
    rename: dict[str, str] = {}

    def fq_chain(src: str, dst: str, site: Site) -> list:
        return _fake_quant_chain(g, src, dst, site, ranges, profile)

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

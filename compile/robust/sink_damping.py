"""Damp the encoder body's attention-sink neurons: the few FFN neurons that write one huge value
into the residual stream of a handful of tokens (needs torch and onnx: the compile extra).

What sets an 8-bit build's residual-stream steps is not the text: in multilingual-e5-small and
all-MiniLM-L6-v2 one FFN neuron per layer fires only on the sequence's special tokens (``<s>``,
``</s>``, ``[CLS]``, ``[SEP]``; activation 0.00 on every other token) and pushes a single
channel of their residual sum to 200-660 where 99.9% of all values lie within 4-7. Those tokens
are attention sinks (heads with nothing to do attend to them); the next LayerNorm only needs
their sum to point along that channel, not to be 100 times larger than everyone else's. A
per-tensor 8-bit step sized for 660 leaves the other tokens a handful of levels, and the squared
deviation inside the LayerNorm (the square of that range) none at all.

:func:`damp_sinks` finds such neurons from their activations on calibration rows (fires on few
tokens, pushes far above the layer's bulk) and scales their row of the FFN output projection
down until their push is at most ``ratio`` times the layer's bulk. That changes weight values
only; other tokens see no change (the neuron is silent on nearly all of them), and the special tokens'
LayerNorm outputs move a little (and the odd token that half-fires it), which the distillation that follows
(:mod:`hefsearch.compile.robust.build`) trains back towards the FP32 original.

Measured by ``compile robust --steps 0`` (damping only) on held-out training-pool texts, 8-bit
cosine to the original FP32 vectors (docs/performance.md): multilingual-e5-small 0.911 -> 0.951
at ratio 4 (9 neurons; largest residual value over the rows 263 -> 53), 0.950 at ratio 8;
all-MiniLM-L6-v2 0.698 -> 0.785 at ratio 4 (5 neurons; 224 -> 83), 0.762 at ratio 8.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from hefsearch.embed.precision import classify_onnx_node

#: a neuron is a sink when it is above a tenth of its peak on at most this share of real tokens
MAX_FIRING_SHARE = 0.1
#: ... and its peak push exceeds ``ratio`` times the layer's bulk (the median token's largest |x|)


@dataclass
class SinkNeuron:
    ffn: int  # which FFN, in graph order (0 = the first layer's)
    weight: str  # the FFN output projection's initializer ([intermediate, hidden])
    neuron: int  # the row of that weight
    push: float  # its largest push into one residual channel: |activation| x max |weight row|
    bulk: float  # the median over real tokens of the residual sum's largest |x|, that layer
    fires_on: float  # share of real tokens where it is above a tenth of its peak
    scale: float  # what its row was multiplied by


@dataclass
class DampingReport:
    ratio: float
    rows: int
    neurons: list[SinkNeuron] = field(default_factory=list)
    #: the largest |value| of any residual sum over the rows, before and after
    residual_max_before: float = 0.0
    residual_max_after: float = 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        for n in d["neurons"]:
            for k in ("push", "bulk", "fires_on", "scale"):
                n[k] = round(float(n[k]), 4)
        d["residual_max_before"] = round(self.residual_max_before, 2)
        d["residual_max_after"] = round(self.residual_max_after, 2)
        return d

    def describe(self) -> str:
        if not self.neurons:
            return f"no attention-sink neuron above {self.ratio:g}x its layer's bulk"
        return (f"{len(self.neurons)} attention-sink neuron(s) damped to <= {self.ratio:g}x their layer's bulk "
                f"(largest residual value {self.residual_max_before:.0f} -> {self.residual_max_after:.0f})")


@dataclass
class _Ffn:
    matmul: int  # node index of the FFN output MatMul
    act: str  # its input: the activation tensor [N, S, intermediate]
    weight: str  # its weight initializer
    residual: str  # the residual sum that adds this FFN's output


def _ffns(body) -> list[_Ffn]:
    """The FFN output projections of the body, each with its activation input and the residual
    add its output goes into (found by site group and data flow, not by layer names)."""
    nodes = body.nodes
    producer = {t: k for k, n in enumerate(nodes) for t in n.output}
    consumers: dict[str, list[int]] = {}
    for k, n in enumerate(nodes):
        for t in n.input:
            consumers.setdefault(t, []).append(k)
    out = []
    for k, w in body.dense.items():
        n = nodes[k]
        if classify_onnx_node(n.op_type, n.name) != "ffn_out":
            continue
        # follow the output (through its bias Add) to the residual add
        t, residual = n.output[0], None
        for _ in range(3):
            users = consumers.get(t, [])
            res = [u for u in users if classify_onnx_node(nodes[u].op_type, nodes[u].name) == "residual_add"]
            if res:
                residual = nodes[res[0]].output[0]
                break
            if len(users) != 1:
                break
            t = nodes[users[0]].output[0]
        if residual is not None and n.input[0] in producer:
            out.append(_Ffn(k, n.input[0], w, residual))
    return out


def _observe(body, emb: np.ndarray, mask: np.ndarray, ffns: list[_Ffn], batch: int = 8):
    """Per FFN: every neuron's peak |activation| and how many real tokens it fires on (above a
    tenth of its peak is decided after the pass, so activations are kept per token), and each
    real token's largest |value| of every residual sum."""
    wanted = {f.act for f in ffns} | {f.residual for f in ffns}
    acts: dict[str, list[torch.Tensor]] = {f.act: [] for f in ffns}
    resid: dict[str, list[torch.Tensor]] = {f.residual: [] for f in ffns}
    dev = next(body.parameters()).device
    for i in range(0, len(emb), batch):
        m = torch.from_numpy(np.ascontiguousarray(mask[i : i + batch])).to(dev)
        s = max(1, int(m.sum(1).max()))
        e = torch.from_numpy(np.ascontiguousarray(emb[i : i + batch, :s])).to(dev)
        m = m[:, :s]
        real = m.bool()
        got: dict[str, torch.Tensor] = {}

        def site(name, v):
            if name in wanted:
                got[name] = v
            return v

        with torch.no_grad():
            body(e, m, site=site)
        for f in ffns:
            acts[f.act].append(got[f.act][real].abs())
            resid[f.residual].append(got[f.residual][real].abs().amax(-1))
    return ({k: torch.cat(v) for k, v in acts.items()}, {k: torch.cat(v) for k, v in resid.items()})


def find_sinks(body, emb: np.ndarray, mask: np.ndarray, ratio: float) -> tuple[list[SinkNeuron], float]:
    """The sink neurons of ``body`` on these rows, and the largest |residual value| seen."""
    ffns = _ffns(body)
    acts, resid = _observe(body, emb, mask, ffns)
    found, top = [], 0.0
    for idx, f in enumerate(ffns):
        a = acts[f.act]  # [tokens, intermediate]
        r = resid[f.residual]
        top = max(top, float(r.max()))
        bulk = float(r.median())  # robust to the few tokens a sink fires on
        peak = a.max(0).values
        firing = (a > 0.1 * peak.clamp_min(1e-12)).float().mean(0)
        w = body.param(f.weight).detach()
        push = peak * w.abs().max(1).values
        for j in torch.nonzero((push > ratio * bulk) & (firing <= MAX_FIRING_SHARE)).flatten().tolist():
            found.append(SinkNeuron(idx, f.weight, j, float(push[j]), bulk, float(firing[j]),
                                    min(1.0, ratio * bulk / float(push[j]))))
    return found, top


def damp_sinks(body, emb: np.ndarray, mask: np.ndarray, ratio: float, rounds: int = 3) -> DampingReport:
    """Scale every sink neuron's output row so its push is at most ``ratio`` x its layer's bulk.

    Damping one layer changes what the next layers see, so the search runs again on the damped
    body (``rounds`` at most) until it finds nothing more to damp. Changes ``body`` in place."""
    report = DampingReport(ratio=ratio, rows=len(emb))
    merged: dict[tuple[str, int], SinkNeuron] = {}
    for r in range(rounds):
        sinks, top = find_sinks(body, emb, mask, ratio)
        if r == 0:
            report.residual_max_before = top
        sinks = [s for s in sinks if s.scale < 0.98]
        if not sinks:
            report.residual_max_after = top
            break
        with torch.no_grad():
            for s in sinks:
                body.param(s.weight)[s.neuron, :] *= s.scale
                key = (s.weight, s.neuron)
                if key in merged:  # damped again: the row's total factor, the first push seen
                    merged[key].scale *= s.scale
                else:
                    merged[key] = s
    else:
        report.residual_max_after = find_sinks(body, emb, mask, ratio)[1]
    report.neurons = sorted(merged.values(), key=lambda s: (s.ffn, s.neuron))
    return report

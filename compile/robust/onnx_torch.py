"""The encoder body's ONNX graph run by torch, node by node, with its initializers as parameters
(needs torch and onnx: the compile extra).

Quantisation-aware training (:mod:`hefsearch.compile.robust.build`) trains the *same graph* that
``compile export`` wrote: only initializer values change, so the trained body has exactly the
ops, topology, names and shapes of ``encoder.onnx``, and the recipe, preflight and runtime stay
valid for it. The interpreter knows the small op set of a torch-exported BERT/XLM-R body and
refuses anything else by name.

Two hooks put the NPU's arithmetic in: ``site(tensor, value)`` after every activation the
simulation quantises (the site list of :mod:`hefsearch.compile.sim.graph`, so training and the
8-bit simulation round the same tensors), ``weight(initializer, value)`` on the right operand
of every dense MatMul. LayerNormalization runs decomposed exactly as the simulation decomposes
it (mean, x - mean, squared deviation, variance, reciprocal std, normalised x, gamma, beta),
its internals named ``npu_sim/ln<i>/...`` as there.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import nn

from hefsearch.embed.precision import classify_onnx_node

from hefsearch.compile.sim.graph import SimBuildError

SiteHook = Callable[[str, torch.Tensor], torch.Tensor]

_ONNX_FLOAT = 1
_CAST = {1: torch.float32, 6: torch.int32, 7: torch.int64, 9: torch.bool, 11: torch.float64}


def _attr(node, name: str, default=None):
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


class OnnxBody(nn.Module):
    """``encoder.onnx`` as a torch module: ``forward(embeddings, attention_mask) -> last_hidden_state``.

    Float initializers are parameters (``params[name]`` via :meth:`param`); :meth:`initializers`
    returns their current values by ONNX name, for writing the trained body back.
    """

    def __init__(self, model):
        super().__init__()
        from onnx import numpy_helper

        g = model.graph
        self.nodes = list(g.node)
        self.output = g.output[0].name
        self.params = nn.ParameterList()
        self.index: dict[str, int] = {}
        self.consts: dict[str, torch.Tensor] = {}
        for init in g.initializer:
            arr = numpy_helper.to_array(init)
            if init.data_type == _ONNX_FLOAT:
                self.index[init.name] = len(self.params)
                self.params.append(nn.Parameter(torch.from_numpy(np.array(arr, dtype=np.float32))))
            else:
                self.consts[init.name] = torch.from_numpy(np.array(arr))
        alias = {n.output[0]: n.input[0] for n in self.nodes if n.op_type == "Identity" and n.input[0] in self.index}
        self.dense: dict[int, str] = {}  # node index -> weight initializer of a dense MatMul
        self.ln_index: dict[int, int] = {}  # node index -> LayerNorm number (as sim_graph counts)
        for k, n in enumerate(self.nodes):
            if n.op_type == "LayerNormalization":
                self.ln_index[k] = len(self.ln_index)
            elif n.op_type in ("MatMul", "Gemm") and classify_onnx_node(n.op_type, n.name) is not None:
                w = alias.get(n.input[1], n.input[1]) if len(n.input) > 1 else None
                if w in self.index and self.params[self.index[w]].ndim == 2:
                    self.dense[k] = w

    def param(self, name: str) -> nn.Parameter:
        return self.params[self.index[name]]

    def initializers(self) -> dict[str, np.ndarray]:
        return {name: self.params[i].detach().cpu().numpy().astype(np.float32) for name, i in self.index.items()}

    def forward(self, embeddings: torch.Tensor, attention_mask: torch.Tensor, *,
                site: SiteHook | None = None, weight: SiteHook | None = None) -> torch.Tensor:
        site = site or (lambda name, v: v)
        env: dict[str, torch.Tensor] = {"": None}
        env["embeddings"] = site("embeddings", embeddings)
        env["attention_mask"] = attention_mask
        for name, i in self.index.items():
            env[name] = self.params[i]
        env.update(self.consts)
        for k, n in enumerate(self.nodes):
            args = [env.get(t) for t in n.input]
            if k in self.ln_index:
                outs = [self._layernorm(n, self.ln_index[k], args, site)]
            else:
                if k in self.dense and weight is not None:
                    args[1] = weight(self.dense[k], args[1])
                outs = self._run(n, args)
            for t, v in zip(n.output, outs):
                env[t] = site(t, v) if v is not None and v.is_floating_point() else v
        return env[self.output]

    @staticmethod
    def _layernorm(n, index: int, args, site: SiteHook) -> torch.Tensor:
        if _attr(n, "axis", -1) != -1:
            raise SimBuildError(f"LayerNorm {n.name} normalises axis {_attr(n, 'axis')}; expected the last axis.")
        eps = float(_attr(n, "epsilon", 1e-5))
        x, gamma = args[0], args[1]
        beta = args[2] if len(args) > 2 else None
        p = f"npu_sim/ln{index}"
        xmu = site(p + "/xmu", x - x.mean(-1, keepdim=True))
        var = site(p + "/var", site(p + "/sq", xmu * xmu).mean(-1, keepdim=True))
        rstd = site(p + "/rstd", 1.0 / torch.sqrt(var + eps))
        y = site(p + "/xhat", xmu * rstd) * gamma
        return y + beta if beta is not None else y

    def _run(self, n, a) -> list:
        op = n.op_type
        if op == "Constant":
            from onnx import numpy_helper

            c = torch.from_numpy(np.array(numpy_helper.to_array(_attr(n, "value"))))
            # float constants join the computation on the body's device; integer ones are
            # shapes and indices, kept on the CPU with the Shape outputs they combine with
            return [c.to(self.params[0].device) if c.is_floating_point() and len(self.params) else c]
        if op in _BINARY:
            return [_BINARY[op](a[0], a[1])]
        if op in _UNARY:
            return [_UNARY[op](a[0])]
        if op == "Softmax":
            return [torch.softmax(a[0], dim=_attr(n, "axis", -1))]
        if op == "Transpose":
            return [a[0].permute(*_attr(n, "perm"))]
        if op == "Reshape":
            shape = [int(v) for v in a[1].tolist()]
            shape = [a[0].shape[i] if v == 0 else v for i, v in enumerate(shape)]
            return [a[0].reshape(shape)]
        if op == "Shape":
            return [torch.tensor(list(a[0].shape), dtype=torch.int64)]
        if op == "Gather":
            return [torch.index_select(a[0], _attr(n, "axis", 0), a[1].reshape(-1).long()).reshape(
                a[0].shape[:_attr(n, "axis", 0)] + a[1].shape + a[0].shape[_attr(n, "axis", 0) + 1:])]
        if op == "Unsqueeze":
            axes = _attr(n, "axes") or a[1].tolist()
            out = a[0]
            for ax in sorted(int(x) % (out.dim() + len(axes)) for x in axes):
                out = out.unsqueeze(ax)
            return [out]
        if op == "Concat":
            return [torch.cat([t.reshape(1) if t.dim() == 0 else t for t in a], dim=_attr(n, "axis"))]
        if op == "Cast":
            return [a[0].to(_CAST[_attr(n, "to")])]
        if op == "Identity":
            return [a[0]]
        if op == "ReduceMean":
            axes = _attr(n, "axes") or (a[1].tolist() if len(a) > 1 and a[1] is not None else None)
            return [a[0].mean(dim=tuple(axes), keepdim=bool(_attr(n, "keepdims", 1)))]
        if op == "Pow":
            return [torch.pow(a[0], a[1])]
        raise SimBuildError(f"The robust training cannot run op {op} ({n.name}) of encoder.onnx.",
                            "It understands the body written by 'hefsearch compile export' (BERT, XLM-R).")


_BINARY = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div, "MatMul": torch.matmul}
_UNARY = {"Erf": torch.erf, "Sqrt": torch.sqrt, "Tanh": torch.tanh, "Neg": torch.neg}

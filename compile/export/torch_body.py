"""The encoder body as a torch module, cut after the embedding sum (needs the compile extra).

Inputs: ``embeddings`` [N,S,H], the word + position + token-type sum *before* the embedding
LayerNorm, and ``attention_mask`` [N,S] (0/1). Output: ``last_hidden_state`` [N,S,H].

The mask becomes an additive bias of ``mask_value`` (default -50) on padded keys. That is
enough to zero their softmax weight in FP32 (exp(-50) ~ 2e-22) while staying small enough
that an 8-bit score tensor on an NPU keeps its resolution; the dtype minimum that
transformers uses would swamp it.

Written with the exporter PyTorch keeps (``torch.onnx.export(dynamo=True)``, which needs
``onnxscript``), then tidied so the graph is the one the compile recipe relies on
(:func:`tidy_exported`): nodes named by the module they come from as the TorchScript exporter
named them (``/encoder/layer.0/attention/self/query/MatMul``: the NPU simulation, the robust
body and the HEF model script find their site groups by these names), opset 17 and IR version 8
(what the DFC's ONNX reader takes), and none of the exporter's per-node metadata (the source
paths of the machine that exported it). The ops, the inputs and outputs (the DFC's start and end
nodes) and the mask path (Cast, Unsqueeze, Sub, Mul into every score Add) are those of the
TorchScript export; the bundle's parity check is unchanged. docs/compiling.md.
"""

from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager

import torch
from torch import nn

DEFAULT_MASK_VALUE = -50.0


class EncoderBody(nn.Module):
    def __init__(self, model: nn.Module, mask_value: float = DEFAULT_MASK_VALUE):
        super().__init__()
        self.layer_norm = model.embeddings.LayerNorm
        self.encoder = model.encoder
        self.mask_value = float(mask_value)

    def forward(self, embeddings: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.layer_norm(embeddings)
        m = attention_mask.to(hidden.dtype)[:, None, None, :]
        bias = (1.0 - m) * self.mask_value
        return self.encoder(hidden, attention_mask=bias).last_hidden_state


#: the opset and IR version of the body: what the TorchScript export wrote and the DFC reads
OPSET, IR_VERSION = 17, 8
#: the exporter's own opset (it writes no lower); the body is converted down to OPSET
EXPORTER_OPSET = 18
#: the axis names of the inputs and output, as the bundle's manifest describes them
AXES = ("batch", "sequence")


def export_body_onnx(model: nn.Module, path, hidden: int, *, mask_value: float = DEFAULT_MASK_VALUE,
                     opset: int = OPSET) -> None:
    """Write the body to ONNX with dynamic batch and sequence axes (:func:`tidy_exported`)."""
    import onnx

    body = EncoderBody(model, mask_value=mask_value).eval()
    emb, mask = torch.randn(2, 8, hidden), torch.ones(2, 8, dtype=torch.int64)
    dyn = torch.export.Dim.DYNAMIC
    with torch.no_grad(), _quiet_exporter():
        program = torch.onnx.export(
            body, (emb, mask), input_names=["embeddings", "attention_mask"],
            output_names=["last_hidden_state"], dynamic_shapes=({0: dyn, 1: dyn}, {0: dyn, 1: dyn}),
            opset_version=EXPORTER_OPSET, dynamo=True, optimize=True, verbose=False)
    onnx.save(tidy_exported(program.model_proto, opset), str(path))


def tidy_exported(proto, opset: int = OPSET):
    """The exported ``proto`` as the compile recipe reads it: node names from each node's module
    scope (``/encoder/layer.0/attention/self/MatMul_1``, numbered per module and op in graph order
    as the TorchScript exporter numbered them), the per-node metadata dropped, the batch and
    sequence axes named, the batch and sequence sizes read from the embeddings (so the mask
    feeds only its path to the score Adds, where the DFC variant cuts it), converted to
    ``opset`` and IR version :data:`IR_VERSION`."""
    import onnx
    from onnx import version_converter

    _shapes_from_embeddings(proto)
    _one_axis_unsqueezes(proto)
    seen: dict[str, int] = {}
    for node in proto.graph.node:
        base = f"{_module_path(node)}/{node.op_type}"
        k = seen.get(base, 0)
        seen[base] = k + 1
        node.name = base if k == 0 else f"{base}_{k}"
        del node.metadata_props[:]
    _name_tensors(proto)
    _name_axes(proto)
    _drop_unused_initializers(proto)
    if opset != EXPORTER_OPSET:
        proto = version_converter.convert_version(proto, opset)
    proto.ir_version = IR_VERSION
    onnx.checker.check_model(proto)
    return proto


def _shapes_from_embeddings(proto) -> None:
    """Each ``Shape`` that reads one size (``start``/``end`` attributes, opset 15) becomes the
    TorchScript form, ``Shape`` -> ``Gather`` -> ``Unsqueeze`` (no op form the TorchScript
    export did not have), and one of the mask's sizes (batch or sequence: the embeddings' too)
    is read from the embeddings, so the mask feeds only its path to the score Adds."""
    from onnx import TensorProto, helper

    nodes = []
    for node in proto.graph.node:
        span = {a.name: a.i for a in node.attribute}
        start = span.get("start", 0)
        if node.op_type != "Shape" or span.get("end") != start + 1 or start < 0:
            nodes.append(node)
            continue
        source = node.input[0]
        if source == "attention_mask" and start in (0, 1):
            source = "embeddings"
        out = node.output[0]
        index, axes = f"{out}/index", f"{out}/axes"
        proto.graph.initializer.extend([helper.make_tensor(index, TensorProto.INT64, [], [start]),
                                        helper.make_tensor(axes, TensorProto.INT64, [1], [0])])
        nodes += [helper.make_node("Shape", [source], [f"{out}/shape"]),
                  helper.make_node("Gather", [f"{out}/shape", index], [f"{out}/size"], axis=0),
                  helper.make_node("Unsqueeze", [f"{out}/size", axes], [out])]
    del proto.graph.node[:]
    proto.graph.node.extend(nodes)


def _one_axis_unsqueezes(proto) -> None:
    """An ``Unsqueeze`` of several constant axes (the new exporter's mask ``[N,S] -> [N,1,1,S]``)
    becomes one ``Unsqueeze`` per axis, the TorchScript form: ONNX Runtime's attention fusion
    (:mod:`hefsearch.embed.attention_fusion`, the CPU's fused copy) finds the mask by the path
    Mul <- Sub <- Unsqueeze <- Unsqueeze and fuses nothing without it."""
    from onnx import TensorProto, helper, numpy_helper

    consts = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    nodes = []
    for node in proto.graph.node:
        axes = consts.get(node.input[1]) if node.op_type == "Unsqueeze" and len(node.input) == 2 else None
        if axes is None or axes.size < 2 or (axes < 0).any():
            nodes.append(node)
            continue
        source = node.input[0]
        for n, axis in enumerate(sorted(int(a) for a in axes.reshape(-1))):
            name = f"{node.output[0]}/axis{axis}"
            proto.graph.initializer.append(helper.make_tensor(f"{name}/axes", TensorProto.INT64, [1], [axis]))
            out = node.output[0] if n == axes.size - 1 else name
            nodes.append(helper.make_node("Unsqueeze", [source, f"{name}/axes"], [out]))
            source = out
    del proto.graph.node[:]
    proto.graph.node.extend(nodes)


def _drop_unused_initializers(proto) -> None:
    """Initializers no node reads (the axes a split ``Unsqueeze`` no longer uses): ONNX Runtime
    warns about each one every time a session opens the body."""
    used = {name for node in proto.graph.node for name in node.input}
    used |= {o.name for o in proto.graph.output}
    keep = [t for t in proto.graph.initializer if t.name in used]
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(keep)


def _module_path(node) -> str:
    """'/encoder/layer.0/attention/self/query' from the node's ``pkg.torch.onnx.name_scopes``
    (the modules it was traced in, outermost first; the last entry is the op itself)."""
    import ast

    meta = {p.key: p.value for p in node.metadata_props}
    try:
        scopes = ast.literal_eval(meta.get("pkg.torch.onnx.name_scopes", "[]"))
    except (ValueError, SyntaxError):
        scopes = []
    parts, parent = [], ""
    for scope in [s for s in scopes[:-1] if s and not s.startswith("_")]:
        parts.append(scope[len(parent) + 1:] if parent and scope.startswith(parent + ".") else scope)
        parent = scope
    return "".join("/" + p for p in parts)


def _name_tensors(proto) -> None:
    """Every tensor a node makes named ``<node name>_output_<i>``, as the TorchScript export
    named them (``/encoder/layer.0/output/Add_output_0``: the robust body reads activations by
    these names); the graph's inputs, outputs and initializers keep theirs."""
    g = proto.graph
    keep = {v.name for v in [*g.input, *g.output]} | {t.name for t in g.initializer}
    rename = {}
    for node in g.node:
        for i, out in enumerate(node.output):
            if out and out not in keep:
                rename[out] = f"{node.name}_output_{i}"
    for node in g.node:
        node.input[:] = [rename.get(t, t) for t in node.input]
        node.output[:] = [rename.get(t, t) for t in node.output]
    for vi in g.value_info:
        vi.name = rename.get(vi.name, vi.name)


def _name_axes(proto) -> None:
    """The exporter's symbolic dims (s0, s1...) of the embeddings input renamed to AXES, everywhere."""
    first = proto.graph.input[0].type.tensor_type.shape.dim
    rename = {d.dim_param: name for d, name in zip(first, AXES) if d.dim_param}
    for vi in [*proto.graph.input, *proto.graph.output, *proto.graph.value_info]:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param in rename:
                d.dim_param = rename[d.dim_param]


@contextmanager
def _quiet_exporter():
    """The exporter's progress lines and PyTorch's notes about its own internals kept off the
    user's terminal (and the test log): warnings of torch.onnx's loggers (e.g. "torchvision is
    not installed") and the FutureWarning PyTorch's export raises about its own pytree API."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning)
            yield
    finally:
        logger.setLevel(level)

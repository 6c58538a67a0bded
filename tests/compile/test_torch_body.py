"""compile/export/torch_body.py: the body is written by the exporter PyTorch keeps
(``dynamo=True``), with no deprecation warning, and reads as the TorchScript export's did where
the compile recipe reads it: opset 17 / IR 8, the inputs and outputs (the DFC's start and end
nodes), every site group of every layer under the names the NPU simulation, the robust body and
the HEF model script look for, and the mask path (Cast, Unsqueeze, Unsqueeze, Sub, Mul into the score Adds)
that the DFC variant cuts. No path of the exporting machine is written into it."""

from __future__ import annotations

import json
import warnings
from collections import Counter

import onnx

from hefsearch.compile.export.bundle import export_bundle
from hefsearch.embed.bundle import Bundle
from hefsearch.embed.precision import classify_onnx_node

#: site-group nodes per layer in the TorchScript export of a BERT block (MiniLM: 6 layers, 157 nodes)
PER_LAYER = {"qkv": 6, "attention_scores": 3, "attention_context": 1, "softmax": 1, "attention_out": 2,
             "residual_add": 2, "ffn_in": 2, "ffn_act": 5, "ffn_out": 2}


def test_the_body_is_exported_without_deprecation_as_the_recipe_reads_it(tiny_bert_model, tmp_path):
    from hefsearch.compile.hef.dfc_onnx import make_dfc_onnx, verify_dfc_onnx

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        export_bundle(str(tiny_bert_model), tmp_path / "b")
    noisy = [f"{w.category.__name__}: {w.message}" for w in caught
             if issubclass(w.category, (DeprecationWarning, FutureWarning))]
    assert not noisy, noisy

    path = tmp_path / "b" / "encoder.onnx"
    model = onnx.load(str(path))
    assert model.ir_version == 8 and [(o.domain, o.version) for o in model.opset_import] == [("", 17)]
    g = model.graph
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in [*g.input, *g.output]}
    hidden = json.loads((tmp_path / "b" / "manifest.json").read_text())["model"]["hidden"]
    assert dims == {"embeddings": ["batch", "sequence", hidden], "attention_mask": ["batch", "sequence"],
                    "last_hidden_state": ["batch", "sequence", hidden]}

    layers = json.loads((tmp_path / "b" / "manifest.json").read_text())["model"]["layers"]
    groups = Counter(filter(None, (classify_onnx_node(n.op_type, n.name) for n in g.node)))
    assert groups == Counter({**{k: v * layers for k, v in PER_LAYER.items()}, "layernorm": 2 * layers + 1})
    assert "/encoder/layer.0/attention/self/MatMul_1" in {n.name for n in g.node}  # the context MatMul
    # tensors named by the node that makes them (the robust body reads activations by name)
    assert "/encoder/layer.0/output/Add_output_0" in {t for n in g.node for t in n.output}

    users = [n.op_type for n in g.node if "attention_mask" in n.input]
    assert users == ["Cast"]  # the mask feeds its path only (sizes are read from the embeddings)
    made_by = {t: n for n in g.node for t in n.output}
    step, chain = made_by[next(n for n in g.node if n.op_type == "Sub").input[1]], []
    while step.op_type != "Cast":  # one Unsqueeze per axis: the path ONNX Runtime's fusion finds
        chain.append(step.op_type)
        step = made_by[step.input[0]]
    assert chain == ["Unsqueeze", "Unsqueeze"]
    read = {name for n in g.node for name in n.input}
    assert [t.name for t in g.initializer if t.name not in read] == []  # ONNX Runtime warns of each
    assert not any(n.metadata_props for n in g.node)
    assert b"/compile/export/" not in path.read_bytes()  # the exporter's stack traces are dropped

    bundle = Bundle.open(tmp_path / "b")
    for mode in ("keys01", "additive"):
        dfc = make_dfc_onnx(bundle, tmp_path / f"dfc-{mode}.onnx", 32, mode)
        assert verify_dfc_onnx(bundle, dfc) <= 1e-4
        ops = {n.op_type for n in onnx.load(str(dfc.path)).graph.node}
        assert ops <= {"Add", "Concat", "Div", "Erf", "Gather", "LayerNormalization", "MatMul", "Mul", "Reshape",
                       "Shape", "Softmax", "Transpose", "Unsqueeze", "Constant", "Tanh", "Pow", "Sqrt"}

"""Precision profiles (embed/precision.py), the DFC-facing ONNX variant (compile/hef/dfc_onnx.py)
and the site mapping the model script relies on."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from hefsearch.embed.bundle import Bundle
from hefsearch.embed.precision import (
    FALLBACK_ORDER,
    PROFILES,
    SITE_GROUPS,
    PrecisionProfileError,
    classify_onnx_node,
    fallback_ladder,
    load_profile,
    profile_from_dict,
)


def test_builtin_profiles_are_what_the_issue_says():
    a8, balanced = PROFILES["a8"], PROFILES["balanced"]
    assert a8.is_all_8bit and set(a8.bits) == set(SITE_GROUPS)
    assert set(balanced.sixteen_bit) == {"residual_add", "layernorm", "ffn_out"}
    assert balanced.mask == a8.mask == "softmax"
    assert not balanced.attention_sixteen_bit
    assert load_profile(None) is balanced and load_profile("a8") is a8


def test_profile_files_nested_flat_and_toml(tmp_path):
    nested = tmp_path / "mine.json"
    nested.write_text(json.dumps({"name": "mine", "mask": "additive", "bits": {"residual_add": 16, "softmax": 16}}))
    p = load_profile(nested)
    assert p.name == "mine" and p.mask == "additive" and p.source == str(nested)
    assert p.sixteen_bit == ("softmax", "residual_add") and p.attention_sixteen_bit == ("softmax",)
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"base": "balanced", "ffn_out": 8}))
    q = load_profile(flat)
    assert q.name == "flat" and set(q.sixteen_bit) == {"residual_add", "layernorm"}
    if sys.version_info >= (3, 11):
        t = tmp_path / "t.toml"
        t.write_text('name = "t"\n[bits]\nlayernorm = 16\n')
        assert load_profile(t).sixteen_bit == ("layernorm",)
    # the manifest form reads back to the same profile
    assert profile_from_dict(p.to_dict()).same_bits(p)


@pytest.mark.parametrize("data, words", [
    ({"bits": {"residual": 16}}, "Unknown site group 'residual'"),
    ({"bits": {"residual_add": 12}}, "12 bits"),
    ({"mask": "multiply", "bits": {}}, "Mask mode 'multiply'"),
    ({"bits": {"layernorm": "16"}}, "must be 8 or 16"),
    ({"bits": {}, "colour": "red"}, "Unknown keys colour"),
])
def test_bad_profiles_are_explained(tmp_path, data, words):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data))
    with pytest.raises(PrecisionProfileError) as e:
        load_profile(f)
    assert words in e.value.message


def test_unknown_profile_name_lists_the_choices():
    with pytest.raises(PrecisionProfileError) as e:
        load_profile("a16")
    assert "a8 or balanced" in e.value.hint


def test_fallback_ladder_drops_ffn_then_layernorm_then_residual_then_a8():
    ladder = fallback_ladder(PROFILES["balanced"])
    assert [set(p.sixteen_bit) for p in ladder] == [
        {"residual_add", "layernorm", "ffn_out"}, {"residual_add", "layernorm"}, {"residual_add"}, set()]
    assert ladder[-1].name == "a8"
    assert FALLBACK_ORDER == ("ffn_out", "layernorm", "residual_add")
    # a custom profile keeps its extra 16-bit groups until plain a8
    custom = profile_from_dict({"bits": {"softmax": 16, "ffn_out": 16}}, name="c")
    steps = fallback_ladder(custom)
    assert [p.sixteen_bit for p in steps] == [("softmax", "ffn_out"), ("softmax",), ()]
    assert fallback_ladder(PROFILES["a8"]) == [PROFILES["a8"]]


def test_precision_module_imports_no_torch_onnx_or_sdk():
    code = ("import sys, hefsearch.embed.precision as p; p.fallback_ladder(p.PROFILES['balanced']); "
            "bad = [m for m in ('torch', 'onnx', 'hailo_sdk_client', 'hailo_platform', 'transformers') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_compute_node_of_an_exported_body_has_its_group(tiny_bert_bundle):
    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(tiny_bert_bundle / "encoder.onnx"))
    groups = Counter(classify_onnx_node(n.op_type, n.name) for n in model.graph.node)
    layers = 2
    assert groups["residual_add"] == 2 * layers
    assert groups["layernorm"] == 2 * layers + 1  # + the embedding LayerNorm
    assert groups["ffn_out"] == 2 * layers  # MatMul + bias Add
    assert groups["softmax"] == layers and groups["attention_context"] == layers
    assert groups["qkv"] == 6 * layers and groups["attention_out"] == 2 * layers and groups["ffn_in"] == 2 * layers
    assert groups["attention_scores"] == 3 * layers  # QK^T, scale, mask add
    unclassified = {n.op_type for n in model.graph.node if classify_onnx_node(n.op_type, n.name) is None}
    assert unclassified <= {"Shape", "Gather", "Unsqueeze", "Concat", "Reshape", "Transpose", "Constant",
                            "Identity", "Cast", "Sub", "Mul"}  # shape plumbing and mask preparation


@pytest.mark.parametrize("mode", ["softmax", "additive"])
@pytest.mark.parametrize("which", ["tiny_bert_bundle", "tiny_xlmr_bundle"])
def test_dfc_onnx_variant_equals_encoder_onnx(which, mode, request, tmp_path):
    """The DFC-facing body starts where the zoo's recipes do: its mask input is the additive bias
    fed straight into the score Adds, score-shaped [N,heads,S,S] for the softmax mode (MiniLM's
    masked_fill) or [N,1,1,S] for the additive mode (BERT); no mask preparation is left."""
    pytest.importorskip("onnx")
    import onnx

    from hefsearch.compile.hef.dfc_onnx import EMBEDDINGS, MASK, make_dfc_onnx, sample_inputs, verify_dfc_onnx
    from hefsearch.embed.backends.cpu import make_session

    bundle = Bundle.open(request.getfixturevalue(which))
    heads = bundle.model["heads"]
    dfc = make_dfc_onnx(bundle, tmp_path / "dfc.onnx", 32, mode)
    assert verify_dfc_onnx(bundle, dfc) <= 1e-4
    g = onnx.load(str(dfc.path)).graph
    dims = {i.name: [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim] for i in g.input}
    mask_dims = [heads, 32, 32] if mode == "softmax" else [1, 1, 32]
    assert dims == {EMBEDDINGS: ["batch", 32, bundle.hidden], MASK: ["batch", *mask_dims]}
    assert all(i.type.tensor_type.elem_type == onnx.TensorProto.FLOAT for i in g.input)
    assert dfc.input_shapes == {EMBEDDINGS: [1, 32, bundle.hidden], MASK: [1, *mask_dims]}
    assert not any(n.op_type in ("Cast", "Sub") for n in g.node)
    # the mask input feeds the score Adds directly, one per layer, each read by a Softmax
    users = [n for n in g.node if MASK in n.input]
    assert len(users) == bundle.model["layers"] and all(n.op_type == "Add" for n in users)
    assert all(any(w.op_type == "Softmax" and u.output[0] in w.input for w in g.node) for u in users)
    # the mask really is used: masking a real token changes the output
    e, m = sample_inputs(bundle, 32, ["Wo ist der nächste Bahnhof?"])
    sess = make_session(str(dfc.path), 1)
    base = sess.run(None, {EMBEDDINGS: e, MASK: dfc.mask_feed(m)})[0]
    m2 = m.copy()
    m2[0, 1] = 0
    assert np.abs(sess.run(None, {EMBEDDINGS: e, MASK: dfc.mask_feed(m2)})[0] - base).max() > 1e-3
    # the additive value is the bundle's moderate one, never the dtype minimum
    assert set(np.unique(dfc.mask_feed(m))) == {0.0, np.float32(bundle.mask_value)}
    assert str(bundle.mask_value) in onnx.load(str(dfc.path)).doc_string


def test_model_script_follows_the_profile(fake_dfc, tiny_bert_bundle, tmp_path):
    from hailo_sdk_client import ClientRunner
    from hailo_sdk_client.exposed_definitions import Dims

    from hefsearch.compile.hef.build import input_formats
    from hefsearch.compile.hef.dfc_onnx import make_dfc_onnx
    from hefsearch.compile.hef.model_script import (MATMUL_CORRECTION, ScriptSettings, build_model_script, site_layers,
                                                     sixteen_bit_layers)

    bundle = Bundle.open(tiny_bert_bundle)
    dfc = make_dfc_onnx(bundle, tmp_path / "dfc.onnx", 64)
    runner = ClientRunner(hw_arch="hailo10h")
    runner.translate_onnx_model(str(dfc.path), "net", end_node_names=["last_hidden_state"],
                                net_input_shapes=dfc.input_shapes, net_input_format=input_formats(Dims, "softmax"))
    hn = runner.get_hn_dict()
    sites = site_layers(hn)
    origin = {n.split("/", 1)[1]: layer["original_names"] for n, layer in hn["layers"].items()}
    assert len(sites["residual_add"]) == 4
    assert all(origin[name][0].endswith(("/output/Add",)) and "dense" not in origin[name][0]
               for name in sites["residual_add"])
    assert all("/output/dense/" in origin[name][0] and "attention" not in origin[name][0]
               for name in sites["ffn_out"]) and len(sites["ffn_out"]) == 2
    assert sites["layernorm"] == [f"layer_normalization{i}" for i in range(1, 6)]

    a8 = build_model_script(PROFILES["a8"], hn, ScriptSettings(calibset_size=96, batch_size=8))
    assert "quantization_param" not in a8 and MATMUL_CORRECTION in a8.splitlines()
    balanced = build_model_script(PROFILES["balanced"], hn, ScriptSettings(
        calibset_size=96, batch_size=8, optimization_level=2, compression_level=1,
        extra_lines=["performance_param(compiler_optimization_level=max)"]))
    lines = [ln for ln in balanced.splitlines() if not ln.startswith("#")]
    assert lines[0] == "set_input_mask_to_softmax()" and lines.count("set_input_mask_to_softmax()") == 1
    for expected in ("model_optimization_config(calibration, batch_size=8, calibset_size=96)",
                     "pre_quantization_optimization(equalization, policy=enabled)",
                     "pre_quantization_optimization(ew_add_fusing, policy=disabled)",
                     "model_optimization_flavor(optimization_level=2, compression_level=1)",
                     "pre_quantization_optimization(matmul_correction, layers={matmul*}, "
                     "correction_type=zp_comp_block)",
                     "model_optimization_config(negative_exponent, layers={*}, rank=0)"):
        assert expected in lines
    assert lines[-1] == "performance_param(compiler_optimization_level=max)"
    assert sorted(sixteen_bit_layers(balanced)) == sorted(sites["residual_add"] + sites["layernorm"] + sites["ffn_out"])
    # no 16-bit layer is on the attention path
    attention = {n.split("/", 1)[1] for n, layer in hn["layers"].items() if layer.get("attention")}
    assert not attention & set(sixteen_bit_layers(balanced))
    # the fake DFC accepts the script (every named layer exists, the mask feeds the score adds)
    runner.load_model_script(balanced)
    additive = build_model_script(profile_from_dict({"mask": "additive", "bits": {}}), hn, ScriptSettings(calibset_size=4))
    assert "set_input_mask_to_softmax" not in additive and MATMUL_CORRECTION in additive.splitlines()


def test_dfc_onnx_variant_of_real_minilm_is_exact(minilm_bundle, tmp_path):
    """Real weights (all-MiniLM-L6-v2): the DFC-facing body gives the same hidden states."""
    pytest.importorskip("onnx")
    from hefsearch.compile.hef.dfc_onnx import make_dfc_onnx, verify_dfc_onnx
    from hefsearch.embed.samples import VERIFY_TEXTS

    bundle = Bundle.open(minilm_bundle)
    dfc = make_dfc_onnx(bundle, tmp_path / "dfc.onnx", 128)
    assert verify_dfc_onnx(bundle, dfc, VERIFY_TEXTS[:8] + VERIFY_TEXTS[-2:]) <= 1e-5

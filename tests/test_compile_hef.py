"""``hefsearch compile hef``: the real driver (compile/dfc.py) against the contract fake of
``hailo_sdk_client`` (tests/fakes/hailo_sdk_client).

Everything here is verified against that fake only, never against Hailo's Dataflow Compiler:
the fake reproduces the public report's behaviour (3-D inputs lifted to 4-D, IndexError on 3-D
calibration, BackendAllocatorException on 16-bit attention layers), not the real SDK.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from hefsearch.compile.calib import load_calibration
from hefsearch.compile.dfc import AllocatorCrash, DfcUnavailable, HefOptions, build_hef, is_allocator_crash
from hefsearch.compile.preflight import CalibrationMismatch
from hefsearch.embed.bundle import Bundle
from hefsearch.cli.main import main


def _build(bundle, **kw):
    lines: list[str] = []
    kw.setdefault("hw_arch", "hailo10h")
    result = build_hef(bundle, HefOptions(**kw), say=lines.append)
    return result, lines


# -- the fake behaves as the report says -------------------------------------------------------
def test_fake_lifts_3d_nwc_and_rejects_a_4d_format_for_it(fake_dfc, tiny_bert_bundle, tmp_path):
    """Contract of the fake itself (verified against the fake only): the 3-D embeddings are lifted
    NWC -> [-1,1,S,H]; the softmax body's score-shaped mask [N,heads,S,S] parses NGWC to
    [-1,1,S,heads*S] (the zoo's MiniLM); the additive body's [N,1,1,S] with no format (NCHW) to
    [-1,1,S,1] (the zoo's BERT)."""
    from hailo_sdk_client import ClientRunner
    from hailo_sdk_client.exposed_definitions import Dims

    from hefsearch.compile.dfc_onnx import make_dfc_onnx

    bundle = Bundle.open(tiny_bert_bundle)
    heads = bundle.model["heads"]
    dfc = make_dfc_onnx(bundle, tmp_path / "dfc.onnx", 64)
    assert dfc.input_shapes["attention_mask"] == [1, heads, 64, 64]
    nhwc = [Dims.BATCH, Dims.HEIGHT, Dims.WIDTH, Dims.CHANNELS]
    nwc = [Dims.BATCH, Dims.WIDTH, Dims.CHANNELS]
    ngwc = [Dims.BATCH, Dims.GROUPS, Dims.WIDTH, Dims.CHANNELS]
    runner = ClientRunner(hw_arch="hailo10h")
    with pytest.raises(Exception, match="Input format .* doesn't match its rank"):
        runner.translate_onnx_model(str(dfc.path), "net", net_input_shapes=dfc.input_shapes,
                                    net_input_format={"embeddings": nhwc, "attention_mask": ngwc})
    runner.translate_onnx_model(str(dfc.path), "net", end_node_names=["last_hidden_state"],
                                net_input_shapes=dfc.input_shapes,
                                net_input_format={"embeddings": nwc, "attention_mask": ngwc})
    layers = runner.get_hn_dict()["layers"]
    assert layers["net/input_layer1"]["input_shapes"] == [[-1, 1, 64, 32]]
    assert layers["net/input_layer2"]["input_shapes"] == [[-1, 1, 64, heads * 64]]
    with pytest.raises(IndexError):
        runner.optimize({"net/input_layer1": np.zeros((4, 64, 32), np.float32),
                         "net/input_layer2": np.ones((4, 1, 64, heads * 64), np.float32)})

    additive = make_dfc_onnx(bundle, tmp_path / "dfc_add.onnx", 64, "additive")
    assert additive.input_shapes["attention_mask"] == [1, 1, 1, 64]
    runner = ClientRunner(hw_arch="hailo10h")
    runner.translate_onnx_model(str(additive.path), "net", end_node_names=["last_hidden_state"],
                                net_input_shapes=additive.input_shapes, net_input_format={"embeddings": nwc})
    layers = runner.get_hn_dict()["layers"]
    assert layers["net/input_layer1"]["input_shapes"] == [[-1, 1, 64, 32]]
    assert layers["net/input_layer2"]["input_shapes"] == [[-1, 1, 64, 1]]


def _old_topology_onnx(bundle: Bundle, out, seq: int):
    """The DFC-facing body as hefsearch wrote it before following the zoo: a 0/1 mask input
    [N,1,1,S] that goes through Sub (1 - m) and Mul (* mask_value) before the score Adds."""
    import onnx
    from onnx import helper, numpy_helper

    from hefsearch.compile.dfc_onnx import MASK, make_dfc_onnx

    dfc = make_dfc_onnx(bundle, out.with_name("additive.onnx"), seq, "additive")
    model = onnx.load(str(dfc.path))
    g = model.graph
    for node in g.node:
        for i, t in enumerate(node.input):
            if t == MASK:
                node.input[i] = "old_mask_bias"
    g.initializer.extend([numpy_helper.from_array(np.array(1.0, np.float32), "old_one"),
                          numpy_helper.from_array(np.array(bundle.mask_value, np.float32), "old_mask_value")])
    g.node.insert(0, helper.make_node("Sub", ["old_one", MASK], ["old_mask_inv"], name="/mask/Sub"))
    g.node.insert(1, helper.make_node("Mul", ["old_mask_inv", "old_mask_value"], ["old_mask_bias"],
                                      name="/mask/Mul"))
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    return out


def test_fake_refuses_the_softmax_command_on_the_old_mask_topology(fake_dfc, tiny_bert_bundle, tmp_path):
    """set_input_mask_to_softmax() needs the mask input to feed the score adds directly (the zoo's
    MiniLM); the pre-zoo body (0/1 mask through Sub/Mul) is refused when the command is loaded,
    and probe_mask_command turns that into advice. The zoo-shaped body passes the same probe."""
    from hailo_sdk_client import ClientRunner
    from hailo_sdk_client.exposed_definitions import Dims

    from hefsearch.compile.dfc import CompileError, input_formats, probe_mask_command
    from hefsearch.compile.dfc_onnx import make_dfc_onnx, sample_inputs
    from hefsearch.embed.backends.cpu import make_session

    bundle = Bundle.open(tiny_bert_bundle)
    old = _old_topology_onnx(bundle, tmp_path / "old.onnx", 64)
    # it is the old body: 0/1 in, the same hidden states as encoder.onnx
    e, m = sample_inputs(bundle, 64, ["Wo ist der nächste Bahnhof?", "a"])
    ref = make_session(tiny_bert_bundle / "encoder.onnx", 1).run(None, {"embeddings": e, "attention_mask": m})[0]
    got = make_session(old, 1).run(None, {"embeddings": e,
                                          "attention_mask": m[:, None, None, :].astype(np.float32)})[0]
    assert np.abs(ref - got).max() < 1e-4

    runner = ClientRunner(hw_arch="hailo10h")
    runner.translate_onnx_model(str(old), "net", end_node_names=["last_hidden_state"],
                                net_input_shapes={"embeddings": [1, 64, bundle.hidden],
                                                  "attention_mask": [1, 1, 1, 64]},
                                net_input_format={"embeddings": [Dims.BATCH, Dims.WIDTH, Dims.CHANNELS],
                                                  "attention_mask": [Dims.BATCH, Dims.HEIGHT, Dims.WIDTH,
                                                                     Dims.CHANNELS]})
    with pytest.raises(Exception, match="must feed the attention-score adds directly"):
        runner.load_model_script("set_input_mask_to_softmax()\n")
    with pytest.raises(CompileError) as err:
        probe_mask_command(runner)
    assert "set_input_mask_to_softmax()" in err.value.message and "ew_sub" in err.value.message
    assert "--mask additive" in err.value.hint

    new = make_dfc_onnx(bundle, tmp_path / "new.onnx", 64, "softmax")
    runner = ClientRunner(hw_arch="hailo10h")
    runner.translate_onnx_model(str(new.path), "net", end_node_names=["last_hidden_state"],
                                net_input_shapes=new.input_shapes, net_input_format=input_formats(Dims, "softmax"))
    probe_mask_command(runner)  # accepted


# -- preflight ----------------------------------------------------------------------------------
def test_preflight_stops_3d_calibration_before_optimize(fake_dfc, calib_bundle, tmp_path):
    bundle = Bundle.open(calib_bundle)
    emb, mask, _ = load_calibration(bundle, 64)
    flat = tmp_path / "calib3d.npz"
    np.savez(flat, embeddings=emb[:, 0], mask=mask)  # [N,S,H]: what the report fed first
    with pytest.raises(CalibrationMismatch) as e:
        _build(calib_bundle, calib=flat)
    msg = e.value.message
    assert "hefsearch_encoder/input_layer1" in msg and "(embeddings)" in msg
    assert f"(96, 64, {bundle.hidden}) (rank 3)" in msg and f"(96, 1, 64, {bundle.hidden}) (rank 4)" in msg
    assert "IndexError" in msg
    assert "hefsearch compile calib" in e.value.hint and f"(N, 1, 64, {bundle.hidden})" in e.value.hint
    assert "translate_onnx_model" in fake_dfc.CALLS and "optimize" not in fake_dfc.CALLS
    # the CLI shows it as a plain error, no traceback
    res = CliRunner().invoke(main, ["compile", "hef", str(calib_bundle), "--hw-arch", "hailo10h",
                                    "--calib", str(flat)])
    assert res.exit_code == 2 and "Error: Calibration for input layer" in res.stderr
    assert "Traceback" not in res.output


@pytest.mark.parametrize("edit, words", [
    (lambda e, m: (e.astype(np.float64), m), "float64"),
    (lambda e, m: (np.where(np.arange(e.size).reshape(e.shape) == 5, np.nan, e).astype(np.float32), m), "NaN"),
    (lambda e, m: (e, m * -50.0), "other than 0 and 1"),
    (lambda e, m: (e, m[:, :, :, :32]), "expects (96, 1, 64, 256)"),  # the score layout: 4 heads x 64
    (lambda e, m: (e[:10], m), "different row counts"),
])
def test_preflight_catches_dtype_values_and_shapes(fake_dfc, calib_bundle, tmp_path, edit, words):
    bundle = Bundle.open(calib_bundle)
    emb, mask, _ = load_calibration(bundle, 64)
    e, m = edit(emb, mask)
    f = tmp_path / "bad.npz"
    np.savez(f, embeddings=e, mask=m)
    with pytest.raises(CalibrationMismatch) as err:
        _build(calib_bundle, calib=f)
    assert words in err.value.message
    assert "optimize" not in fake_dfc.CALLS


# -- the 4-D path builds a HEF ------------------------------------------------------------------
def test_additive_preflight_wants_0_or_the_mask_value(fake_dfc, calib_bundle, tmp_path):
    """In the additive mode the stored 0/1 mask becomes the bias (0 / mask_value); anything that
    does not is refused before optimize()."""
    bundle = Bundle.open(calib_bundle)
    emb, mask, _ = load_calibration(bundle, 64)
    f = tmp_path / "bad.npz"
    np.savez(f, embeddings=emb, mask=mask * 0.5)
    with pytest.raises(CalibrationMismatch) as err:
        _build(calib_bundle, calib=f, mask="additive")
    assert f"other than 0 and {bundle.mask_value:g}" in err.value.message
    assert "optimize" not in fake_dfc.CALLS


# -- the 4-D path builds a HEF ------------------------------------------------------------------
def test_4d_calibration_builds_a_hef_and_a_correct_manifest(fake_dfc, fake_hailo, calib_bundle):
    from hefsearch.embed.backends.hailo import read_hef

    result, lines = _build(calib_bundle, precision="balanced")
    bundle = Bundle.open(calib_bundle)
    assert not bundle.verify()
    heads = bundle.model["heads"]
    hef = calib_bundle / "encoder.hailo10h.hef"
    assert result.hef == hef and hef.is_file()
    doc = json.loads(hef.read_bytes())
    assert doc["hw_arch"] == "hailo10h" and doc["seq_len"] == 64
    (entry,) = bundle.encoder_entries("hef")
    assert (entry.file, entry.seq_len, entry.hw_arch) == ("encoder.hailo10h.hef", 64, "hailo10h")
    x = entry.extra
    assert x["precision"]["name"] == "balanced" and "precision_requested" not in x
    assert set(x["precision"]["sixteen_bit"]) == {"residual_add", "layernorm", "ffn_out"}
    assert x["dfc_version"] == "5.3.0+fake" and x["mask"] == "softmax" and x["mask_value"] == bundle.mask_value
    assert x["mask_input"] == {"layout": "scores", "mode": "softmax", "seq_len": 64, "heads": heads,
                               "mask_value": bundle.mask_value, "values": "0/1", "shape": [1, 64, heads * 64]}
    assert x["calibration"]["sha256"] == bundle.manifest["calibration"]["s64"]["sha256"]
    assert x["calibration"]["rows"] == 96
    # the streams the HEF really has (read with HailoRT): inputs folded by the allocator, the
    # output named after the layer feeding it (the last LayerNorm, decomposed by optimize())
    assert x["streams_from"] == "hef"
    assert x["inputs"] == {
        "embeddings": {"name": "hefsearch_encoder/input_layer1", "shape": [8, 8, bundle.hidden],
                       "order": "NHWC", "type": "UINT8"},
        "attention_mask": {"name": "hefsearch_encoder/input_layer2", "shape": [8, 8, heads * 64],
                           "order": "NHWC", "type": "UINT8"}}
    out_name = "hefsearch_encoder/ew_add2_layer_normalization5"
    assert x["outputs"] == {"last_hidden_state": {
        "names": [out_name], "shape": [1, 64, bundle.hidden],
        "streams": [{"name": out_name, "shape": [1, 64, bundle.hidden], "order": "FCR", "type": "UINT8"}]}}
    streams = read_hef(hef)
    assert [s.name for s in streams.outputs] == streams.sorted_outputs == [out_name]
    # the model script is kept in the bundle and is what the fake compiled with
    script = (calib_bundle / x["model_script"]).read_text()
    assert x["model_script"] in bundle.manifest["files"]
    assert "set_input_mask_to_softmax()" in script and "calibset_size=96" in script
    assert sorted(n.split("/", 1)[1] for n in doc["a16_layers"]) == sorted(
        n.strip() for ln in script.splitlines() if ln.startswith("quantization_param([")
        for n in ln[len("quantization_param(["):ln.index("]")].split(","))
    # the emulator report ran before compile and is recorded
    q = x["quality"]
    assert q["texts"] == len(q["cosine_per_text"]) >= 36 and q["pairs"] >= 6
    assert 0.9 < q["cosine_min"] <= q["cosine_mean"] < 1.0  # the fake's 8-bit rounding shows
    assert q["fp32_vs_onnx_min_cosine"] > 0.9999
    assert 0.0 <= q["top1_quantized"] <= 1.0 and q["similarity_pearson"] > 0.9
    calls = fake_dfc.CALLS
    assert calls.index("infer_context:SDK_QUANTIZED") < calls.index("compile")
    assert calls.index("optimize") < calls.index("infer_context:SDK_FP_OPTIMIZED")  # FP32 with the script applied
    # the softmax command was probed on the parsed network before any optimisation
    assert calls.index("translate_onnx_model") < calls.index("load_model_script") < calls.index("optimize")
    assert any(ln.startswith("Emulator report on") for ln in lines)
    # the build stages stay out of the manifest
    assert not any(f.startswith("build/") for f in bundle.manifest["files"])


def test_other_seq_len_names_the_hef_with_s(fake_dfc, dfc_version, no_hailo, calib_bundle, corpus):
    """Hailo-8L needs DFC 3.x, which has no softmax command: --mask additive. Without HailoRT in
    the DFC's environment the streams come from the compiled network."""
    from hefsearch.compile.calib import build_calibration

    dfc_version("3.33.0+fake")
    build_calibration(calib_bundle, [corpus], n=40, seed=1, seq_len=32)
    result, lines = _build(calib_bundle, seq_len=32, precision="a8", hw_arch="hailo8l", report=False,
                           mask="additive")
    assert result.hef.name == "encoder.hailo8l.s32.hef"
    (entry,) = Bundle.open(calib_bundle).encoder_entries("hef")
    x = entry.extra
    assert entry.seq_len == 32 and x["quality"] is None
    assert x["dfc_version"] == "3.33.0+fake" and x["mask"] == "additive"
    assert x["mask_input"]["layout"] == "keys" and x["mask_input"]["shape"] == [1, 32, 1]
    assert x["streams_from"] == "compiled network"
    assert x["inputs"] == {"embeddings": {"name": "hefsearch_encoder/input_layer1", "shape": [1, 32, 32]},
                           "attention_mask": {"name": "hefsearch_encoder/input_layer2", "shape": [1, 32, 1]}}
    assert x["outputs"] == {"last_hidden_state": {"names": ["hefsearch_encoder/ew_add2_layer_normalization5"],
                                                  "shape": [1, 32, 32]}}
    assert "set_input_mask_to_softmax" not in result.model_script.read_text()
    assert any("HailoRT not installed here" in ln for ln in lines)
    assert "infer" not in fake_dfc.CALLS


def test_user_profile_file_and_extra_lines(fake_dfc, calib_bundle, tmp_path):
    prof = tmp_path / "mine.json"
    prof.write_text(json.dumps({"name": "mine", "bits": {"ffn_out": 16}}))
    extra = tmp_path / "extra.alls"
    extra.write_text("performance_param(compiler_optimization_level=max)\n")
    result, _ = _build(calib_bundle, precision=str(prof), alls_extra=extra, optimization_level=1)
    script = result.model_script.read_text()
    assert script.count("quantization_param(") == 1 and "conv6, conv12" in script
    assert "model_optimization_flavor(optimization_level=1, compression_level=0)" in script
    assert script.rstrip().endswith("performance_param(compiler_optimization_level=max)")
    assert result.entry.extra["precision"]["source"] == str(prof)


# -- resume ---------------------------------------------------------------------------------------
def test_a_second_run_skips_every_finished_stage(fake_dfc, calib_bundle):
    first, _ = _build(calib_bundle)
    sha = Bundle.open(calib_bundle).file_sha256("encoder.hailo10h.hef")
    fake_dfc.CALLS.clear()
    second, lines = _build(calib_bundle)
    assert second.skipped == ["parse", "optimize:balanced", "compile"]
    calls = fake_dfc.CALLS
    assert not {"translate_onnx_model", "optimize", "compile", "infer"} & set(calls)
    assert Bundle.open(calib_bundle).file_sha256("encoder.hailo10h.hef") == sha
    assert second.entry.extra["quality"] == first.entry.extra["quality"]  # cached, not re-emulated
    # --restart does everything again
    fake_dfc.CALLS.clear()
    _build(calib_bundle, restart=True)
    assert {"translate_onnx_model", "optimize", "compile"} <= set(fake_dfc.CALLS)


def test_a_failed_compile_does_not_redo_optimize(fake_dfc, calib_bundle):
    fake_dfc.ClientRunner.FAIL_A16_ON = "any"
    with pytest.raises(AllocatorCrash) as e:
        _build(calib_bundle)
    assert "BackendAllocatorException" in e.value.message and "balanced" in e.value.message
    assert "--fallback" in e.value.hint and "resumes" in e.value.hint
    assert fake_dfc.CALLS.count("optimize") == 1
    assert not (calib_bundle / "encoder.hailo10h.hef").exists()
    assert not Bundle.open(calib_bundle).encoder_entries("hef")
    fake_dfc.ClientRunner.FAIL_A16_ON = "attention"
    fake_dfc.CALLS.clear()
    result, _ = _build(calib_bundle)
    assert "optimize" not in fake_dfc.CALLS and "translate_onnx_model" not in fake_dfc.CALLS
    assert fake_dfc.CALLS.count("compile") == 1 and result.hef.is_file()


def test_changed_calibration_reoptimises(fake_dfc, calib_bundle, corpus):
    from hefsearch.compile.calib import build_calibration

    _build(calib_bundle, report=False)
    build_calibration(calib_bundle, [corpus], n=64, seed=9)
    fake_dfc.CALLS.clear()
    result, _ = _build(calib_bundle, report=False)
    assert "translate_onnx_model" not in fake_dfc.CALLS and fake_dfc.CALLS.count("optimize") == 1
    assert result.entry.extra["calibration"]["rows"] == 64


# -- allocator crash and fallback ----------------------------------------------------------------
def test_attention_16bit_crashes_and_is_explained(fake_dfc, calib_bundle, tmp_path):
    prof = tmp_path / "soft16.json"
    prof.write_text(json.dumps({"base": "balanced", "bits": {"softmax": 16}}))
    with pytest.raises(AllocatorCrash) as e:
        _build(calib_bundle, precision=str(prof), report=False)
    assert "attention path (softmax)" in e.value.message and "DFC 5.3.0" in e.value.message


def test_fallback_steps_down_until_it_compiles(fake_dfc, calib_bundle):
    fake_dfc.ClientRunner.FAIL_A16_ON = {"conv"}  # 16-bit FFN projections cannot be placed
    result, lines = _build(calib_bundle, fallback=True, report=False)
    assert [a.profile for a in result.attempts] == ["balanced", "balanced-no-ffn-out"]
    assert [a.compile for a in result.attempts] == ["allocator", "ok"]
    x = result.entry.extra
    assert x["precision"]["name"] == "balanced-no-ffn-out"
    assert set(x["precision"]["sixteen_bit"]) == {"residual_add", "layernorm"}
    assert x["precision_requested"]["name"] == "balanced"
    assert x["attempts"][0]["error"].startswith("BackendAllocatorException")
    assert any("fallback: trying profile balanced-no-ffn-out" in ln for ln in lines)
    assert fake_dfc.CALLS.count("optimize") == 2
    hef = json.loads(result.hef.read_bytes())
    assert not any("conv" in n for n in hef["a16_layers"])


def test_fallback_ends_at_a8_and_reuses_earlier_optimisations(fake_dfc, calib_bundle):
    fake_dfc.ClientRunner.FAIL_A16_ON = "any"
    result, _ = _build(calib_bundle, fallback=True, report=False)
    assert [a.profile for a in result.attempts] == [
        "balanced", "balanced-no-ffn-out", "balanced-no-ffn-out-layernorm", "a8"]
    assert result.entry.extra["precision"]["name"] == "a8"
    assert result.entry.extra["precision"]["sixteen_bit"] == []
    assert fake_dfc.CALLS.count("optimize") == 4
    fake_dfc.CALLS.clear()
    again, _ = _build(calib_bundle, fallback=True, report=False)
    assert "optimize" not in fake_dfc.CALLS  # every step's optimised HAR is reused
    assert [a.optimize for a in again.attempts] == ["reused"] * 4


def test_allocator_crash_is_recognised_by_name_or_message():
    class BackendAllocatorException(Exception):
        pass

    assert is_allocator_crash(BackendAllocatorException("x"))
    assert is_allocator_crash(RuntimeError("Compilation failed: BackendAllocatorException: Agent infeasible"))
    try:
        try:
            raise BackendAllocatorException("inner")
        except BackendAllocatorException as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert is_allocator_crash(outer)
    assert not is_allocator_crash(MemoryError("out of memory"))


# -- no SDK ---------------------------------------------------------------------------------------
def test_missing_sdk_gives_the_install_message(no_dfc, calib_bundle):
    with pytest.raises(DfcUnavailable) as e:
        _build(calib_bundle)
    text = e.value.message + " " + e.value.hint
    for words in ("hailo_sdk_client", "x86_64 Linux", "Python 3.10-3.12", "Hailo AI Software Suite",
                  "Developer Zone"):
        assert words in text
    res = CliRunner().invoke(main, ["compile", "hef", str(calib_bundle), "--hw-arch", "hailo8"])
    assert res.exit_code == 2 and "Dataflow Compiler" in res.stderr and "Traceback" not in res.output


def test_compile_modules_import_no_sdk_at_import_time():
    import subprocess
    import sys

    code = ("import sys, hefsearch.compile.dfc, hefsearch.compile.calib, hefsearch.cli.cmd_compile; "
            "print([m for m in ('hailo_sdk_client', 'hailo_platform', 'torch') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- end to end through the fake HailoRT ----------------------------------------------------------
def test_a_fake_compiled_hef_runs_on_the_fake_hailort(fake_dfc, fake_hailo, calib_bundle):
    """The manifest entry and HEF the driver writes satisfy the hailo backend's contract check
    (fake HailoRT, fake DFC: verified against the fakes only)."""
    from hefsearch.embed.encoder import Encoder
    from hefsearch.embed.samples import VERIFY_TEXTS

    _build(calib_bundle, report=False)
    texts = VERIFY_TEXTS[:12]
    with Encoder.open(calib_bundle, backend="cpu") as cpu:
        ref = cpu.encode(texts)
    with Encoder.open(calib_bundle, backend="hailo") as npu:
        got = npu.encode(texts)
    cos = np.sum(ref * got, axis=1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(got, axis=1))
    assert cos.min() > 0.98  # UINT8 input/output streams with the calibration's ranges



def test_allocator_crash_at_8_bits_says_the_network_does_not_fit(fake_dfc, calib_bundle, monkeypatch):
    def no_room(self):
        raise RuntimeError("BackendAllocatorException: Agent infeasible")

    monkeypatch.setattr(fake_dfc.ClientRunner, "compile", no_room)
    with pytest.raises(AllocatorCrash) as e:
        _build(calib_bundle, precision="a8", fallback=True, report=False)
    assert "even at 8 bits" in e.value.message and "--seq-len" in e.value.hint


# -- the model script follows the zoo's text-encoder scripts -------------------------------------
@pytest.mark.parametrize("mode", ["softmax", "additive"])
def test_written_model_script_has_matmul_correction_and_the_mask_command_by_mode(fake_dfc, calib_bundle, mode):
    from hefsearch.compile.model_script import MASK_COMMAND, MATMUL_CORRECTION

    result, _ = _build(calib_bundle, precision="a8", mask=mode, report=False)
    kept = result.model_script.read_text()  # encoder.hailo10h.alls in the bundle
    (used,) = [p.read_text() for p in result.work_dir.glob("model-*.alls")]  # what optimize() loaded
    assert kept == used
    lines = [ln.strip() for ln in kept.splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines.count(MATMUL_CORRECTION) == 1
    assert MATMUL_CORRECTION == ("pre_quantization_optimization(matmul_correction, layers={matmul*}, "
                                 "correction_type=zp_comp_block)")
    if mode == "softmax":
        assert lines[0] == MASK_COMMAND == "set_input_mask_to_softmax()"
    else:
        assert "set_input_mask_to_softmax" not in kept
    doc = json.loads(result.hef.read_bytes())
    assert doc["mask_input"]["softmax"] is (mode == "softmax")
    assert doc["mask_input"]["layout"] == ("scores" if mode == "softmax" else "keys")
    assert result.entry.extra["mask"] == mode
    assert result.entry.extra["mask_input"]["layout"] == ("scores" if mode == "softmax" else "keys")


# -- DFC line vs target chip ---------------------------------------------------------------------
@pytest.mark.parametrize("version, hw_arch, mask, words, hint_words", [
    ("5.3.0+fake", "hailo8", None, "needs DFC 3.x", "DFC 3.x"),
    ("5.3.0+fake", "hailo8l", "additive", "needs DFC 3.x", "DFC 3.x"),
    ("3.33.0+fake", "hailo10h", "additive", "needs DFC 5.x", "DFC 5.x"),
    ("3.33.0+fake", "hailo8", None, "set_input_mask_to_softmax()", "--mask additive"),
    ("3.33.0+fake", "hailo8", "softmax", "set_input_mask_to_softmax()", "--mask additive"),
])
def test_a_dfc_that_cannot_build_it_is_refused_before_parsing(fake_dfc, dfc_version, calib_bundle, version,
                                                              hw_arch, mask, words, hint_words):
    from hefsearch.compile.dfc import CompileError

    dfc_version(version)
    with pytest.raises(CompileError) as e:
        _build(calib_bundle, hw_arch=hw_arch, mask=mask, report=False)
    assert words in e.value.message and version in e.value.message
    assert hint_words in e.value.hint
    assert "translate_onnx_model" not in fake_dfc.CALLS and "__init__" not in fake_dfc.CALLS
    assert not (calib_bundle / "build").exists() or not any((calib_bundle / "build").rglob("*.har"))


def test_the_cli_names_the_dfc_line_a_chip_needs(fake_dfc, calib_bundle):
    res = CliRunner().invoke(main, ["compile", "hef", str(calib_bundle), "--hw-arch", "hailo8"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "builds for Hailo-10H only" in res.stderr and "needs DFC 3.x" in res.stderr
    assert "translate_onnx_model" not in fake_dfc.CALLS


def test_dfc3_builds_hailo8_with_the_additive_mask(fake_dfc, dfc_version, fake_hailo, calib_bundle):
    dfc_version("3.33.0+fake")
    result, _ = _build(calib_bundle, hw_arch="hailo8", mask="additive", precision="a8", report=False)
    assert result.hef.name == "encoder.hailo8.hef"
    doc = json.loads(result.hef.read_bytes())
    assert doc["hw_arch"] == "hailo8" and doc["mask_input"] == {"layout": "keys", "heads": 1, "softmax": False}
    x = result.entry.extra
    assert x["dfc_version"] == "3.33.0+fake" and x["mask"] == "additive" and x["mask_input"]["layout"] == "keys"
    assert x["inputs"]["attention_mask"]["shape"] == [8, 8, 1]  # [1, 64, 1] folded by the allocator
    assert "load_model_script" in fake_dfc.CALLS and "compile" in fake_dfc.CALLS


def test_an_unknown_dfc_line_is_tried_and_the_probe_catches_a_missing_mask_command(fake_dfc, dfc_version,
                                                                                 calib_bundle):
    """A DFC line hefsearch does not know is tried with a warning; if it lacks the softmax
    command, probing it on the parsed network stops the build in seconds, before optimize()."""
    from hefsearch.compile.dfc import CompileError

    dfc_version("4.0.0+fake")  # the fake treats every line below 5 like 3.x
    lines: list[str] = []
    with pytest.raises(CompileError) as e:
        build_hef(calib_bundle, HefOptions(hw_arch="hailo8", report=False), say=lines.append)
    assert any("not a line hefsearch knows" in ln for ln in lines)
    assert "refused set_input_mask_to_softmax()" in e.value.message and "--mask additive" in e.value.hint
    calls = fake_dfc.CALLS
    assert "translate_onnx_model" in calls and "load_model_script" in calls and "optimize" not in calls


# -- calibration for the score layout is a view -------------------------------------------------
def test_score_layout_calibration_is_a_broadcast_view_not_a_copy():
    """A score-shaped mask is heads x SEQ values per token: 1024 rows at SEQ 256 and 12 heads
    would be 3 GB as a copy. calibration_dict broadcasts the 0/1 key mask over the query rows."""
    import tracemalloc

    from hefsearch.compile.preflight import InputLayer, calibration_dict, preflight
    from hefsearch.embed.mask_layout import MaskLayout

    n, seq, heads, hidden = 1024, 256, 12, 8
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, seq + 1, size=n)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.float32).reshape(n, 1, 1, seq)
    emb = rng.standard_normal((n, 1, seq, hidden), dtype=np.float32)
    layers = [InputLayer("net/input_layer1", "embeddings", (-1, 1, seq, hidden)),
              InputLayer("net/input_layer2", "attention_mask", (-1, 1, seq, heads * seq))]
    layout = MaskLayout.for_mode("softmax", seq, heads, -50.0)
    tracemalloc.start()
    try:
        calib = calibration_dict(layers, emb, mask, layout)
        arr = calib["net/input_layer2"]
        pre = preflight(layers, calib, layout)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert arr.shape == (n, 1, seq, heads * seq) and arr.dtype == np.float32
    assert arr.nbytes > 3 * 10**9  # what a copy would have cost
    assert 0 in arr.strides or arr.base is not None
    assert not arr.flags.owndata and peak < 200 * 2**20
    assert pre["rows"] == n
    # values: column h*S+k of every query row is mask[k]
    m = mask[:, 0, 0]
    for i in (0, 5, n - 1):
        for q in (0, seq // 2, seq - 1):
            np.testing.assert_array_equal(arr[i, 0, q], np.tile(m[i], heads))
    assert calib["net/input_layer1"].shape == (n, 1, seq, hidden)
    # the additive layout holds the bias, one value per key
    add = calibration_dict([layers[0], InputLayer("net/input_layer2", "attention_mask", (-1, 1, seq, 1))],
                           emb, mask, MaskLayout.for_mode("additive", seq, heads, -50.0))["net/input_layer2"]
    assert add.shape == (n, 1, seq, 1)
    np.testing.assert_array_equal(add[:, 0, :, 0], (1.0 - m) * np.float32(-50.0))


# -- acceptance: calib -> hef -> embed on the "device", through the CLI ---------------------------
def _accept_texts() -> list[str]:
    from hefsearch.embed.samples import VERIFY_TEXTS

    return list(VERIFY_TEXTS[:24])


def _cli(args, **kw):
    res = CliRunner().invoke(main, [str(a) for a in args], **kw)
    assert res.exit_code == 0, res.output + (res.stderr if res.stderr_bytes is not None else "")
    return res


def _embed(bundle, backend, texts):
    res = _cli(["embed", "--bundle", bundle, "--backend", backend, "-"], input="\n".join(texts) + "\n")
    assert f"backend: {backend}" in res.stderr
    vecs = np.array([json.loads(ln) for ln in res.stdout.splitlines()], dtype=np.float32)
    assert vecs.shape[0] == len(texts)
    return vecs


def _mean_cosine(a, b) -> float:
    return float(np.mean(np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))))


def _hailort_streams(hef_path) -> tuple[dict, list[str]]:
    """What the (fake) HailoRT itself reports for the HEF, read with its own API."""
    import hailo_platform as hp

    hef = hp.HEF(str(hef_path))
    name = lambda v: getattr(v, "name", None) or str(v).split(".")[-1]  # noqa: E731
    ins = {i.name: {"name": i.name, "shape": [int(d) for d in i.shape], "order": name(i.format.order),
                    "type": name(i.format.type)} for i in hef.get_input_vstream_infos()}
    outs = [o.name for o in hef.get_output_vstream_infos()]
    return ins, outs


@pytest.mark.parametrize("mode", ["softmax", "additive"])
def test_acceptance_calib_hef_embed_through_the_cli(fake_dfc, fake_hailo, tiny_bert_bundle, corpus, tmp_path,
                                                    mode):
    """compile calib -> compile hef --hw-arch hailo10h -> embed --backend hailo, all through the
    CLI, fake DFC and fake HailoRT (verified against the fakes only): the vectors match the CPU's,
    the manifest records the streams HailoRT reports for the HEF, and bulk work uses a device
    batch > 1."""
    import shutil

    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bert_bundle, bundle)
    _cli(["compile", "calib", bundle, "--from", corpus, "--n", 64, "--seed", 2])
    res = _cli(["compile", "hef", bundle, "--hw-arch", "hailo10h", "--mask", mode])
    assert f"{bundle / 'encoder.hailo10h.hef'}: hailo10h, SEQ 64" in res.stdout
    hef = bundle / "encoder.hailo10h.hef"
    (entry,) = Bundle.open(bundle).encoder_entries("hef")
    x = entry.extra
    heads, hidden = Bundle.open(bundle).model["heads"], Bundle.open(bundle).hidden
    # the recorded streams are HailoRT's: folded inputs, the output named after its feeding layer
    ins, outs = _hailort_streams(hef)
    assert x["streams_from"] == "hef"
    assert {role: d for role, d in x["inputs"].items()} == {
        "embeddings": ins["hefsearch_encoder/input_layer1"], "attention_mask": ins["hefsearch_encoder/input_layer2"]}
    assert x["inputs"]["embeddings"]["shape"] == [8, 8, hidden]
    assert x["inputs"]["attention_mask"]["shape"] == ([8, 8, heads * 64] if mode == "softmax" else [8, 8, 1])
    assert x["outputs"]["last_hidden_state"]["names"] == outs == ["hefsearch_encoder/ew_add2_layer_normalization5"]
    assert x["mask"] == mode and x["mask_input"]["mode"] == mode
    assert x["quality"]["cosine_mean"] > 0.98

    texts = _accept_texts()
    cpu = _embed(bundle, "cpu", texts)
    npu = _embed(bundle, "hailo", texts)
    assert _mean_cosine(cpu, npu) >= 0.98
    batches = fake_hailo.stats.configured_batches
    assert batches and max(batches) > 1, batches


@pytest.mark.parametrize("mode", ["softmax", "additive"])
def test_acceptance_without_hailort_where_the_dfc_runs(fake_dfc, fake_hailo, tiny_bert_bundle, corpus, tmp_path,
                                                       monkeypatch, mode):
    """The DFC machine has no HailoRT: the manifest takes the streams from the compiled network
    (parsed, unfolded input shapes; output named after the feeding layer). The HEF then runs on
    the (fake) HailoRT anyway: the runtime matches the streams by meaning."""
    import shutil

    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bert_bundle, bundle)
    _cli(["compile", "calib", bundle, "--from", corpus, "--n", 64, "--seed", 2])
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "hailo_platform", None)  # import hailo_platform fails while compiling
        res = _cli(["compile", "hef", bundle, "--hw-arch", "hailo10h", "--mask", mode, "--no-report"])
    assert "HailoRT not installed here" in res.stderr
    (entry,) = Bundle.open(bundle).encoder_entries("hef")
    x = entry.extra
    heads = json.loads((bundle / "manifest.json").read_text())["model"]["heads"]
    assert x["streams_from"] == "compiled network"
    assert x["inputs"] == {
        "embeddings": {"name": "hefsearch_encoder/input_layer1", "shape": [1, 64, 32]},
        "attention_mask": {"name": "hefsearch_encoder/input_layer2",
                           "shape": [1, 64, heads * 64] if mode == "softmax" else [1, 64, 1]}}
    ins, outs = _hailort_streams(bundle / "encoder.hailo10h.hef")
    assert x["outputs"]["last_hidden_state"]["names"] == outs
    assert ins["hefsearch_encoder/input_layer1"]["shape"] == [8, 8, 32]  # what the HEF really has

    texts = _accept_texts()
    cpu = _embed(bundle, "cpu", texts)
    npu = _embed(bundle, "hailo", texts)
    assert _mean_cosine(cpu, npu) >= 0.98
    assert max(fake_hailo.stats.configured_batches) > 1

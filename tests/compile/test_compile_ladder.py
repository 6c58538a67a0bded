"""``compile hef`` on Hailo-10H never dead-ends; the fake DFC fails the way the public record
says the real one does.

Verified against the contract fake of ``hailo_sdk_client`` only (tests/fakes/hailo_sdk_client):
its behaviours follow the public Hailo-10H report (shared/reference/seeds/000_*.txt), its
author's follow-up (community thread 19530: attention crash, then a "nan exponent" on a16 convs,
then "needs super-defuse", under exception classes that are not public) and the model zoo's
hailo10h text-encoder scripts. None of it has run on a real Dataflow Compiler.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from hefsearch.cli.main import main
from hefsearch.compile.hef.build import build_hef
from hefsearch.compile.hef.errors import CompileError
from hefsearch.compile.hef.plan import HefOptions
from hefsearch.compile.hef.model_script import script_commands
from hefsearch.embed.bundle import Bundle

#: the public Hailo-10H report's model script, section 7, byte for byte (1024 calibration rows)
REPORT_LINES = [
    "model_optimization_config(calibration, batch_size=16, calibset_size=1024)",
    "pre_quantization_optimization(equalization, policy=enabled)",
    "model_optimization_flavor(optimization_level=0, compression_level=0)",
    "set_input_mask_to_softmax()",
]


def _report_lines(rows: int) -> list[str]:
    return [REPORT_LINES[0].replace("1024", str(min(rows, 1024))), *REPORT_LINES[1:]]


def _build(bundle, **kw):
    lines: list[str] = []
    kw.setdefault("hw_arch", "hailo10h")
    return build_hef(bundle, HefOptions(**kw), say=lines.append), lines


def _unnameable():
    """An exception class no code can know by name (made now, with a random name)."""
    import uuid

    return type(f"Opaque{uuid.uuid4().hex}Error", (Exception,), {})


def _work(bundle):
    return bundle / "build" / "hailo10h.s64"


# -- item 1: no dead end ------------------------------------------------------------------------
def test_acceptance_unknown_failure_on_every_16bit_attempt_ends_with_the_report_hef(fake_dfc, tiny_bert_bundle,
                                                                                      corpus, tmp_path):
    """compile calib B --from DOCS, then compile hef B --hw-arch hailo10h and no other flag: every
    16-bit attempt fails in optimize() with an exception class nobody can name; the build steps
    down and ends with a HEF built from exactly the report's 8-bit script, and the build record
    names the failed attempt, its stage, its exception class and its message."""
    import shutil

    opaque = _unnameable()
    fake_dfc.ClientRunner.UNKNOWN_A16_FAILURE = opaque
    bundle = tmp_path / "B"
    shutil.copytree(tiny_bert_bundle, bundle)
    runner = CliRunner()
    res = runner.invoke(main, ["compile", "calib", str(bundle), "--from", str(corpus), "--n", "96", "--seed", "3"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["compile", "hef", str(bundle), "--hw-arch", "hailo10h"])
    assert res.exit_code == 0, res.output
    hef = bundle / "encoder.hailo10h.hef"
    doc = json.loads(hef.read_bytes())
    assert doc["a16_layers"] == [] and doc["mask_input"]["layout"] == "keys01"
    (entry,) = Bundle.open(bundle).encoder_entries("hef")
    rows = entry.extra["calibration"]["rows"]
    script = (bundle / entry.extra["model_script"]).read_text()
    assert script_commands(script) == _report_lines(rows)
    assert "this 16-bit attempt may cost" in res.output and "--precision a8 goes straight" in res.output
    report = json.loads((_work(bundle) / "build-report.json").read_text())
    assert report["result"] == "ok" and report["ladder"] == ["residual-a16", "a8"]
    first, last = report["attempts"]
    assert first["profile"] == "residual-a16" and first["optimize"] == "failed" and first["compile"] == "not run"
    f = first["failure"]
    assert f["stage"] == "optimize" and f["exception"] == opaque.__name__
    assert "cannot know by name" in f["message"] and f["seconds"] >= 0 and f["at"].endswith("Z")
    assert last["profile"] == "a8" and last["compile"] == "ok" and last["failure"] is None
    assert entry.extra["attempts"][0]["failure"]["exception"] == opaque.__name__


def _outside_exception():
    """Derived from BaseException, not Exception (as some native-extension errors are)."""
    return type("OpaqueNativeAbort", (BaseException,), {})


def _unprintable():
    """An exception whose message cannot even be read: ``str()`` of it raises."""
    def __str__(self):
        raise RuntimeError("no message")
    return type("OpaqueUnprintableError", (Exception,), {"__str__": __str__})


@pytest.mark.parametrize("make", [_outside_exception, _unprintable], ids=["base-exception", "unprintable"])
def test_a_16bit_failure_steps_down_however_strange_the_exception(fake_dfc, calib_bundle, make):
    """"Whatever its class": also one outside Exception, and one whose message cannot be read;
    before, either ended the build with a traceback and the report's script never ran."""
    odd = make()
    fake_dfc.ClientRunner.UNKNOWN_A16_FAILURE = odd
    result, lines = _build(calib_bundle, report=False)
    assert [a.profile for a in result.attempts] == ["residual-a16", "a8"]
    f = result.attempts[0].failure
    assert (f["stage"], f["exception"]) == ("optimize", odd.__name__) and f["message"]
    assert script_commands(result.model_script.read_text()) == _report_lines(96)
    assert any(ln.startswith(f"optimize: {odd.__name__}") for ln in lines)


def test_ctrl_c_during_a_16bit_attempt_is_not_a_step_down(fake_dfc, calib_bundle):
    fake_dfc.ClientRunner.UNKNOWN_A16_FAILURE = KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        _build(calib_bundle, report=False)
    assert fake_dfc.CALLS.count("optimize") == 1  # the a8 rung never started


@pytest.mark.parametrize("switch, stage, exception", [
    ("NAN_EXPONENT", "optimize", "AccelerasNanExponentError"),  # the follow-up's a16 convs, the default
    ("SPATIAL_DEFUSE", "compile", "AllocatorDefuseError"),  # the follow-up's "needs super-defuse"
])
def test_the_follow_up_cascade_steps_down_whatever_the_class(fake_dfc, calib_bundle, switch, stage, exception):
    if switch == "SPATIAL_DEFUSE":
        fake_dfc.ClientRunner.NAN_EXPONENT = False
        fake_dfc.ClientRunner.SPATIAL_DEFUSE = "always"
    result, lines = _build(calib_bundle, report=False, precision="zoo-a16")
    assert [a.profile for a in result.attempts] == ["zoo-a16", "a8"]
    f = result.attempts[0].failure
    assert (f["stage"], f["exception"]) == (stage, exception)
    assert getattr(result.attempts[0], stage) == "failed" and result.attempts[0].wall is None
    assert script_commands(result.model_script.read_text()) == _report_lines(96)
    assert any(ln.startswith(f"{stage}: {exception}") for ln in lines)


def test_the_zoo_defuse_line_passes_a_compile_that_wants_only_that(fake_dfc, calib_bundle):
    """SPATIAL_DEFUSE "unless_legacy": the zoo's allocator_param(spatial_defuse_legacy=True) is
    on the 16-bit rung, so that compile passes (whether it is the thread's "super-defuse" is
    unconfirmed)."""
    fake_dfc.ClientRunner.NAN_EXPONENT = False
    fake_dfc.ClientRunner.SPATIAL_DEFUSE = "unless_legacy"
    result, _ = _build(calib_bundle, report=False, precision="zoo-a16")
    assert [a.profile for a in result.attempts] == ["zoo-a16"]
    assert json.loads(result.hef.read_bytes())["a16_layers"]


def test_a_remembered_failure_is_not_tried_again_and_restart_tries_it(fake_dfc, calib_bundle):
    fake_dfc.ClientRunner.UNKNOWN_A16_FAILURE = _unnameable()
    _build(calib_bundle, report=False)
    fake_dfc.CALLS.clear()
    again, lines = _build(calib_bundle, report=False)
    assert "optimize" not in fake_dfc.CALLS and "translate_onnx_model" not in fake_dfc.CALLS
    assert again.attempts[0].optimize == "failed (earlier run)"
    assert again.attempts[0].failure["earlier_run"] is True and again.attempts[0].failure["stage"] == "optimize"
    fake_dfc.CALLS.clear()
    _build(calib_bundle, report=False, restart=True)
    assert fake_dfc.CALLS.count("optimize") == 2


def test_parse_and_calibration_run_once_for_every_rung(fake_dfc, calib_bundle, monkeypatch):
    from hefsearch.compile import calib as calib_mod

    loads = []
    real = calib_mod.load_calibration
    monkeypatch.setattr(calib_mod, "load_calibration", lambda *a, **k: loads.append(1) or real(*a, **k))
    fake_dfc.ClientRunner.UNKNOWN_A16_FAILURE = _unnameable()
    result, _ = _build(calib_bundle, report=False)
    assert len(result.attempts) == 2 and len(loads) == 1
    assert fake_dfc.CALLS.count("translate_onnx_model") == 1 and fake_dfc.CALLS.count("optimize") == 2


def test_the_last_rung_is_the_report_script_whatever_the_options(fake_dfc, calib_bundle, tmp_path):
    """--alls-extra lines and other levels go into the first rung only; the last rung on Hailo-10H
    is the report's script exactly. An all-8-bit request with options of its own becomes a rung
    of its own before it."""
    extra = tmp_path / "extra.alls"
    extra.write_text("performance_param(compiler_optimization_level=max)\n")
    fake_dfc.ClientRunner.UNKNOWN_A16_FAILURE = True
    result, _ = _build(calib_bundle, alls_extra=extra, optimization_level=1, report=False)
    assert [a.profile for a in result.attempts] == ["residual-a16", "a8"]
    (first,) = [p.read_text() for p in _work(calib_bundle).glob(result.attempts[0].model_script)]
    assert "performance_param(compiler_optimization_level=max)" in first and "optimization_level=1" in first
    assert script_commands(result.model_script.read_text()) == _report_lines(96)

    def fail_with_extra(self):  # a compile that fails only with the user's line in the script
        if "performance_param" in self._script:
            raise RuntimeError("no room at optimisation level max")
        return real_compile(self)

    real_compile = fake_dfc.ClientRunner.compile
    fake_dfc.ClientRunner.compile = fail_with_extra
    try:
        again, _ = _build(calib_bundle, precision="a8", alls_extra=extra, report=False, restart=True)
    finally:
        fake_dfc.ClientRunner.compile = real_compile
    assert [a.profile for a in again.attempts] == ["a8+options", "a8"]
    assert again.attempts[0].failure["exception"] == "RuntimeError"
    assert script_commands(again.model_script.read_text()) == _report_lines(96)


def test_a_failing_report_script_stops_with_its_context_and_what_to_send(fake_dfc, calib_bundle):
    opaque = _unnameable()

    def broken(self, *a, **k):
        raise opaque("internal error 0x2f")

    fake_dfc.ClientRunner.optimize = broken
    with pytest.raises(CompileError) as e:
        _build(calib_bundle, report=False)
    msg, hint = e.value.message, e.value.hint
    assert opaque.__name__ in msg and "internal error 0x2f" in msg and "optimize()" in msg
    assert "paraphrase-multilingual-MiniLM-L12-v2" in msg and "DFC 5.3.0" in msg and "13 contexts" in msg
    assert "build-report.json" in hint and "thread 19530" in hint and "DFC version" in hint
    report = json.loads((_work(calib_bundle) / "build-report.json").read_text())
    assert report["result"] == "failed"
    assert [a["failure"]["exception"] for a in report["attempts"]] == [opaque.__name__] * 2


def test_other_chips_still_stop_on_an_unknown_failure(fake_dfc, dfc_version, calib_bundle):
    """Only Hailo-10H steps down on anything; on Hailo-8 an unknown failure is not a precision
    wall, so it stops at once instead of costing four optimisations."""
    dfc_version("3.34.0+fake")
    fake_dfc.ClientRunner.UNKNOWN_A16_FAILURE = _unnameable()
    with pytest.raises(CompileError, match="optimize\\(\\) failed"):
        _build(calib_bundle, hw_arch="hailo8", report=False)
    assert fake_dfc.CALLS.count("optimize") == 1


# -- item 2: the zoo's 16-bit lines ---------------------------------------------------------------
def test_every_line_of_a_16bit_rung_cites_its_public_source(fake_dfc, calib_bundle):
    from hefsearch.compile.hef.model_script import ZOO_CLIP_TEXT, ZOO_SIGLIP_TEXT

    fake_dfc.ClientRunner.NAN_EXPONENT = False
    result, _ = _build(calib_bundle, report=False, precision="zoo-a16")
    script = result.model_script.read_text()
    cmds = script_commands(script)
    assert cmds[:4] == _report_lines(96)  # the report's lines first, unchanged
    for line in ("model_optimization_config(globals, multiproc_policy=disabled)",
                 "pre_quantization_optimization(matmul_correction, layers={matmul*}, correction_type=zp_comp_block)",
                 "pre_quantization_optimization(ew_add_fusing, policy=disabled)",
                 "pre_quantization_optimization(layer_norm_decomposition, equalization=disabled, "
                 "bit_decomposition_mode=uniform_precision)",
                 "quantization_param({conv_feature_splitter[0-9]*_[2-3]}, precision_mode=a8_w8)",
                 "allocator_param(spatial_defuse_legacy=True)"):
        assert line in cmds
    a16 = [c for c in cmds if "a16_w16" in c]
    assert len(a16) == 6  # input, qkv, attention_out, residual_add, ffn_in, ffn_out
    assert "quantization_param([input_layer1], precision_mode=a16_w16)" in a16  # the mask input stays 8-bit
    raw = script.splitlines()
    for i, line in enumerate(raw):
        if line and not line.startswith("#") and line not in _report_lines(96):
            comment = raw[i - 1]
            assert comment.startswith("#") and (ZOO_CLIP_TEXT in comment or ZOO_SIGLIP_TEXT in comment
                                                or "000_0bd7e697973448cf.txt" in comment), (line, comment)
            assert re.search(r"@[0-9a-f]{7} line", comment), comment  # file, commit and line
    assert "not shown together with set_input_mask_to_softmax()" in script


def test_the_zoo_lines_are_on_hailo10h_16bit_rungs_only(fake_dfc, dfc_version, calib_bundle):
    from hefsearch.compile.hef.model_script import RECIPE_HAILO10H, RECIPE_ZOO, ScriptSettings, build_model_script
    from hefsearch.embed.precision import load_profile

    hn = {"layers": {"n/input_layer1": {"type": "input_layer"}}}
    for name in ("a8",):
        s = build_model_script(load_profile(name), hn, ScriptSettings(calibset_size=1024, batch_size=16,
                                                                      recipe=RECIPE_HAILO10H, mask_command=True))
        assert script_commands(s) == REPORT_LINES  # byte for byte, as the report wrote it
        assert "multiproc_policy" not in s and "spatial_defuse" not in s
    zoo = build_model_script(load_profile("balanced"), hn, ScriptSettings(calibset_size=64, recipe=RECIPE_ZOO))
    assert "multiproc_policy" not in zoo and "spatial_defuse" not in zoo


# -- item 4: the fake fails like the stack --------------------------------------------------------
def _mask_mul(model) -> str:
    """The name of the mask Mul in an encoder.onnx: the Mul on the path from the 2-D mask input."""
    seen, todo = {"attention_mask"}, ["attention_mask"]
    nodes = list(model.graph.node)
    while todo:
        t = todo.pop()
        for n in nodes:
            if t in n.input:
                if n.op_type == "Mul":
                    return n.name
                seen.update(n.output)
                todo.extend(n.output)
    raise AssertionError("no mask Mul")


def test_fake_takes_node_names_as_start_nodes_and_the_reports_mask_mul(fake_dfc, tiny_bert_bundle):
    """The report parses from node names (``/embeddings/Add_1``, ``/Mul``), as the zoo's BERT does;
    the parse starts at the node, its data input becoming the network input. With the report's
    /Mul start the mask reaches the score Adds through the Mul (mask -> Mul -> Add), and
    set_input_mask_to_softmax() accepts that layout."""
    import onnx
    from hailo_sdk_client import ClientRunner
    from hailo_sdk_client.exposed_definitions import Dims

    from hefsearch.compile.hef.sdk import probe_mask_command

    path = tiny_bert_bundle / "encoder.onnx"
    mul = _mask_mul(onnx.load(str(path)))
    runner = ClientRunner(hw_arch="hailo10h")
    runner.translate_onnx_model(
        str(path), "net", start_node_names=["embeddings", mul], end_node_names=["last_hidden_state"],
        net_input_shapes={"embeddings": [1, 64, 32], mul: [1, 1, 1, 64]},
        net_input_format={"embeddings": [Dims.BATCH, Dims.WIDTH, Dims.CHANNELS],
                          mul: [Dims.BATCH, Dims.HEIGHT, Dims.WIDTH, Dims.CHANNELS]})
    layers = runner.get_hn_dict()["layers"]
    assert layers["net/input_layer2"]["original_names"] == [mul]
    assert layers["net/input_layer2"]["input_shapes"] == [[-1, 1, 1, 64]]
    probe_mask_command(runner, "keys01")  # accepted: the report's own layout
    with pytest.raises(Exception, match="not found"):
        ClientRunner(hw_arch="hailo10h").translate_onnx_model(str(path), "net", start_node_names=["/no/such/Node"])


def test_fake_defaults_follow_the_thread_not_the_withdrawn_any_a16_rule(fake_dfc, calib_bundle, tmp_path):
    """On DFC 5.3 + hailo10h one a16 conv compiles (the follow-up), a16 on the attention path
    crashes the allocator, and a16 on several convs fails optimize() with a "nan exponent"."""
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"name": "one-conv", "bits": {"input": 16}}))
    result, _ = _build(calib_bundle, precision=str(one), report=False)
    assert [a.profile for a in result.attempts] == ["one-conv"]
    soft = tmp_path / "soft.json"
    soft.write_text(json.dumps({"name": "soft", "bits": {"softmax": 16}}))
    result, _ = _build(calib_bundle, precision=str(soft), report=False)
    assert result.attempts[0].wall == "allocator" and result.attempts[0].failure["stage"] == "compile"


def test_fake_hailort_lets_the_host_set_a_format_order(fake_hailo, tiny_bert_bundle, tmp_path):
    """HailoRT's InferStream.set_format_order is allowed (pyhailort.py); the fake used to refuse it."""
    import hailo_platform as hp

    from tests.fakes.fake_hef import add_fake_hef, copy_bundle

    path = copy_bundle(tiny_bert_bundle, tmp_path / "b")
    add_fake_hef(path)
    with hp.VDevice() as vdev:
        im = vdev.create_infer_model(str(path / "encoder.hailo10h.hef"))
        im.input("encoder/input_layer1").set_format_order(hp.FormatOrder.NHWC)
    assert fake_hailo.stats.set_format_orders == [("encoder/input_layer1", hp.FormatOrder.NHWC)]


# -- item 3: one verdict for the emulator report and doctor --verify ------------------------------
def test_the_reports_working_8bit_numbers_are_degraded_not_broken_in_both_verdicts():
    """The public Hailo-10H report's working 8-bit HEF: similarity correlation 0.37, top-1 70.8%
    against FP32's 100%. Both the emulator report and doctor --verify judge by retrieval: degraded,
    not broken. A space that lost retrieval is broken in both."""
    from hefsearch.compile.hef.emulator_report import _verdict
    from hefsearch.evaluate.npu_verify import LayoutFit, diagnose

    def emulator(corr, nn, top1):
        fp = {"similarity_pearson": 1.0, "neighbour_agreement": 1.0}
        return _verdict({"fp32_vs_onnx": fp, "quantized_vs_onnx": {"similarity_pearson": corr,
                                                                  "neighbour_agreement": nn},
                         "top1_onnx": 1.0, "top1_quantized": top1})[0]

    def verify(corr, nn, top1):
        comp = {"similarity_pearson": corr, "neighbour_agreement": nn, "top1_ref": 1.0, "top1_test": top1}
        return diagnose([0.5] * 8, comp, [LayoutFit("as read", 0.5)])[0]

    assert emulator(0.37, 0.4, 0.708) == "degraded"
    assert verify(0.37, 0.4, 0.708) != "broken"
    assert emulator(0.37, 0.1, 0.1) == "broken" and verify(0.37, 0.1, 0.1) == "broken"

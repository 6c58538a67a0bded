"""The order of the Hailo-10H rungs, and rungs that never came back.

Verified against the contract fake of ``hailo_sdk_client`` only (tests/fakes/hailo_sdk_client, DFC
5.3.0 by default, with the walls of the public Hailo-10H report and of its author's follow-up,
community thread 19530). None of it has run on a real Dataflow Compiler.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from hefsearch.compile.hef.build import build_hef
from hefsearch.compile.hef.model_script import QWEN_HAILO10H, script_commands, sixteen_bit_layers
from hefsearch.compile.hef.plan import HefOptions
from tests.support.compile_fixtures import FAKES

#: the public Hailo-10H report's model script, section 7 (96 calibration rows here)
REPORT_LINES = [
    "model_optimization_config(calibration, batch_size=16, calibset_size=96)",
    "pre_quantization_optimization(equalization, policy=enabled)",
    "model_optimization_flavor(optimization_level=0, compression_level=0)",
    "set_input_mask_to_softmax()",
]


def _build(bundle, **kw):
    lines: list[str] = []
    kw.setdefault("hw_arch", "hailo10h")
    kw.setdefault("report", False)
    return build_hef(bundle, HefOptions(**kw), say=lines.append), lines


def _work(bundle):
    return bundle / "build" / "hailo10h.s64"


def _layer_types(fake_dfc, bundle) -> dict[str, str]:
    """Short layer name -> HN type, from the parsed network the build saved."""
    runner = fake_dfc.ClientRunner(hw_arch="hailo10h", har=str(_work(bundle) / "parsed.har"))
    return {name.split("/", 1)[-1]: layer["type"] for name, layer in runner.get_hn_dict()["layers"].items()}


def _attempt_script(bundle, attempt) -> str:
    return (_work(bundle) / attempt.model_script).read_text()


@pytest.mark.parametrize("walls", ["optimize", "compile"])
def test_acceptance_every_16bit_attempt_failing_gives_a_hef_by_the_second_attempt_without_an_a16_conv(
        fake_dfc, calib_bundle, walls):
    """DFC 5.3.0, walls on so that every 16-bit attempt fails (in optimize(), or in compile() on any
    a16 layer): compile hef --hw-arch hailo10h with no other option has its HEF by the second
    attempt, built from the report's 8-bit script, and no a16 conv was tried before that script."""
    if walls == "optimize":
        fake_dfc.ClientRunner.UNKNOWN_A16_FAILURE = True
    else:
        fake_dfc.ClientRunner.FAIL_A16_ON = "any"
    result, _ = _build(calib_bundle)
    assert len(result.attempts) <= 2 and result.attempts[-1].profile == "a8"
    assert result.hef.is_file() and json.loads(result.hef.read_bytes())["a16_layers"] == []
    assert script_commands(result.model_script.read_text()) == REPORT_LINES
    types = _layer_types(fake_dfc, calib_bundle)
    before = result.attempts[:-1]
    assert before and all(a.failure["stage"] == walls for a in before)  # a 16-bit attempt was made, and failed
    for a in before:
        a16 = sixteen_bit_layers(_attempt_script(calib_bundle, a))
        assert a16, "the attempt before the 8-bit script is a 16-bit one"
        assert [n for n in a16 if types[n] == "conv"] == []


def test_residual_a16_is_hailo10h_evidence_line_for_line(fake_dfc, calib_bundle):
    """The first rung: the report's four lines, then the lines Hailo's Qwen2 Hailo-10H recipe has
    beside its a16 input and residual adds, each under a comment naming file, commit and line; a16
    on input_layer1 and the residual adds only (no conv, no score add, not the mask input)."""
    fake_dfc.ClientRunner.UNKNOWN_A16_FAILURE = True
    result, _ = _build(calib_bundle)
    script = _attempt_script(calib_bundle, result.attempts[0])
    cmds = script_commands(script)
    assert cmds[:4] == REPORT_LINES
    assert cmds[4:8] == ["model_optimization_config(globals, multiproc_policy=disabled)",
                         "pre_quantization_optimization(ew_add_fusing, policy=disabled)",
                         "pre_quantization_optimization(matmul_correction, layers={matmul*}, "
                         "correction_type=zp_comp_block)",
                         "pre_quantization_optimization(layer_norm_decomposition, equalization=disabled, "
                         "bit_decomposition_mode=uniform_precision)"]
    assert not any(k in script for k in ("spatial_defuse", "conv_feature_splitter"))
    types = _layer_types(fake_dfc, calib_bundle)
    a16 = sixteen_bit_layers(script)
    assert a16[0] == "input_layer1" and {types[n] for n in a16[1:]} == {"ew_add"}
    assert "input_layer2" not in a16
    raw = script.splitlines()
    for i, line in enumerate(raw):
        if line and not line.startswith("#") and line not in REPORT_LINES:
            assert QWEN_HAILO10H in raw[i - 1] or re.search(r"@[0-9a-f]{7} line", raw[i - 1]), (line, raw[i - 1])


def test_the_fake_expects_zoo_a16_to_fail_on_dfc_530_and_residual_a16_to_build(fake_dfc, calib_bundle, tmp_path):
    """With the fake's default DFC 5.3.0 behaviour (thread 19530: a16 convs fail with a "nan
    exponent"), zoo-a16 steps down and residual-a16 builds as the first attempt."""
    import shutil

    other = tmp_path / "other"
    shutil.copytree(calib_bundle, other)
    zoo, _ = _build(calib_bundle, precision="zoo-a16")
    assert [a.profile for a in zoo.attempts] == ["zoo-a16", "a8"]
    assert zoo.attempts[0].failure["exception"] == "AccelerasNanExponentError"
    default, lines = _build(other)
    assert [a.profile for a in default.attempts] == ["residual-a16"] and default.attempts[0].compile == "ok"
    assert default.entry.extra["precision"]["name"] == "residual-a16"
    # the build records, and says, which HailoRT its HEF needs
    assert default.entry.extra["dfc_version"] == "5.3.0+fake"
    assert default.entry.extra["hailort_pair"]["release"] == "5.3"
    assert any("the HEF will need HailoRT 5.3.x" in ln and "hailortcli --version" in ln for ln in lines)


_CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, {fakes!r})
from hailo_sdk_client import client_runner

def stuck(self, calib_data, *a, **k):
    Path({signal!r}).write_text("in optimize")
    time.sleep(300)

client_runner.ClientRunner.optimize = stuck
from hefsearch.compile.hef.build import build_hef
from hefsearch.compile.hef.plan import HefOptions
build_hef({bundle!r}, HefOptions(hw_arch="hailo10h", report=False), say=print)
"""


def test_a_rung_killed_by_sigkill_in_optimize_counts_as_failed_and_steps_down(fake_dfc, calib_bundle, tmp_path):
    """A child process runs compile hef; its (fake) optimize() of the first rung never returns and
    the child is killed with SIGKILL, as the kernel's OOM killer would. The next run finds the
    unfinished attempt, says it ended without a result, counts it as failed and steps down to the
    report's 8-bit script without running that rung again."""
    flag = tmp_path / "in-optimize"
    code = textwrap.dedent(_CHILD).format(fakes=str(FAKES), signal=str(flag), bundle=str(calib_bundle))
    child = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while not flag.exists():
            assert child.poll() is None, child.stdout.read().decode(errors="replace")
            assert time.monotonic() < deadline, "the child never reached optimize()"
            time.sleep(0.2)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    (marker,) = _work(calib_bundle).glob("running-*.json")
    left = json.loads(marker.read_text())
    assert (left["stage"], left["profile"], left["pid"]) == ("optimize", "residual-a16", child.pid)

    fake_dfc.CALLS.clear()
    result, lines = _build(calib_bundle)
    assert [a.profile for a in result.attempts] == ["residual-a16", "a8"]
    first = result.attempts[0]
    assert first.failure["exception"] == "UnfinishedAttempt" and first.failure["stage"] == "optimize"
    assert "ended without a result" in first.error and "out of memory?" in first.error
    assert any("ended without a result" in ln and "out of memory?" in ln for ln in lines)
    assert fake_dfc.CALLS.count("optimize") == 1  # the a8 rung only: the killed rung is not run again
    assert script_commands(result.model_script.read_text()) == REPORT_LINES
    assert not list(_work(calib_bundle).glob("running-*.json"))
    report = json.loads((_work(calib_bundle) / "build-report.json").read_text())
    assert report["result"] == "ok" and report["attempts"][0]["failure"]["exception"] == "UnfinishedAttempt"


def test_an_unfinished_compile_counts_too_and_a_python_failure_leaves_no_marker(fake_dfc, calib_bundle):
    """compile() that never came back (its marker left, the optimised model kept) is a failure of
    the compile stage on the next run; an ordinary exception clears its marker as it goes."""
    from hefsearch.compile.hef.build_record import mark_running

    fake_dfc.ClientRunner.FAIL_A16_ON = "any"
    first, _ = _build(calib_bundle)  # residual-a16 fails in compile(), a Python exception
    assert first.attempts[0].failure["stage"] == "compile" and not list(_work(calib_bundle).glob("running-*.json"))
    key = re.match(r"model-(\w+)\.alls", first.attempts[0].model_script).group(1)
    mark_running(_work(calib_bundle), key, "compile", "residual-a16")  # as a killed compile() leaves it
    state = json.loads((_work(calib_bundle) / "state.json").read_text())
    del state["walls"][key]  # forget the Python failure: only the marker tells
    (_work(calib_bundle) / "state.json").write_text(json.dumps(state))
    fake_dfc.ClientRunner.FAIL_A16_ON = None
    again, lines = _build(calib_bundle)
    assert [a.profile for a in again.attempts] == ["residual-a16", "a8"]
    assert again.attempts[0].failure["stage"] == "compile" and "ended without a result" in again.attempts[0].error
    assert any(ln.startswith("compile: the previous compile()") for ln in lines)


def test_a_rung_before_the_last_emulates_only_after_it_compiled(fake_dfc, calib_bundle):
    """The emulator report costs minutes: a 16-bit rung that fails in compile() spends none on it;
    the last rung (the report's script) still reports before compile(), so a failure there goes
    upstream with its numbers."""
    fake_dfc.ClientRunner.FAIL_A16_ON = "any"
    result, _ = _build(calib_bundle, report=True)
    calls = fake_dfc.CALLS
    first_compile = calls.index("compile")
    assert "infer" not in calls[:first_compile]  # residual-a16: compile() failed, nothing emulated
    second_optimize = [i for i, c in enumerate(calls) if c == "optimize"][1]
    second_compile = [i for i, c in enumerate(calls) if c == "compile"][1]
    assert second_optimize < calls.index("infer", second_optimize) < second_compile  # a8: report, then compile
    assert result.attempts[0].seconds.get("report") is None and result.attempts[1].seconds.get("report") is not None

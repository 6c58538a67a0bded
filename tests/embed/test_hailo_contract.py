"""The SDK-free HEF contract module, and import hygiene of the hailo code paths."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from hefsearch.embed.bundle import EncoderEntry
from hefsearch.embed.hef_contract import HefContract, OutputAssembler, StreamSpec, check_contract, to_tokens

SEQ, H = 6, 4


def _contract(**kw):
    entry = EncoderEntry("hef", "x.hef", SEQ, "hailo10h", extra={
        "inputs": {"embeddings": {"name": "n/input_layer1"}, "attention_mask": {"name": "n/input_layer2"}},
        "outputs": {"last_hidden_state": {"name": "n/output_layer1"}}, **kw})
    return HefContract.from_entry(entry, H)


INPUTS = [StreamSpec("n/input_layer1", (1, SEQ, H), "NHWC", "UINT8"),
          StreamSpec("n/input_layer2", (1, 1, SEQ), "NHWC", "UINT8")]


def _host_buffer(x: np.ndarray, order: str) -> tuple[np.ndarray, tuple]:
    """How HailoRT lays out a [SEQ, H] frame on the host for each order (batch of 1). NHCW is a
    device order HailoRT does not use host-side: such a stream's host buffer is NHWC (hailort.h)."""
    if order in ("NHWC", "FCR", "F8CR", "NHCW"):
        return x.reshape(1, 1, SEQ, H), (1, SEQ, H)
    if order == "NCHW":
        return x.reshape(1, SEQ, H).transpose(2, 0, 1).reshape(1, H, 1, SEQ), (1, SEQ, H)
    if order == "NC":
        return x.reshape(1, SEQ * H), (SEQ * H,)
    raise AssertionError(order)


@pytest.mark.parametrize("order", ["NHWC", "FCR", "F8CR", "NHCW", "NCHW", "NC"])
def test_every_order_reads_back_the_same_tokens(order):
    x = np.arange(SEQ * H, dtype=np.float32).reshape(SEQ, H)
    buf, shape = _host_buffer(x, order)
    spec = StreamSpec("n/output_layer1", shape, order, "FLOAT32")
    check = check_contract(_contract(), INPUTS, [spec], ["n/output_layer1"])
    assert check.ok, check.problems
    np.testing.assert_array_equal(OutputAssembler(check)({spec.name: buf})[0], x)


def test_uint8_is_dequantised_per_tensor_and_per_channel():
    q = np.array([[0, 10, 200, 255]] * SEQ, dtype=np.uint8).reshape(1, 1, SEQ, H)
    one = StreamSpec("o", (1, SEQ, H), "FCR", "UINT8", ((0.5, 10.0),))
    np.testing.assert_allclose(to_tokens(q, one, SEQ, H)[0, 0], [-5.0, 0.0, 95.0, 122.5])
    per_ch = StreamSpec("o", (1, SEQ, H), "FCR", "UINT8", ((1.0, 0.0), (2.0, 0.0), (0.5, 100.0), (1.0, 255.0)))
    np.testing.assert_allclose(to_tokens(q, per_ch, SEQ, H)[0, 0], [0.0, 20.0, 50.0, 0.0])


def test_split_outputs_concatenate_in_hailort_order():
    x = np.arange(SEQ * H, dtype=np.float32).reshape(SEQ, H)
    a = StreamSpec("n/output_layer2", (1, SEQ, 1), "NHWC", "FLOAT32")
    b = StreamSpec("n/output_layer1", (1, SEQ, 3), "NHWC", "FLOAT32")
    contract = _contract(outputs={"last_hidden_state": {"names": ["n/output_layer2", "n/output_layer1"]}})
    check = check_contract(contract, INPUTS, [b, a], ["n/output_layer2", "n/output_layer1"])
    assert check.ok and check.concat == "channels"
    got = OutputAssembler(check)({"n/output_layer2": x[:, :1].reshape(1, 1, SEQ, 1).copy(),
                                  "n/output_layer1": x[:, 1:].reshape(1, 1, SEQ, 3).copy()})
    np.testing.assert_array_equal(got[0], x)


def test_problems_name_the_mismatch():
    bad_in = [INPUTS[0], StreamSpec("n/input_layer2", (16, 8, 1536), "NHWC", "UINT8")]  # the zoo's tiled mask
    out = StreamSpec("n/output_layer1", (1, SEQ, H), "HAILO_NMS_BY_CLASS", "FLOAT32")
    check = check_contract(_contract(), bad_in, [out], None)
    text = "\n".join(check.problems)
    assert "input attention_mask (n/input_layer2): the HEF has shape [16, 8, 1536] = 196608 values" in text
    assert "the host sends 6 (keys01 layout" in text
    assert "format order HAILO_NMS_BY_CLASS is not a dense tensor layout" in text
    # HailoRT binds inputs by name: a different input order is a note, not a problem
    wrong_order = check_contract(_contract(), list(reversed(INPUTS)), [StreamSpec("n/output_layer1", (1, SEQ, H),
                                                                                   "FCR", "FLOAT32")], None)
    assert wrong_order.ok, wrong_order.problems
    assert wrong_order.embeddings.name == "n/input_layer1"
    assert any(n.startswith("input order") for n in wrong_order.notes)


def test_without_names_inputs_are_found_by_size():
    entry = EncoderEntry("hef", "x.hef", SEQ, "hailo10h", extra={})
    check = check_contract(HefContract.from_entry(entry, H), INPUTS,
                           [StreamSpec("n/output_layer1", (1, SEQ, H), "FCR", "FLOAT32")], None)
    assert check.ok and check.embeddings.name == "n/input_layer1"
    assert any("identified 'n/input_layer2' by its size (6 values)" in n for n in check.notes)


def test_a_folded_input_is_fed_row_major_and_a_wrong_count_is_refused():
    from hefsearch.embed.hef_contract import to_stream

    folded = [StreamSpec("n/input_layer1", (2, 3, H), "NHWC", "UINT8"), INPUTS[1]]  # 6 tokens as 2x3
    out = [StreamSpec("n/o", (1, SEQ, H), "FCR", "FLOAT32")]
    check = check_contract(_contract(), folded, out, None)
    assert check.ok, check.problems
    assert any("input embeddings (n/input_layer1): folded to [2, 3, 4] by the compiler's automatic spatial reshape"
               in n for n in check.notes)
    x = np.arange(2 * SEQ * H, dtype=np.float32).reshape(2, SEQ, H)
    buf = to_stream(x, check.embeddings)
    assert buf.shape == (2, 2, 3, H) and buf.flags.c_contiguous
    np.testing.assert_array_equal(buf.reshape(2, SEQ, H), x)
    wrong = [StreamSpec("n/input_layer1", (2, 2, H), "NHWC", "UINT8"), INPUTS[1]]
    check = check_contract(_contract(), wrong, out, None)
    assert check.problems == ["input embeddings (n/input_layer1): the HEF has shape [2, 2, 4] = 16 values; the host "
                              "sends 24 (6 tokens x 4 channels, SEQ 6, H 4)"]


@pytest.mark.parametrize("stream", ["n/input_layer1", "n/input_layer2", "n/o"])
def test_a_transposed_stream_is_refused(stream):
    from dataclasses import replace

    out = StreamSpec("n/o", (1, SEQ, H), "FCR", "FLOAT32")
    ins = [replace(s, flags="TRANSPOSED") if s.name == stream else s for s in INPUTS]
    outs = [replace(out, flags="TRANSPOSED") if out.name == stream else out]
    check = check_contract(_contract(), ins, outs, None)
    (problem,) = check.problems
    assert stream in problem and "FormatFlags.TRANSPOSED" in problem


def test_format_flags_are_read_from_enums_and_plain_ints():
    from types import SimpleNamespace

    from hefsearch.embed.hef_file import flags_name

    class Flags:  # a pybind11 enum has a name
        name = "TRANSPOSED"

    assert flags_name(SimpleNamespace(flags=Flags())) == "TRANSPOSED"
    assert flags_name(SimpleNamespace(flags=2)) == "TRANSPOSED"  # HAILO_FORMAT_FLAGS_TRANSPOSED = 1 << 1
    assert flags_name(SimpleNamespace(flags=0)) == "NONE"
    assert flags_name(SimpleNamespace()) == "NONE"  # a binding without flags


FORBIDDEN = ["torch", "transformers", "textual", "hailo_platform", "hailo_sdk_client", "onnx",
             "sentence_transformers"]


def test_hailo_code_paths_import_nothing_heavy_until_used(tmp_path):
    code = ("import sys, json\n"
            "import hefsearch.embed.backends.hailo, hefsearch.embed.hef_contract, hefsearch.embed.hef_file\n"
            "import hefsearch.embed.hailo_device, hefsearch.embed.hailo_streams\n"
            "import hefsearch.diagnose.doctor, hefsearch.evaluate.npu_verify\n"
            "import hefsearch.cli.cmd_doctor, hefsearch.cli.cmd_inspect\n"
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert not [m for m in FORBIDDEN if m in loaded]


def test_doctor_runs_without_torch_or_hailort(tmp_path):
    code = ("import sys, json\n"
            "from hefsearch.diagnose.doctor import run_doctor\n"
            "r = run_doctor(None, %r)\n"
            "print(json.dumps({'mods': sorted(sys.modules), 'names': [c.name for c in r.checks]}))"
            % str(tmp_path / "nolib"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert not [m for m in ("torch", "transformers", "textual") if m in data["mods"]]
    assert data["names"][:5] == ["python", "packages", "CPU encoder", "OCR", "HailoRT"]

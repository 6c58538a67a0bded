"""Which two spaces the compare view (TUI, web) sets side by side, and their labels
(app/spaces.py): an NPU space first, else the CPU int8 one, against FP32; neutral against neutral."""

from __future__ import annotations

from dataclasses import dataclass

from hefsearch.app.spaces import pick_compare_spaces, space_label


@dataclass
class _Info:
    name: str
    kind: str
    label: str = ""


def test_compare_view_takes_npu_spaces_first_then_cpu_int8():
    fp32, int8 = _Info("cpu-fp32", "cpu-fp32"), _Info("cpu-int8", "cpu-int8")
    assert pick_compare_spaces([fp32, int8]) == ("cpu-int8", "cpu-fp32")
    assert pick_compare_spaces([int8, _Info("npu-sim-a8", "npu-sim"), fp32]) == ("npu-sim-a8", "cpu-fp32")
    assert pick_compare_spaces([int8]) is None
    assert space_label(int8) == "CPU int8" and "NPU" not in space_label(int8)


def test_compare_view_sets_the_neutral_spaces_side_by_side():
    """A multilingual library searches language-neutral copies: the compare view shows the
    NPU's neutral ranking beside FP32's neutral one (not beside plain FP32)."""
    fp32, npu = _Info("cpu-fp32", "cpu-fp32"), _Info("npu-sim-a8", "npu-sim")
    fp32n, npun = _Info("cpu-fp32-neutral", "cpu-fp32"), _Info("npu-sim-a8-neutral", "npu-sim")
    assert pick_compare_spaces([fp32, npu, fp32n, npun]) == ("npu-sim-a8-neutral", "cpu-fp32-neutral")
    assert pick_compare_spaces([npun, fp32]) == ("npu-sim-a8-neutral", "cpu-fp32")  # no neutral FP32
    assert pick_compare_spaces([npu, fp32, fp32n]) == ("npu-sim-a8", "cpu-fp32")  # no neutral NPU space

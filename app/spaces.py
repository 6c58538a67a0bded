"""Which vector spaces a comparison sets side by side, and what a person calls the device
behind a space: shared by the TUI's compare view and the server's ``/compare`` (the web page)."""

from __future__ import annotations

from typing import Iterable, Sequence

from hefsearch.embed import space_names
from hefsearch.embed.post_transform import LanguageNeutral
from hefsearch.embed.space_names import FP32_SPACE


def compare_fix(spaces: Sequence[str], library_arg: str | None) -> str:
    """The command that gives a library what the compare view needs: the FP32 space next to a
    quantised one, or a quantised space (an 8-bit simulation) next to FP32."""
    lib = f" --library {library_arg}" if library_arg else ""
    if FP32_SPACE not in spaces:
        return f"hefsearch index --also-fp32{lib}"
    return (f"hefsearch compile calib BUNDLE --from FOLDER && hefsearch compile sim BUNDLE && "
            f"hefsearch index --backend npu-sim{lib}")


def _kinds(info) -> tuple[str, str]:
    """(recorded kind, kind read from the name): a space counts as what either says."""
    return info.kind or "", space_names.kind_of(info.name or "")


def is_quantised_space(info) -> bool:
    """A space the compare view sets beside FP32: an NPU space or the int8 CPU space."""
    return any(space_names.is_quantised(k) for k in _kinds(info) if k)


def is_fp32_space(info) -> bool:
    return info.name == FP32_SPACE or info.kind == FP32_SPACE


def pick_compare_spaces(spaces: Iterable) -> tuple[str, str] | None:
    """(quantised space, FP32 space) when the library has both; a real HEF space wins over a
    simulation, which wins over CPU int8; language-neutral copies of both win over the plain
    spaces. None when the compare view has nothing to compare."""
    spaces = list(spaces)
    fp32 = next((s.name for s in spaces if s.name == FP32_SPACE), None) or next(
        (s.name for s in spaces if is_fp32_space(s)), None)
    others = [s for s in spaces if is_quantised_space(s)]
    others.sort(key=lambda s: (min(space_names.compare_order(k) for k in _kinds(s) if k), s.name))
    if fp32 is None or not others:
        return None
    # language-neutral copies on both sides (what a multilingual library searches by default):
    # the NPU's neutral ranking beside FP32's neutral ranking
    suffix = LanguageNeutral.space_suffix
    if any(s.name == FP32_SPACE + suffix for s in spaces):
        for s in others:
            if s.name.endswith(suffix):
                return s.name, FP32_SPACE + suffix
    return others[0].name, fp32


def space_label(info) -> str:
    """What a person calls the device behind a space: "Hailo-10H", "CPU FP32", ..."""
    if info.label:
        return info.label
    if is_fp32_space(info):
        return "CPU FP32"
    kind = space_names.kind_of(info.name, info.kind)
    if kind == space_names.NPU_SIM:
        return "NPU simulation"
    if kind == space_names.HEF:
        return "Hailo NPU"
    if kind == space_names.CPU_INT8:
        return "CPU int8"
    return info.kind or info.name

"""Vector-space kinds and names: the one module that knows them.

A *space* holds the vectors of one encoder arithmetic; vectors of two spaces never mix (the
library refuses them by fingerprint). Its *kind* says which family of backend made it:

- ``cpu-fp32``: the FP32 body on ONNX Runtime, the reference every other space is measured
  against and re-ranked with;
- ``cpu-int8``: int8 weights on ONNX Runtime (a CPU trade of quality for speed, never an NPU);
- ``npu-sim``: an 8-bit NPU simulation on ONNX Runtime (never stands for a HEF);
- ``hef``: a HEF on a Hailo NPU.

Its *name* is what a library stores it under: the kind itself, except for a simulation, which is
named per profile (``npu-sim-a8``) because one bundle can carry several. Every kind but FP32 is
*quantised*: its search re-ranks with FP32 vectors, ``bench quality`` and the TUI compare view
measure it against FP32. Only ``hef`` and ``npu-sim`` are *NPU* spaces.

Plain strings on purpose: kinds and names are stored in libraries and written in manifests, so
they must not change; this module only stops them being spelled (and tested) in many places.
"""

from __future__ import annotations

FP32 = "cpu-fp32"
CPU_INT8 = "cpu-int8"
NPU_SIM = "npu-sim"
HEF = "hef"

#: the space every library can have and every other space is compared with
FP32_SPACE = FP32
#: a space's language-neutral copy is named SPACE + this (embed/post_transform.LanguageNeutral)
NEUTRAL_SUFFIX = "-neutral"
#: kinds made by an NPU or its simulation, real hardware first
NPU_KINDS: tuple[str, ...] = (HEF, NPU_SIM)
#: kinds whose arithmetic is not FP32's; NPU kinds first (the order the compare view prefers)
QUANTISED_KINDS: tuple[str, ...] = (*NPU_KINDS, CPU_INT8)


def space_name(kind: str, profile: str | None = None) -> str:
    """The name a library keeps a space under: ``kind``, or ``kind-profile`` ("npu-sim-a8")."""
    return f"{kind}-{profile}" if profile else kind


def kind_of(name: str, kind: str | None = None) -> str:
    """The kind of a space: the recorded ``kind`` when known, else read from the name."""
    if kind:
        return kind
    if name.startswith(NPU_SIM):
        return NPU_SIM
    return name


def is_npu(kind: str) -> bool:
    """An NPU space (a HEF, or a simulation of one): labels say "NPU" only for these."""
    return kind_of(kind.lower()) in NPU_KINDS


def is_quantised(kind: str) -> bool:
    """Not FP32: re-ranked with FP32 vectors by default, measured against FP32."""
    return kind_of(kind.lower()) in QUANTISED_KINDS


def compare_order(kind: str) -> int:
    """Rank of a quantised kind when choosing what to compare with FP32: a HEF, then a
    simulation, then CPU int8 (lower is preferred)."""
    k = kind_of(kind.lower())
    return QUANTISED_KINDS.index(k) if k in QUANTISED_KINDS else len(QUANTISED_KINDS)

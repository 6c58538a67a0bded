"""The backend contract: the only step that differs between CPU, NPU and simulations.

A backend takes the host's embedding sum E [N,S,H] float32 and the 0/1 mask [N,S] and
returns the encoder body's last hidden state [N,S,H] float32. Tokenising, the gather-sum,
pooling and normalisation live in :mod:`hefsearch.embed.host`, shared by all backends.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Backend(Protocol):
    #: registry name ("cpu", "hailo", "npu-sim", ...)
    name: str
    #: what a person sees, e.g. "CPU FP32" or "Hailo-10H"
    label: str
    #: the vector-space kind it produces ("cpu-fp32", "hef", "npu-sim"); spaces never mix
    space_kind: str
    #: fixed sequence lengths it accepts (a HEF's SEQ), or None when any S works
    seq_lens: tuple[int, ...] | None
    #: frames per call that keep it busy
    batch_size: int

    def fingerprint_parts(self) -> dict:
        """What identifies its arithmetic: encoder kind, file sha256, precision, ..."""

    def run(self, embeddings: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """E [N,S,H] float32, mask [N,S] int64 -> last hidden state [N,S,H] float32."""

    def close(self) -> None:
        """Release sessions and devices. Safe to call twice."""

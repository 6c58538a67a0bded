"""The ``cpu`` backend: the bundle's FP32 encoder body on ONNX Runtime. The reference."""

from __future__ import annotations

from .. import space_names
from ..bundle import Bundle
from hefsearch.base.errors import BackendUnavailable
from .onnx_body import OnnxBodyBackend, make_session

__all__ = ["CpuBackend", "make_session"]


class CpuBackend(OnnxBodyBackend):
    name = "cpu"
    label = "CPU FP32"
    space_kind = space_names.FP32
    fusable = True

    def __init__(self, bundle: Bundle, threads: int | None = None, batch_size: int = 32,
                 providers=None, bulk: bool = False, **_):
        entries = bundle.encoder_entries("onnx")
        if not entries:
            raise BackendUnavailable(
                f"Bundle {bundle.path} has no FP32 ONNX encoder body.", "Re-export the bundle."
            )
        super().__init__(bundle, entries[0], threads=threads, batch_size=batch_size, providers=providers, bulk=bulk)

    @classmethod
    def available(cls, bundle: Bundle) -> tuple[bool, str]:
        return True, "the FP32 reference runs on any CPU"

    def fingerprint_parts(self) -> dict:
        return {"encoder": "onnx-fp32", "file_sha256": self.file_sha256}

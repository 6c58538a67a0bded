"""The ``cpu-int8`` backend: the bundle's body with int8 weights on ONNX Runtime.

It runs ``encoder.cpu-int8.onnx`` from ``hefsearch compile cpu-int8`` (see
:mod:`hefsearch.compile.cpu_int8` for the recipe and why). Faster than FP32 on CPUs with int8
dot products, at a small, measured cost in quality; its vectors live in their own space,
``cpu-int8``, never mixed with ``cpu-fp32``, and like an NPU space it is quantised: re-ranked
with FP32 vectors, measured by ``bench quality`` and the TUI compare view. It is never called
an NPU. ``auto`` never picks it: it is a trade a person chooses.
"""

from __future__ import annotations

from .. import space_names
from ..bundle import Bundle
from hefsearch.base.errors import BackendUnavailable
from .onnx_body import OnnxBodyBackend

KIND = space_names.CPU_INT8


class CpuInt8Backend(OnnxBodyBackend):
    name = "cpu-int8"
    label = "CPU int8"
    space_kind = KIND
    closed_message = "The int8 CPU encoder was closed."

    def __init__(self, bundle: Bundle, threads: int | None = None, batch_size: int = 32,
                 providers=None, bulk: bool = False, **_):
        entries = bundle.encoder_entries(KIND)
        if not entries:
            raise BackendUnavailable(f"Bundle {bundle.path} has no int8 CPU encoder.",
                                     f"Build one with: hefsearch compile cpu-int8 {bundle.path}")
        super().__init__(bundle, entries[0], threads=threads, batch_size=batch_size, providers=providers,
                         bulk=bulk)

    def describe(self) -> dict:
        x = self.entry.extra
        return {"label": self.label, "file": self.entry.file, "method": x.get("method"),
                "weights": x.get("weights"), "activations": x.get("activations"), "check": x.get("check")}

    def fingerprint_parts(self) -> dict:
        return {"encoder": KIND, "file_sha256": self.file_sha256}

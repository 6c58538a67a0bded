"""The ``npu-sim`` backend: an 8-bit NPU *simulation* of the encoder body on ONNX Runtime.

It runs ``encoder.npu-sim.<name>.onnx``, the fake-quantised body that ``hefsearch compile sim``
wrote into the bundle (per-channel integer weights, per-tensor integer activations at the sites
an NPU quantises, the precision profile and mask handling of ``compile hef``). It lets anyone
see what a build choice would cost in retrieval quality before compiling, on any CPU, without
the ``onnx`` package. It is labelled as a simulation everywhere and never stands for a HEF:
its space kind is ``npu-sim``, separate from ``hef`` and ``cpu-fp32``.

Options (``Encoder.open(bundle, backend="npu-sim", profile="a8")``):

- ``profile``: which simulation of the bundle to run, by its name (``a8``, ``balanced``,
  ``a8-additive10000``, ...); default: ``$HEFSEARCH_SIM``, else the only one, else ``balanced``.

A library keeps its vectors in a space named ``npu-sim-<name>`` (``space_name``), and records
``{"profile": name}`` (``space_opts``) so a search reopens the same simulation.
"""

from __future__ import annotations


from hefsearch.base import settings
from .. import space_names
from ..bundle import Bundle, EncoderEntry
from hefsearch.base.errors import BackendUnavailable
from .onnx_body import OnnxBodyBackend

KIND = space_names.NPU_SIM


def sim_entries(bundle: Bundle) -> list[EncoderEntry]:
    return bundle.encoder_entries(KIND)


def pick_entry(bundle: Bundle, profile: str | None) -> EncoderEntry:
    entries = sim_entries(bundle)
    profile = profile or settings.SIM.value() or None
    names = [e.extra.get("name", e.file) for e in entries]
    hint_build = f"Build one with: hefsearch compile sim {bundle.path} --precision {profile or 'balanced'}"
    if not entries:
        raise BackendUnavailable(f"Bundle {bundle.path} has no NPU simulation.", hint_build)
    if profile is None:
        if len(entries) == 1:
            return entries[0]
        profile = "balanced"
    for e, name in zip(entries, names):
        if name == profile:
            return e
    raise BackendUnavailable(
        f"Bundle {bundle.path} has no NPU simulation named {profile!r} (it has: {', '.join(names)}).",
        hint_build,
    )


class NpuSimBackend(OnnxBodyBackend):
    name = "npu-sim"
    space_kind = KIND
    closed_message = "The NPU simulation was closed."

    def __init__(self, bundle: Bundle, profile: str | None = None, threads: int | None = None,
                 batch_size: int = 32, providers=None, **_):
        entry = pick_entry(bundle, profile)
        self.sim_name = entry.extra.get("name", entry.file)
        #: "NPU simulation (a8)": never shown as a HEF
        self.label = entry.extra.get("label") or f"NPU simulation ({self.sim_name})"
        self.precision = entry.extra.get("precision", {})
        self.mask = entry.extra.get("mask", {})
        super().__init__(bundle, entry, threads=threads, batch_size=batch_size, providers=providers)

    @property
    def space_opts(self) -> dict:
        """How a library reopens this simulation; it also names the space ``npu-sim-<name>``."""
        return {"profile": self.sim_name}

    @classmethod
    def available(cls, bundle: Bundle) -> tuple[bool, str]:
        """Never picked by ``auto``: a simulation is something a person asks for."""
        n = len(sim_entries(bundle))
        return False, f"npu-sim is a simulation, chosen only by name ({n} in the bundle)"

    def describe(self) -> dict:
        """The build configuration, for reports next to the numbers."""
        x = self.entry.extra
        return {
            "label": self.label,
            "name": self.sim_name,
            "file": self.entry.file,
            "precision": self.precision,
            "mask": self.mask,
            "calibration": x.get("calibration"),
            "weights": x.get("weights"),
            "activations": x.get("activations"),
        }

    def fingerprint_parts(self) -> dict:
        return {
            "encoder": KIND,
            "file_sha256": self.file_sha256,
            "precision": self.precision.get("bits"),
            "mask": self.mask,
        }

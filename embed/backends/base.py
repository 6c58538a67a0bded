"""The backend contract: the only step that differs between CPU, NPU and simulations.

A backend takes the host's embedding sum E [N,S,H] float32 and the 0/1 mask [N,S] and
returns the encoder body's last hidden state [N,S,H] float32. Tokenising, the gather-sum,
pooling and normalisation live in :mod:`hefsearch.embed.host`, shared by all backends.

:class:`Backend` is an abstract base in the manner of llm's ``EmbeddingModel``: a subclass sets
its ``name``, ``label`` and ``space_kind`` and implements ``fingerprint_parts``, ``run`` and
``close``; the base derives everything callers read about the space it fills (name, options a
library records, quantised or not, the manifest entries it runs, a description for reports),
so no caller probes a backend with ``getattr``. The three that run one ONNX body on ONNX
Runtime (``cpu``, ``cpu-int8``, ``npu-sim``) share :class:`~.onnx_body.OnnxBodyBackend`.

Adding a backend: one module here with its subclass, plus a line in ``REGISTRY``
(:mod:`hefsearch.embed.backends`); a new space kind also goes into :mod:`hefsearch.embed.space_names`.
A backend that runs on a device says so in two class-level declarations, which ``index --ray``
reads instead of a list of backend names: ``ray_resource`` (the Ray resource an actor takes one
of) and ``device_ids()`` (the devices here, one per actor).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from .. import space_names

if TYPE_CHECKING:  # pragma: no cover
    from ..bundle import Bundle, EncoderEntry


class Backend(ABC):
    #: registry name ("cpu", "hailo", "npu-sim", ...)
    name: ClassVar[str]
    #: what a person sees, e.g. "CPU FP32" or "Hailo-10H"
    label: str = ""
    #: the vector-space kind it produces (see space_names); spaces never mix
    space_kind: ClassVar[str]
    #: fixed sequence lengths it accepts (a HEF's SEQ), or None when any S works
    seq_lens: tuple[int, ...] | None = None
    #: frames per call that keep it busy
    batch_size: int = 32
    #: the manifest entry of the encoder body it runs (None: several, see encoder_entries)
    entry: "EncoderEntry | None" = None
    #: a space name set by the caller (a second space of the same backend); None: the default
    _space_name: str | None = None
    #: what a Ray node must offer one actor of this backend: a custom resource it takes one unit
    #: of, one per device (``ray start --resources='{"hailo": N}'`` for N chips), or None: CPUs
    #: only (``index --ray`` then starts one actor per free CPU)
    ray_resource: ClassVar[str | None] = None

    @classmethod
    def open(cls, bundle: "Bundle", opts: dict) -> "Backend":
        """The backend for a bundle, given the backend options (``Encoder.open`` keywords, or a
        space's stored ``backend_opts``); options of other backends are ignored."""
        return cls(bundle, **opts)

    @classmethod
    def available(cls, bundle: "Bundle") -> tuple[bool, str]:
        """For ``auto``: (usable here, why), without side effects. Only accelerators say yes."""
        return False, f"{cls.name} is chosen only by name"

    @classmethod
    def device_ids(cls) -> list[str]:
        """This machine's devices that ``ray_resource`` counts, sorted: the Ray actor of rank k on
        a node opens the k-th, passed as the ``device_id`` option. Only a backend with a
        ``ray_resource`` has any."""
        return []

    # -- the space it fills ----------------------------------------------------------------
    @property
    def space_name(self) -> str:
        """The space a library keeps its vectors in: the kind, or ``npu-sim-<profile>``."""
        return self._space_name or space_names.space_name(self.space_kind, self.space_opts.get("profile"))

    @space_name.setter
    def space_name(self, name: str) -> None:
        self._space_name = name

    @property
    def space_opts(self) -> dict:
        """Backend options a library records with the space, so a search reopens the same one."""
        return {}

    @property
    def is_quantised(self) -> bool:
        """Not FP32: searches re-rank with FP32 vectors; bench and compare measure it."""
        return space_names.is_quantised(self.space_kind)

    @property
    def is_npu(self) -> bool:
        return space_names.is_npu(self.space_kind)

    def encoder_entries(self) -> list["EncoderEntry"]:
        """The manifest entries of the encoder bodies it runs (one, or one per SEQ)."""
        return [self.entry] if self.entry is not None else []

    def describe(self) -> dict:
        """The build configuration, for reports next to the numbers."""
        return {"label": self.label}

    # -- what each backend does its own way ------------------------------------------------
    @abstractmethod
    def fingerprint_parts(self) -> dict:
        """What identifies its arithmetic: encoder kind, file sha256, precision, ..."""

    @abstractmethod
    def run(self, embeddings: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """E [N,S,H] float32, mask [N,S] int64 -> last hidden state [N,S,H] float32."""

    #: set by :meth:`stop_running`, cleared when an ``Encoder.encode`` begins
    stopping = False

    def stop_running(self) -> None:
        """Ask a :meth:`run` in flight in another thread to end early (it then raises), and
        the runs after it until ``stopping`` is cleared; a backend that cannot cut a run
        short lets it finish."""
        self.stopping = True

    @abstractmethod
    def close(self) -> None:
        """Release sessions and devices. Safe to call twice."""


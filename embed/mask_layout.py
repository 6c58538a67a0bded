"""What a compiled HEF receives as its attention-mask input, and how the host builds it (numpy only).

Three HEF mask modes (``HEF_MASK_MODES``), each following one public recipe (sources in
docs/hailo-facts.md):

- ``keys01`` (the public Hailo-10H report on community.hailo.ai, DFC 5.3.0): ONNX [N, 1, 1, S]
  parsed NHWC with ``set_input_mask_to_softmax()``: the raw 0/1 token mask, applied inside every
  softmax. hefsearch cuts the body after the mask ``/Mul`` (the report starts at it; no public
  source shows that exact cut). Layout ``keys01``: one 0/1 value per key.
- ``scores01`` (the model zoo's all_minilm_l6_v2, Hailo-8/8L, DFC 3.34): ONNX [N, heads, S, S]
  parsed NGWC, with ``set_input_mask_to_softmax()``. Layout ``scores``: one row per query token,
  ``heads x S`` columns (column ``h * S + k`` is key ``k`` of head ``h``) of 0/1 values; 128
  tokens x 12 heads is the zoo's 16x8x1536 once the allocator folds the rows.
- ``additive`` (the model zoo's bert_base_uncased): the bias ``(1 - mask) * mask_value``, one
  value per key (ONNX [N, 1, 1, S], parsed [1, S, 1]); no mask command. Layout ``keys``.

A manifest entry without ``mask_input`` (HEFs from before these recipes) is read as ``keys01``.
``compile hef`` records the layout in the HEF's manifest entry, so the runtime builds exactly
what the HEF expects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LAYOUTS = ("scores", "keys", "keys01")


@dataclass(frozen=True)
class HefMaskMode:
    """One way a HEF can take the attention mask, and the public recipe it follows."""

    name: str
    layout: str  # the MaskLayout the runtime builds
    softmax_command: bool  # the model script carries set_input_mask_to_softmax()
    source: str  # the public recipe it follows
    shown_on: str  # the chip and DFC line that recipe is shown to compile on

    @property
    def profile_mask(self) -> str:
        """The precision profile's mask arithmetic: inside softmax, or added to the 8-bit scores."""
        return "softmax" if self.softmax_command else "additive"


#: every HEF mask mode, by name (``compile hef --mask``)
HEF_MASK_MODES: dict[str, HefMaskMode] = {m.name: m for m in (
    HefMaskMode("keys01", "keys01", True,
                "the public Hailo-10H report (a user's, on the Hailo Community forum, community.hailo.ai): "
                "[N,1,1,S] NHWC, raw "
                "0/1 values, set_input_mask_to_softmax(); the report starts at the mask /Mul itself, hefsearch "
                "cuts after it (the input feeds the score Adds)",
                "Hailo-10H, DFC 5.3.0 (one user report; 8-bit, 13 contexts, 19.4 MB)"),
    HefMaskMode("scores01", "scores", True,
                "hailo_model_zoo all_minilm_l6_v2 (cfg/base/all_minilm.yaml, cfg/alls/generic/all_minilm_l6_v2.alls): "
                "masked_fill [N,heads,S,S] NGWC, 0/1 values, set_input_mask_to_softmax()",
                "Hailo-8/8L, DFC 3.34 (model zoo v2.19)"),
    HefMaskMode("additive", "keys", False,
                "hailo_model_zoo bert_base_uncased (cfg/networks/bert_base_uncased.yaml): the additive mask after "
                "the mask Mul, [N,1,1,S], no mask command",
                "Hailo-8/8L, DFC 3.33 (model zoo v2.18)"),
)}
#: older names still accepted: "softmax" was the score-shaped zoo recipe
MASK_MODE_ALIASES = {"softmax": "scores01"}


def hef_mask_mode(name: str) -> HefMaskMode:
    """The HEF mask mode ``name`` (or an alias); ValueError for an unknown one."""
    key = MASK_MODE_ALIASES.get(name, name)
    if key not in HEF_MASK_MODES:
        known = ", ".join(list(HEF_MASK_MODES) + list(MASK_MODE_ALIASES))
        raise ValueError(f"unknown mask mode {name!r} (known: {known})")
    return HEF_MASK_MODES[key]


@dataclass(frozen=True)
class MaskLayout:
    layout: str  # one of LAYOUTS
    seq_len: int
    heads: int = 1
    mask_value: float = -50.0

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"unknown mask layout {self.layout!r} (known: {', '.join(LAYOUTS)})")

    # -- description -----------------------------------------------------------------------
    @property
    def mode(self) -> str:
        """The precision profile's mask arithmetic this layout belongs to ("softmax" or "additive")."""
        return "additive" if self.layout == "keys" else "softmax"

    @property
    def hef_mode(self) -> str:
        """The HEF mask mode (``HEF_MASK_MODES``) this layout is built for."""
        return next(m.name for m in HEF_MASK_MODES.values() if m.layout == self.layout)

    @property
    def binary(self) -> bool:
        """True when the values are the 0/1 mask, False for the additive bias."""
        return self.layout != "keys"

    @property
    def value_pair(self) -> tuple[float, float]:
        """The only two values a frame holds: masked, then real token."""
        return (0.0, 1.0) if self.binary else (float(self.mask_value), 0.0)

    @property
    def logical_shape(self) -> tuple[int, int]:
        """(rows, columns) of one frame before any reshape to the stream's shape."""
        s = self.seq_len
        if self.layout == "scores":
            return (s, self.heads * s)
        if self.layout == "keys":
            return (s, 1)
        return (1, s)

    @property
    def parsed_shape(self) -> tuple[int, int, int]:
        """The per-frame (h, w, c) of the parsed network's input layer (before any fold)."""
        rows, cols = self.logical_shape
        if self.layout == "keys01":
            return (1, 1, self.seq_len)
        return (1, rows, cols)

    @property
    def size(self) -> int:
        rows, cols = self.logical_shape
        return rows * cols

    def describe(self) -> str:
        s = self.seq_len
        if self.layout == "scores":
            return (f"scores layout: {s} query rows x {self.heads} heads x {s} keys, 0/1 values "
                    "(set_input_mask_to_softmax)")
        if self.layout == "keys":
            return f"keys layout: {s} additive values (0 or {self.mask_value:g})"
        return f"keys01 layout: {s} raw 0/1 values, one per key (set_input_mask_to_softmax; fed to the score Adds)"

    def to_dict(self) -> dict:
        return {"layout": self.layout, "mode": self.mode, "hef_mode": self.hef_mode, "seq_len": self.seq_len, "heads": self.heads,
                "mask_value": self.mask_value, "values": "0/1" if self.binary else "additive",
                "shape": list(self.parsed_shape)}

    @classmethod
    def from_dict(cls, d: dict | None, seq_len: int, mask_value: float = -50.0) -> "MaskLayout":
        """The layout a manifest entry records; an entry without one is the legacy layout."""
        if not isinstance(d, dict) or d.get("layout") not in LAYOUTS:
            return cls("keys01", int(seq_len), 1, float(mask_value))
        return cls(str(d["layout"]), int(d.get("seq_len") or seq_len), int(d.get("heads") or 1),
                   float(d.get("mask_value", mask_value)))

    @classmethod
    def for_mode(cls, mode: str, seq_len: int, heads: int, mask_value: float) -> "MaskLayout":
        """The layout of a HEF mask mode (``keys01``, ``scores01``, ``additive``, or an alias)."""
        return cls(hef_mask_mode(mode).layout, int(seq_len), int(heads), float(mask_value))

    # -- building ---------------------------------------------------------------------------
    def values(self, mask: np.ndarray) -> np.ndarray:
        """Per-key values [N, S] float32 from the 0/1 token mask [N, S]."""
        m = np.asarray(mask, dtype=np.float32)
        if self.binary:
            return m
        return ((1.0 - m) * np.float32(self.mask_value)).astype(np.float32)

    def build(self, mask: np.ndarray, dtype=np.float32, encode=None, broadcast: bool = False) -> np.ndarray:
        """Frames [N, rows, cols] for the token mask [N, S] (S == seq_len).

        ``encode`` maps the per-key values to the stream's type (e.g. quantisation to uint8);
        it runs on the N x S values only, before the broadcast, so a score-shaped frame costs one
        memory copy and no arithmetic. ``broadcast=True`` returns the score layout as a read-only
        view whose query rows share one row in memory (for calibration sets, which would
        otherwise take gigabytes).
        """
        n, s = mask.shape
        if s != self.seq_len:
            raise ValueError(f"mask has {s} tokens; the HEF's mask layout is for {self.seq_len}")
        v = self.values(mask)
        v = encode(v) if encode is not None else v.astype(dtype, copy=False)
        rows, cols = self.logical_shape
        if self.layout != "scores":
            return v.reshape(n, rows, cols)
        # every query row and every head see the same key mask: column h * S + k is key k
        frames = np.broadcast_to(np.tile(v, (1, self.heads))[:, None, :], (n, rows, cols))
        return frames if broadcast else np.ascontiguousarray(frames)

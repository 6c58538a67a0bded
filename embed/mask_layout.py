"""What a compiled HEF receives as its attention-mask input, and how the host builds it.

Two layouts follow Hailo's public model-zoo recipes (docs/hailo-facts.md):

- ``scores`` (mask mode ``softmax``, the zoo's all_minilm_l6_v2): the tensor that is added to
  the attention scores, parsed from an ONNX input [N, heads, S, S] with format NGWC. One row
  per query token, ``heads x S`` columns (column ``h * S + k`` is key ``k`` of head ``h``);
  with ``set_input_mask_to_softmax()`` the values are the 0/1 token mask (the zoo's
  calibration record calls it ``multiplicative_mask``). 128 tokens x 12 heads gives the zoo's
  published 16x8x1536 after the allocator folds the 128 rows into 16x8.
- ``keys`` (mask mode ``additive``, the zoo's bert_base_uncased): the additive bias itself,
  ``(1 - mask) * mask_value``, one value per key (ONNX [N, 1, 1, S], parsed as [1, S, 1]).

``keys01`` is the layout of HEFs built before these recipes were followed (the raw 0/1 mask
[1, 1, S] through Sub/Mul inside the HEF); it is still read so such a bundle keeps working.

A layout is recorded in the HEF's manifest entry (``mask_input``) by ``compile hef`` so the
runtime builds exactly what the HEF expects. numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LAYOUTS = ("scores", "keys", "keys01")


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
        """The precision profile's mask mode this layout belongs to."""
        return "additive" if self.layout == "keys" else "softmax"

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
        return f"legacy layout: {s} raw 0/1 values"

    def to_dict(self) -> dict:
        return {"layout": self.layout, "mode": self.mode, "seq_len": self.seq_len, "heads": self.heads,
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
        return cls("scores" if mode == "softmax" else "keys", int(seq_len), int(heads), float(mask_value))

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

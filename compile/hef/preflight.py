"""Check calibration arrays against the parsed network before ``optimize()`` ever runs.

The DFC parses the body's 3-D ``embeddings`` [N,S,H] into a 4-D layer ``[-1,1,S,H]`` and the
mask into ``[-1,1,1,S]``. Calibration arrays of another rank do not fail at the call: they
crash ``optimize()`` deep inside LayerNorm decomposition with an ``IndexError`` (public report,
DFC 5.3.0), possibly hours into the run. This module reads the parsed input layers and refuses
anything that does not match, naming the layer, the expected and the given shape, and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hefsearch.base.errors import HefsearchError
from hefsearch.embed.mask_layout import MaskLayout

from .dfc_onnx import EMBEDDINGS, MASK

ROLES = (EMBEDDINGS, MASK)


class CalibrationMismatch(HefsearchError):
    """The calibration arrays do not fit the parsed network's input layers."""

    title = "calibration mismatch"


@dataclass(frozen=True)
class InputLayer:
    name: str  # the parsed layer name, as the calibration dict must be keyed
    role: str  # "embeddings" or "attention_mask"
    shape: tuple  # parsed input shape with the batch dim (-1 or 1) first

    @property
    def sample_shape(self) -> tuple:
        return tuple(self.shape[1:])

    def expected(self, n: int | str = "N") -> str:
        return "(" + ", ".join(str(d) for d in (n, *self.sample_shape)) + ")"


def input_layers(hn: dict) -> list[InputLayer]:
    """The parsed network's input layers with their role (by ONNX origin, else by order)."""
    raw = [(name, layer) for name, layer in hn["layers"].items() if layer.get("type") == "input_layer"]
    if len(raw) != len(ROLES):
        raise CalibrationMismatch(
            f"The parsed network has {len(raw)} input layers ({', '.join(n for n, _ in raw) or 'none'}); "
            f"hefsearch expects two: {EMBEDDINGS} and {MASK}.",
            "Re-parse from a bundle exported by 'hefsearch compile export' (delete the build folder).",
        )
    out, unassigned = [], []
    for name, layer in raw:
        origin = set(layer.get("original_names") or [])
        role = next((r for r in ROLES if r in origin), None)
        shape = tuple(int(d) for d in layer["input_shapes"][0])
        if role:
            out.append(InputLayer(name, role, shape))
        else:
            unassigned.append((name, shape))
    for (name, shape), role in zip(unassigned, [r for r in ROLES if r not in {x.role for x in out}]):
        out.append(InputLayer(name, role, shape))
    return sorted(out, key=lambda x: ROLES.index(x.role))


def calibration_dict(layers: list[InputLayer], embeddings: np.ndarray, mask: np.ndarray,
                     layout: MaskLayout) -> dict[str, np.ndarray]:
    """{parsed input-layer name: array}, the form ``optimize()`` takes for a two-input network.

    The stored set is compact (embeddings [N,1,SEQ,H], 0/1 mask [N,1,1,SEQ]); each array is
    laid out as the parsed layer holds it: the embeddings reshaped, the mask
    turned into the layout's values (0/1 or the additive bias) and, for the score layout,
    broadcast over the query rows without copying (a score-shaped mask is heads x SEQ values per
    token: 1024 rows at SEQ 256 and 12 heads would be 3 GB). Arrays of another rank are passed
    through untouched, for :func:`preflight` to refuse with the fix.
    """
    by_role = {EMBEDDINGS: embeddings, MASK: mask}
    out = {}
    for layer in layers:
        arr = by_role[layer.role]
        want = (arr.shape[0], *layer.sample_shape) if getattr(arr, "ndim", 0) else None
        if want is None or arr.ndim != len(layer.shape):
            out[layer.name] = arr
        elif layer.role == EMBEDDINGS:
            out[layer.name] = arr.reshape(want) if arr.size == int(np.prod(want)) else arr
        else:
            out[layer.name] = layout_mask(arr, layout, want)
    return out


def layout_mask(mask: np.ndarray, layout: MaskLayout, want: tuple) -> np.ndarray:
    """The stored 0/1 mask (any shape of N x SEQ values) as the parsed mask layer [N, ...]."""
    n = mask.shape[0]
    if mask.size != n * layout.seq_len:
        return mask  # preflight names the mismatch
    frames = layout.build(mask.reshape(n, layout.seq_len), broadcast=True)  # a view: rows share memory
    return frames.reshape(want) if frames.size == int(np.prod(want)) else mask


def _fix(layer: InputLayer) -> str:
    return (f"Rebuild the calibration with 'hefsearch compile calib BUNDLE --from YOUR_DOCS --seq-len "
            f"{layer.sample_shape[-1] if layer.role == MASK else layer.sample_shape[-2]}' "
            f"(it writes 4-D arrays), or reshape your array to {layer.expected()}.")


def _value_sample(arr: np.ndarray) -> np.ndarray:
    """All values, or for a large (e.g. broadcast score-shaped) mask one query row of each frame."""
    if arr.nbytes <= (256 << 20) or arr.ndim < 3:
        return arr.reshape(arr.shape[0], -1)
    return arr[(slice(None),) + (0,) * (arr.ndim - 2) + (slice(None),)]


def preflight(layers: list[InputLayer], calib: dict[str, np.ndarray], layout: MaskLayout) -> dict:
    """Raise :class:`CalibrationMismatch` on the first problem; return a small summary dict."""
    _check_keys(layers, calib)
    n_rows = set()
    for layer in layers:
        arr = calib[layer.name]
        _check_array(layer, arr, layout)
        n_rows.add(arr.shape[0])
    if len(n_rows) != 1:
        raise CalibrationMismatch(f"The calibration arrays have different row counts {sorted(n_rows)}.",
                                  "Rebuild the calibration with 'hefsearch compile calib'.")
    (n,) = n_rows
    if n == 0:
        raise CalibrationMismatch("The calibration set is empty.", "Rebuild it with 'hefsearch compile calib'.")
    return {"rows": int(n), "inputs": {layer.name: [int(d) for d in layer.shape] for layer in layers}}


def _check_keys(layers: list[InputLayer], calib: dict[str, np.ndarray]) -> None:
    """The calibration is keyed by exactly the parsed network's input layers."""
    names = {layer.name for layer in layers}
    given = set(calib)
    if given != names:
        missing, extra = sorted(names - given), sorted(given - names)
        raise CalibrationMismatch(
            f"The calibration set is keyed {sorted(given)}; the parsed network's input layers are "
            f"{sorted(names)} (missing {missing or 'none'}, unknown {extra or 'none'}).",
            "Key the calibration dict by the parsed input-layer names (hefsearch does this itself "
            "for calibration made by 'hefsearch compile calib').",
        )


def _check_array(layer: InputLayer, arr, layout: MaskLayout) -> None:
    """One input's calibration: a float32 numpy array of the layer's shape, finite; a mask's
    values those of its layout, every row with a real token."""
    what = f"Calibration for input layer '{layer.name}' ({layer.role})"
    if not isinstance(arr, np.ndarray):
        raise CalibrationMismatch(f"{what} is a {type(arr).__name__}, not a numpy array.", _fix(layer))
    if arr.ndim != len(layer.shape):
        raise CalibrationMismatch(
            f"{what} has shape {tuple(arr.shape)} (rank {arr.ndim}); the parsed network expects "
            f"{layer.expected(arr.shape[0] if arr.ndim else 'N')} (rank {len(layer.shape)}). The DFC turns the "
            f"body's {'3-D [N,S,H]' if layer.role == EMBEDDINGS else '[N,S]'} input into a 4-D layer, and "
            "optimize() would crash with an IndexError inside LayerNorm decomposition.",
            _fix(layer),
        )
    if tuple(arr.shape[1:]) != layer.sample_shape:
        raise CalibrationMismatch(
            f"{what} has shape {tuple(arr.shape)}; the parsed network expects {layer.expected(arr.shape[0])}.",
            _fix(layer),
        )
    if arr.dtype != np.float32:
        raise CalibrationMismatch(
            f"{what} is {arr.dtype}; the network takes float32.",
            "Convert it with arr.astype(np.float32), or rebuild it with 'hefsearch compile calib'.",
        )
    vals = _value_sample(arr)
    if not np.isfinite(vals).all():
        bad = int(vals.size - np.isfinite(vals).sum())
        raise CalibrationMismatch(f"{what} holds {bad} NaN or infinite values.",
                                  "Rebuild the calibration with 'hefsearch compile calib'.")
    if layer.role == MASK:
        _check_mask(what, vals, layout)


def _check_mask(what: str, vals: np.ndarray, layout: MaskLayout) -> None:
    binary = layout.binary
    allowed = (0.0, 1.0) if binary else (0.0, float(layout.mask_value))
    odd = ~np.isin(vals, allowed)
    if odd.any():
        why = ("With set_input_mask_to_softmax() the mask input is the 0/1 token mask, not an additive bias."
               if binary else f"In the additive mask mode the mask input is the bias: 0 or {allowed[1]:g}.")
        raise CalibrationMismatch(
            f"{what} holds values other than {allowed[0]:g} and {allowed[1]:g} (e.g. {vals[odd].flat[0]!r}). "
            + why, "Rebuild the calibration with 'hefsearch compile calib'.")
    real = (vals == 1.0) if binary else (vals == 0.0)
    empty = int((~real.any(axis=1)).sum())
    if empty:
        raise CalibrationMismatch(f"{what} has {empty} rows without any real token.",
                                  "Rebuild the calibration with 'hefsearch compile calib'.")

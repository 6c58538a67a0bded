"""Space post-transforms: a fixed function applied to every vector of a space (opt-in).

A post-transform is part of the space's fingerprint (``describe()``), so vectors made with
and without it never mix. It is stored as a spec dict (``to_spec()``) in the space's backend
options, and ``Encoder.open(..., post_transform=spec)`` rebuilds it (:func:`from_spec`).

:class:`MeanCentering` subtracts the mean vector of a library and re-normalises. It spreads
out libraries whose documents all point one way (high mean document-document cosine, see
``hefsearch bench quality``), which makes scores easier to read and thresholds usable. It does
not change rankings much (our MiniLM study: it did not repair 8-bit ranking; FP32 re-ranking
does), so it is opt-in.
"""

from __future__ import annotations

import hashlib

import numpy as np


class MeanCentering:
    kind = "mean-centering"

    def __init__(self, mean, *, renormalize: bool = True, fitted_on: int | None = None):
        self.mean = np.asarray(mean, dtype=np.float32).reshape(-1)
        self.renormalize = bool(renormalize)
        self.fitted_on = fitted_on

    @classmethod
    def fit(cls, vectors: np.ndarray, *, renormalize: bool = True) -> "MeanCentering":
        """The mean of ``vectors`` (zero rows, i.e. empty texts, are left out)."""
        v = np.asarray(vectors, dtype=np.float32)
        live = v[np.linalg.norm(v, axis=1) > 0] if len(v) else v
        if not len(live):
            raise ValueError("cannot fit mean-centering on no (non-zero) vectors")
        return cls(live.mean(axis=0), renormalize=renormalize, fitted_on=int(len(live)))

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    def describe(self) -> dict:
        digest = hashlib.sha256(self.mean.astype("<f4").tobytes()).hexdigest()[:16]
        return {"kind": self.kind, "dim": self.dim, "mean_sha256": digest, "renormalize": self.renormalize}

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        v = np.asarray(vectors, dtype=np.float32)
        if v.shape[-1] != self.dim:
            raise ValueError(f"mean-centering fitted on dimension {self.dim}, got vectors of {v.shape[-1]}")
        zero = np.linalg.norm(v, axis=1) == 0  # empty texts stay zero: they match nothing
        out = v - self.mean
        if self.renormalize:
            n = np.linalg.norm(out, axis=1, keepdims=True)
            out = out / np.where(n > 0, n, 1.0)
        out[zero] = 0.0
        return out.astype(np.float32)

    def to_spec(self) -> dict:
        return {"kind": self.kind, "mean": [float(x) for x in self.mean], "renormalize": self.renormalize,
                "fitted_on": self.fitted_on}


def from_spec(spec):
    """A post-transform object from its spec dict (or the object itself, or None)."""
    if spec is None or hasattr(spec, "apply"):
        return spec
    if not isinstance(spec, dict) or "kind" not in spec:
        raise ValueError(f"not a post-transform spec: {spec!r}")
    if spec["kind"] == MeanCentering.kind:
        return MeanCentering(spec["mean"], renormalize=spec.get("renormalize", True),
                             fitted_on=spec.get("fitted_on"))
    raise ValueError(f"unknown post-transform kind {spec['kind']!r}")

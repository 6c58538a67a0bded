"""Space post-transforms: a fixed function applied to every vector of a space (opt-in).

A post-transform is part of the space's fingerprint (``describe()``), so vectors made with
and without it never mix. It is stored as a spec dict (``to_spec()``) in the space's backend
options, and ``Encoder.open(..., post_transform=spec)`` rebuilds it (:func:`from_spec`).

:class:`MeanCentering` subtracts the mean vector of a library and re-normalises. It spreads
out libraries whose documents all point one way (high mean document-document cosine, see
``hefsearch bench quality``), which makes scores easier to read and thresholds usable. It does
not change rankings much (our MiniLM study: it did not repair 8-bit ranking; FP32 re-ranking
does), so it is opt-in.

:class:`LanguageNeutral` removes part of the language component that multilingual encoders
put in every vector: each vector moves by ``alpha`` times its language's offset from the
library mean (``offset_L = mean(chunks in L) - mean(all chunks)``) and is re-normalised.
Languages come from the texts (``embed/language.py``), so this transform takes the texts as
well as the vectors (``uses_texts``); a text of unknown language, or of a language with fewer
than ``min_chunks`` chunks in the library, is not moved. Measured figures and the choice of
alpha: ``search/language_neutral.py``. It may also carry a hub correction (:class:`HubCorrection`:
the library's mean and its top principal directions removed after the move, "all but the top"),
fitted on the same vectors; see ``search/hub_correction.py``.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .space_names import NEUTRAL_SUFFIX


class MeanCentering:
    kind = "mean-centering"
    #: the derived space's name is the source's plus this (``Encoder.space_name``)
    space_suffix = "-centered"

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


class HubCorrection:
    """Remove the library's mean (and its ``len(directions)`` top principal directions, "all
    but the top") from the unit vectors of passages, then re-normalise. A long passage's
    vector, averaged over hundreds of tokens, lies close to the library's common direction and
    so near every query (a hub); without it, a query meets only what tells passages apart, and
    a passage near the mean no longer outranks the answer. Queries are not moved: their own
    mean is not the library's (another prefix, often another language), and subtracting the
    library's from them hurt (docs/searching.md). Zero vectors stay zero; a vector with
    nothing left (the mean itself) becomes zero."""

    def __init__(self, mean, directions):
        self.mean = np.asarray(mean, dtype=np.float32).reshape(-1)
        d = np.asarray(directions, dtype=np.float32)
        self.directions = d.reshape(-1, self.mean.shape[0]) if d.size else np.zeros((0, self.mean.shape[0]), np.float32)

    @classmethod
    def fit(cls, vectors: np.ndarray, directions: int) -> "HubCorrection":
        """The mean of the non-zero ``vectors`` and their top ``directions`` principal axes."""
        v = np.asarray(vectors, dtype=np.float32)
        live = v[np.linalg.norm(v, axis=1) > 0] if len(v) else v
        if not len(live):
            raise ValueError("cannot fit a hub correction on no (non-zero) vectors")
        mean = live.mean(axis=0)
        k = min(int(directions), max(len(live) - 1, 0), live.shape[1])
        axes = np.zeros((0, live.shape[1]), np.float32)
        if k > 0:
            c = (live - mean).astype(np.float64)
            # eigenvectors of the covariance: d x d, cheap for any number of chunks
            w, u = np.linalg.eigh(c.T @ c)
            axes = u[:, np.argsort(w)[::-1][:k]].T.astype(np.float32)
        return cls(mean, axes)

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        v = np.asarray(vectors, dtype=np.float32)
        out = v - self.mean
        if len(self.directions):
            out = out - (out @ self.directions.T) @ self.directions
        n = np.linalg.norm(out, axis=1, keepdims=True)
        out = out / np.where(n > 1e-6, n, np.inf)
        out[np.linalg.norm(v, axis=1) == 0] = 0.0
        return out.astype(np.float32)

    def digest(self) -> str:
        h = hashlib.sha256(self.mean.astype("<f4").tobytes() + self.directions.astype("<f4").tobytes())
        return h.hexdigest()[:16]

    def to_spec(self) -> dict:
        return {"mean": [float(x) for x in self.mean],
                "directions": [[float(x) for x in row] for row in self.directions]}

    @classmethod
    def from_spec(cls, spec: dict) -> "HubCorrection":
        return cls(spec["mean"], spec.get("directions") or [])


class LanguageNeutral:
    """Shift each vector by ``-alpha * offset[language]``, then re-normalise (see module doc)."""

    kind = "language-neutral"
    space_suffix = NEUTRAL_SUFFIX
    #: ``Encoder`` passes the texts (queries without their prefix) to :meth:`apply`
    uses_texts = True

    def __init__(self, offsets: dict, *, alpha: float, dim: int, min_chunks: int,
                 counts: dict | None = None, fitted_on: int | None = None,
                 hubs: HubCorrection | None = None):
        self.offsets = {str(k): np.asarray(v, dtype=np.float32).reshape(-1) for k, v in sorted(offsets.items())}
        self.alpha = float(alpha)
        self.dim = int(dim)
        self.min_chunks = int(min_chunks)
        #: chunks per language at fit time (all languages, also those without an offset)
        self.counts = {str(k): int(v) for k, v in sorted((counts or {}).items())}
        self.fitted_on = fitted_on
        #: applied after the move (None: a space made before hub correction existed)
        self.hubs = hubs
        for lang, o in self.offsets.items():
            if o.shape[0] != self.dim:
                raise ValueError(f"offset of {lang!r} has dimension {o.shape[0]}, expected {self.dim}")
        from .language import warm_up

        warm_up()  # queries will need the language model: load it while the encoder opens

    @classmethod
    def fit(cls, vectors: np.ndarray, languages, *, alpha: float, min_chunks: int,
            hub_directions: int | None = None) -> "LanguageNeutral":
        """Offsets of every language with at least ``min_chunks`` (non-zero) vectors from the mean
        of all non-zero vectors; ``languages[i]`` is the language of ``vectors[i]`` or None.
        ``hub_directions`` (None: no hub correction): fit a :class:`HubCorrection` with that
        many principal directions on the moved vectors."""
        v = np.asarray(vectors, dtype=np.float32)
        if len(v) != len(languages):
            raise ValueError(f"{len(v)} vectors but {len(languages)} languages")
        live = np.linalg.norm(v, axis=1) > 0 if len(v) else np.zeros(0, bool)
        if not live.any():
            raise ValueError("cannot fit the language-neutral transform on no (non-zero) vectors")
        mean = v[live].mean(axis=0)
        langs = np.array([lang or "" for lang in languages], dtype=object)
        counts, offsets = {}, {}
        for lang in sorted(set(langs[live]) - {""}):
            rows = live & (langs == lang)
            counts[lang] = int(rows.sum())
            if counts[lang] >= min_chunks:
                offsets[lang] = v[rows].mean(axis=0) - mean
        out = cls(offsets, alpha=alpha, dim=v.shape[1], min_chunks=min_chunks, counts=counts,
                  fitted_on=int(live.sum()))
        if hub_directions is not None:
            out.hubs = HubCorrection.fit(out.moved(v, langs.tolist()), hub_directions)
        return out

    def _shifts(self, n: int, languages) -> np.ndarray:
        if languages is None or len(languages) != n:
            raise ValueError(f"the language-neutral transform needs one language (or None) per vector, "
                             f"got {None if languages is None else len(languages)} for {n}")
        out = np.zeros((n, self.dim), dtype=np.float32)
        for i, lang in enumerate(languages):
            o = self.offsets.get(lang) if lang else None
            if o is not None:
                out[i] = self.alpha * o
        return out

    def _languages(self, texts, languages):
        if languages is not None:
            return list(languages)
        if texts is None:
            raise ValueError("the language-neutral transform needs the texts or their languages")
        from .language import identify_all

        return identify_all(texts)

    def apply(self, vectors: np.ndarray, texts=None, *, languages=None, passages: bool = True) -> np.ndarray:
        """``vectors`` moved off their language (identified from ``texts`` unless ``languages``
        is given) and re-normalised; zero vectors (empty texts) stay zero. ``passages``: they are
        chunks of documents, which the hub correction moves too (queries: False)."""
        v = np.asarray(vectors, dtype=np.float32)
        if v.shape[-1] != self.dim:
            raise ValueError(f"language-neutral transform fitted on dimension {self.dim}, got {v.shape[-1]}")
        out = self.moved(v, self._languages(texts, languages))
        return out if self.hubs is None or not passages else self.hubs.apply(out)

    def moved(self, v: np.ndarray, languages) -> np.ndarray:
        """The language move alone: ``v`` shifted off its languages and re-normalised."""
        out = v - self._shifts(len(v), languages)
        n = np.linalg.norm(out, axis=1, keepdims=True)
        out = out / np.where(n > 0, n, 1.0)
        out[np.linalg.norm(v, axis=1) == 0] = 0.0
        return out.astype(np.float32)

    def invert(self, vectors: np.ndarray, texts=None, *, languages=None) -> np.ndarray:
        """The unit vectors :meth:`apply` made ``vectors`` from (exact up to float rounding):
        ``v = s*w + alpha*o`` with the ``s > 0`` that makes ``|v| = 1``. Lets a space be re-fitted
        from its own vectors (``search/language_neutral.py``). Not with a hub correction, which
        drops directions: such a space is re-fitted from its source space's vectors."""
        if self.hubs is not None:
            raise ValueError("a language-neutral transform with a hub correction cannot be inverted")
        w = np.asarray(vectors, dtype=np.float64)
        shift = self._shifts(len(w), self._languages(texts, languages)).astype(np.float64)
        wo = np.einsum("ij,ij->i", w, shift)
        s = -wo + np.sqrt(np.maximum(wo * wo - np.einsum("ij,ij->i", shift, shift) + 1.0, 0.0))
        out = s[:, None] * w + shift
        out[np.linalg.norm(w, axis=1) == 0] = 0.0
        return out.astype(np.float32)

    def describe(self) -> dict:
        h = hashlib.sha256()
        for lang, o in self.offsets.items():
            h.update(lang.encode() + b"\0" + o.astype("<f4").tobytes())
        from .language import IDENTIFIER, MIN_CONFIDENCE

        out = {"kind": self.kind, "dim": self.dim, "alpha": self.alpha, "languages": list(self.offsets),
               "offsets_sha256": h.hexdigest()[:16], "identifier": IDENTIFIER,
               "min_confidence": MIN_CONFIDENCE}
        if self.hubs is not None:  # absent from older spaces' fingerprints, which stay valid
            out["hub_correction"] = {"directions": len(self.hubs.directions), "sha256": self.hubs.digest()}
        return out

    def to_spec(self) -> dict:
        spec = {"kind": self.kind, "alpha": self.alpha, "dim": self.dim, "min_chunks": self.min_chunks,
                "offsets": {k: [float(x) for x in o] for k, o in self.offsets.items()},
                "counts": self.counts, "fitted_on": self.fitted_on}
        if self.hubs is not None:
            spec["hubs"] = self.hubs.to_spec()
        return spec


def from_spec(spec):
    """A post-transform object from its spec dict (or the object itself, or None)."""
    if spec is None or hasattr(spec, "apply"):
        return spec
    if not isinstance(spec, dict) or "kind" not in spec:
        raise ValueError(f"not a post-transform spec: {spec!r}")
    if spec["kind"] == MeanCentering.kind:
        return MeanCentering(spec["mean"], renormalize=spec.get("renormalize", True),
                             fitted_on=spec.get("fitted_on"))
    if spec["kind"] == LanguageNeutral.kind:
        return LanguageNeutral(spec["offsets"], alpha=spec["alpha"], dim=spec["dim"],
                               min_chunks=spec["min_chunks"], counts=spec.get("counts"),
                               fitted_on=spec.get("fitted_on"),
                               hubs=HubCorrection.from_spec(spec["hubs"]) if spec.get("hubs") else None)
    raise ValueError(f"unknown post-transform kind {spec['kind']!r}")

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
library mean (``offset_L = mean(chunks in L) - mean(all chunks)``) and is brought back to its length.
Languages come from the texts (``embed/language.py``), so this transform takes the texts as
well as the vectors (``uses_texts``); a text of unknown language, or of a language with fewer
than ``min_chunks`` chunks in the library, is not moved. Measured figures and the choice of
alpha: ``search/language_neutral.py``. It may also carry a hub correction for queries
(:class:`HubCorrection`: the mean query direction taken off), see ``search/language_neutral.py``.
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
    """Take ``beta`` times the mean query direction off every query, then re-normalise.

    ``q . d`` holds ``mean_query . d`` for every query alike: a document's expected score over
    all queries, its bias. Long passages, averaged over hundreds of tokens, lean towards what
    every query shares (the query prefix, the register of questions), so that bias lifts them
    above the answer whatever is asked (hubs). Subtracting it ranks by ``q . d - beta *
    mean_query . d``: centring on the query side, where the bias comes from. Passages are not
    moved (centring them on the library's mean hurt short documents: docs/searching.md), so
    stored vectors stay as they are. ``mean`` is fitted on reference queries that the space's own
    encoder embeds (``search/language_neutral.py``)."""

    def __init__(self, mean, beta: float, *, reference: int | None = None):
        self.mean = np.asarray(mean, dtype=np.float32).reshape(-1)
        self.beta = float(beta)
        self.reference = reference

    @classmethod
    def fit(cls, queries: np.ndarray, beta: float) -> "HubCorrection":
        """The mean of the non-zero query vectors ``queries``."""
        v = np.asarray(queries, dtype=np.float32)
        live = v[np.linalg.norm(v, axis=1) > 0] if len(v) else v
        if not len(live):
            raise ValueError("cannot fit a hub correction on no (non-zero) query vectors")
        return cls(live.mean(axis=0), beta, reference=int(len(live)))

    def apply(self, queries: np.ndarray) -> np.ndarray:
        v = np.asarray(queries, dtype=np.float32)
        out = v - self.beta * self.mean
        n = np.linalg.norm(out, axis=1, keepdims=True)
        out = out / np.where(n > 0, n, 1.0)
        out[np.linalg.norm(v, axis=1) == 0] = 0.0  # an empty query matches nothing
        return out.astype(np.float32)

    def digest(self) -> str:
        return hashlib.sha256(self.mean.astype("<f4").tobytes()).hexdigest()[:16]

    def describe(self) -> dict:
        return {"beta": self.beta, "reference_queries": self.reference, "mean_sha256": self.digest()}

    def to_spec(self) -> dict:
        return {"mean": [float(x) for x in self.mean], "beta": self.beta, "reference": self.reference}

    @classmethod
    def from_spec(cls, spec: dict) -> "HubCorrection":
        return cls(spec["mean"], spec["beta"], reference=spec.get("reference"))


class LanguageNeutral:
    """Shift each vector by ``-alpha * offset[language]``, then back to its length (see module doc)."""

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
            reference=None, beta: float = 0.5) -> "LanguageNeutral":
        """Offsets of every language with at least ``min_chunks`` (non-zero) vectors from the mean
        of all non-zero vectors; ``languages[i]`` is the language of ``vectors[i]`` or None.
        ``reference``: (query vectors, their languages) of the same encoder, to fit a
        :class:`HubCorrection` of strength ``beta`` on (None: no hub correction)."""
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
        if reference is not None:
            ref, ref_langs = reference
            out.hubs = HubCorrection.fit(out.moved(np.asarray(ref, np.float32), list(ref_langs)), beta)
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
        is given), at their length; zero vectors (empty texts) stay zero. ``passages``: they are
        chunks of documents; queries (False) also get the hub correction."""
        v = np.asarray(vectors, dtype=np.float32)
        if v.shape[-1] != self.dim:
            raise ValueError(f"language-neutral transform fitted on dimension {self.dim}, got {v.shape[-1]}")
        out = self.moved(v, self._languages(texts, languages))
        return out if self.hubs is None or passages else self.hubs.apply(out)

    def moved(self, v: np.ndarray, languages) -> np.ndarray:
        """The language move alone: ``v`` shifted off its languages and brought back to its own
        length (1 for a unit vector; a passage in context is shorter: ``embed/in_context.py``)."""
        length = np.linalg.norm(v, axis=1, keepdims=True)
        out = v - self._shifts(len(v), languages)
        n = np.linalg.norm(out, axis=1, keepdims=True)
        out = out * (length / np.where(n > 0, n, 1.0))
        out[length[:, 0] == 0] = 0.0
        return out.astype(np.float32)

    def invert(self, vectors: np.ndarray, texts=None, *, languages=None) -> np.ndarray:
        """The vectors :meth:`apply` made ``vectors`` from (exact up to float rounding): ``v =
        s*u + alpha*o`` (``u`` the direction of ``w``) with the ``s > 0`` that makes ``|v| =
        |w|``. Lets a space be re-fitted from its own vectors (``search/language_neutral.py``).
        For passages: the hub correction moves queries only."""
        w = np.asarray(vectors, dtype=np.float64)
        r = np.linalg.norm(w, axis=1)
        u = w / np.where(r > 0, r, 1.0)[:, None]
        shift = self._shifts(len(w), self._languages(texts, languages)).astype(np.float64)
        wo = np.einsum("ij,ij->i", u, shift)
        s = -wo + np.sqrt(np.maximum(wo * wo - np.einsum("ij,ij->i", shift, shift) + r * r, 0.0))
        out = s[:, None] * u + shift
        out[r == 0] = 0.0
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
            out["hub_correction"] = self.hubs.describe()
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

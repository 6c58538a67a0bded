"""``hefsearch doctor --verify``: the NPU against FP32 on built-in multilingual sentences.

It encodes the same texts on the NPU (or any non-CPU backend) and on the CPU, then reports:

- per-sentence cosine between the two vectors (coordinate-wise: drops if the basis changes);
- basis-invariant metrics: similarity-matrix correlation, top-1 translation retrieval within
  each space on the bundled parallel set (search/parallel.py), and cross-space top-1 (is each
  NPU vector nearest to its own FP32 vector?);
- a diagnosis at the token level. If the direct cosines are low while the basis-invariant
  metrics are fine, the NPU's numbers are right but read in the wrong layout. The usual
  causes are tested by fitting them to the hidden states of the same frames:
  the output read as [S,H] while the device wrote [H,S] (transposed), permuted (or
  sign-flipped) channels, or any rotation (an orthogonal Procrustes fit on half the tokens,
  measured on the other half). A fit that restores the cosine names a layout bug;
  if none helps, the gap is quantisation error.

Verified against the contract fake of hailo_platform (tests/fakes) only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from hefsearch.embed.samples import VERIFY_TEXTS

from . import metrics

#: translation pairs among VERIFY_TEXTS (distinct meanings, so top-1 has one right answer)
SAMPLE_PAIRS: list[tuple[int, int]] = [(0, 1), (15, 16), (17, 18), (19, 20), (28, 27), (31, 32), (3, 9)]

#: a fit counts when it lifts the token cosine at least this much, to at least FIT_MIN
FIT_GAIN, FIT_MIN = 0.10, 0.90
#: the NPU "matches" FP32 above this median sentence cosine
MATCH_COSINE = 0.98
#: basis-invariant metrics count as fine from here
FINE_CORRELATION = 0.90
#: below this median cosine, with no layout fit, the output is not the encoder's at all
BROKEN_COSINE = 0.5


@dataclass
class LayoutFit:
    name: str          # "as read", "transposed [H,S]", "permuted channels", "rotation (Procrustes)"
    token_cosine: float
    detail: str = ""


@dataclass
class VerifyReport:
    backend: str
    reference: str
    texts: list[str]
    cosines: list[float]
    comparison: dict
    cross_top1: float
    fits: list[LayoutFit] = field(default_factory=list)
    verdict: str = ""
    cause: str = ""  # "match" | "quantisation" | "transposed" | "permuted" | "rotation" | "broken"
    notes: list[str] = field(default_factory=list)

    @property
    def median_cosine(self) -> float:
        return float(np.median(self.cosines)) if self.cosines else float("nan")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["median_cosine"] = self.median_cosine
        return d


def _mean_cos(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(metrics.paired_cosine(x, y))) if len(x) else float("nan")


def layout_fits(h_test: np.ndarray, h_ref: np.ndarray, mask: np.ndarray) -> list[LayoutFit]:
    """Token-level cosine of the test hidden states as read and under each layout hypothesis.

    ``h_test``/``h_ref``: [N, S, H] for the same frames; ``mask``: [N, S] (only real tokens count).
    """
    n, s, h = h_test.shape
    valid = mask.astype(bool)
    x, y = h_test[valid], h_ref[valid]
    fits = [LayoutFit("as read", _mean_cos(x, y))]
    transposed = h_test.reshape(n, h, s).transpose(0, 2, 1)  # the buffer held [H,S] but was read as [S,H]
    fits.append(LayoutFit("transposed [H,S]", _mean_cos(transposed[valid], y),
                          "the device wrote hidden x tokens; the host read tokens x hidden"))
    perm = metrics.detect_permutation(y, x)
    if perm.is_permutation:
        fixed = np.zeros_like(x)
        for j, (src, sign) in enumerate(zip(perm.mapping, perm.signs)):
            fixed[:, src] = sign * x[:, j]
        fits.append(LayoutFit("permuted channels", _mean_cos(fixed, y),
                              f"every channel matches another one (min |corr| {perm.min_correlation:.3f})"))
    else:
        why = ("the channels are already in FP32's order" if perm.is_identity
               else f"no channel permutation found ({perm.matched} of {h} channels matched)")
        fits.append(LayoutFit("permuted channels", fits[0].token_cosine, why))
    if len(x) >= 4 * h:
        pf = metrics.procrustes_fit(x, y, holdout=0.5)
        fits.append(LayoutFit("rotation (Procrustes)", pf.cosine_after,
                              f"orthogonal map fitted on {pf.fit_rows} tokens, measured on the others "
                              f"(residual {pf.residual:.3f})"))
    return fits


def diagnose(cosines: list[float], comparison: dict, fits: list[LayoutFit]) -> tuple[str, str, list[str]]:
    """(cause, verdict, notes) from the sentence cosines, basis-invariant metrics and fits."""
    notes = []
    median = float(np.median(cosines))
    corr = comparison.get("similarity_pearson") or float("nan")
    top_ref, top_test = comparison.get("top1_ref"), comparison.get("top1_test")
    fine = corr >= FINE_CORRELATION and (top_ref is None or top_test is None or top_test >= top_ref - 0.15)
    direct = fits[0].token_cosine
    best = max(fits[1:], key=lambda f: f.token_cosine, default=None)
    # the simplest explanation that fits wins (a permutation is also a rotation)
    explains = [f for f in fits[1:] if f.token_cosine >= max(FIT_MIN, direct + FIT_GAIN)]
    if median >= MATCH_COSINE:
        return "match", (f"The NPU matches FP32: median cosine {median:.4f}; only quantisation error remains."), notes
    if median < 0.9 and fine:
        notes.append(f"Direct cosines are low (median {median:.3f}) while the basis-invariant metrics are fine "
                     f"(similarity correlation {corr:.3f}): the NPU's vectors look right in another basis. "
                     "Testing the usual layout causes.")
    if explains:
        best = explains[0]
        cause = {"transposed [H,S]": "transposed", "permuted channels": "permuted",
                 "rotation (Procrustes)": "rotation"}[best.name]
        what = {
            "transposed": "the output is laid out [H,S] but read as [S,H]",
            "permuted": "the output channels are permuted",
            "rotation": "the output is a rotated version of FP32's (not a plain transpose or permutation)",
        }[cause]
        impact = ("Tokens and channels are mixed up, so the NPU's vectors are unusable as they are."
                  if cause == "transposed" else
                  "Search inside the NPU space still works (every vector shares the basis), but NPU "
                  "vectors cannot be compared with FP32 ones (re-ranking, mixed spaces).")
        return cause, (f"Layout bug, not quantisation: {what}. Token cosine {direct:.3f} as read, "
                       f"{best.token_cosine:.3f} after fitting it. {impact} Run 'hefsearch inspect' on the "
                       "HEF and report it."), notes
    best_txt = f"best {best.token_cosine:.3f} vs {direct:.3f} as read" if best is not None else "none tried"
    if median < BROKEN_COSINE:
        return "broken", (f"The NPU's output is not the encoder's: median cosine {median:.3f}, similarity "
                          f"correlation {corr:.3f}, and no layout fit explains it ({best_txt}). A wrong HEF "
                          "or a broken compile: run 'hefsearch inspect' and recompile."), notes
    if median < 0.9 or not fine:
        return "quantisation", (f"Heavy quantisation error: median cosine {median:.3f}, similarity correlation "
                                f"{corr:.3f}; no layout fit helps ({best_txt}). Check the mask handling and try "
                                "--precision balanced ('hefsearch bench quality' shows what it costs in "
                                "retrieval); FP32 re-ranking wins it back."), notes
    return "quantisation", (f"Quantisation error: median cosine {median:.3f}, similarity correlation {corr:.3f}; "
                            f"no layout fit helps ({best_txt}). A 16-bit profile (--precision balanced) or "
                            "FP32 re-ranking wins it back."), notes


def builtin_texts() -> tuple[list[str], list[tuple[int, int]]]:
    """The 36 sample texts, then both sides of the bundled parallel set; translation pairs.

    Falls back to the pairs among the sample texts if the parallel set is unavailable.
    """
    texts = list(VERIFY_TEXTS)
    try:
        from .parallel import load_parallel

        par = load_parallel()
    except Exception:  # a damaged install: the sample pairs still give a top-1 figure
        return texts, list(SAMPLE_PAIRS)
    n0, n = len(texts), len(par)
    texts += [p.text_a for p in par] + [p.text_b for p in par]
    return texts, [(n0 + i, n0 + n + i) for i in range(n)]


def verify_npu(bundle, backend: str = "hailo", *, texts: list[str] | None = None,
               pairs: list[tuple[int, int]] | None = None, **backend_opts) -> VerifyReport:
    """Encode ``texts`` on ``backend`` and on the CPU and diagnose the difference."""
    from hefsearch.embed.bundle import Bundle
    from hefsearch.embed.encoder import Encoder

    frame_texts = list(texts or VERIFY_TEXTS)  # the texts whose frames the layout fits use
    if texts is None:
        texts, pairs = builtin_texts()
    if not isinstance(bundle, Bundle):
        bundle = Bundle.open(bundle)
    with Encoder.open(bundle, backend=backend, **backend_opts) as test, Encoder.open(bundle, backend="cpu") as ref:
        a = test.encode(texts)
        b = ref.encode(texts)
        # the same frames through both backends, for the token-level layout fits
        tok = test.host.tokenize(frame_texts)
        longest = int(tok.lengths.max())
        seq_lens = test.backend.seq_lens
        pad = min([q for q in (seq_lens or ()) if q >= longest] or [max(seq_lens)]) if seq_lens else longest
        e, m = test.host.embed(tok.ids, pad_to=pad)
        fits = layout_fits(test.backend.run(e, m), ref.backend.run(e, m), m)
        label, ref_label = test.backend.label, ref.backend.label
    cos = [float(c) for c in metrics.paired_cosine(a, b)]
    comp = metrics.compare_spaces(b, a, pairs=pairs).to_dict()
    nearest = np.argmax(metrics.cosine_matrix(a, b), axis=1)
    cross = float(np.mean([texts[j] == t for j, t in zip(nearest, texts)]))  # repeated texts count as found
    cause, verdict, notes = diagnose(cos, comp, fits)
    return VerifyReport(label, ref_label, list(texts), cos, comp, cross, fits, verdict, cause, notes)

"""``hefsearch doctor --verify``: the NPU against FP32 on built-in multilingual sentences.

It encodes the same texts on the NPU (or any quantised backend: npu-sim, cpu-int8) and on the CPU, then reports:

- per-sentence cosine between the two vectors (coordinate-wise: drops if the basis changes);
- basis-invariant metrics: similarity-matrix correlation, top-1 translation retrieval within
  each space on the bundled parallel set (evaluate/parallel.py), and cross-space top-1 (is each
  NPU vector nearest to its own FP32 vector?);
- a diagnosis at the token level. If the direct cosines are low while the basis-invariant
  metrics are fine, the NPU's numbers are right but in another layout or basis. The usual
  causes are tested by fitting them to the hidden states of the same frames:
  the output read as [S,H] while the device wrote [H,S] (transposed: a real layout bug, tokens
  and channels mixed), permuted (or sign-flipped) channels, or any rotation (an orthogonal
  Procrustes fit on half the tokens, measured on the other half). A permutation or rotation is
  the compiled network's own channel basis, which the public Hailo-10H report found for every
  HEF (a user report on the Hailo Community forum, community.hailo.ai, section 6: Hailo reorders
  channels internally): it is
  reported as such, with the ranking metrics, and never as broken, since search inside the NPU
  space is unaffected and NPU and FP32 vectors are never mixed. Whether a HEF is broken is
  judged by the basis-invariant metrics alone; if no fit helps, the gap is quantisation error.

The NPU path (``backend="hailo"``) is verified against the contract fake of hailo_platform
(tests/fakes) only; npu-sim and cpu-int8 run for real in the tests.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from hefsearch.embed.samples import VERIFY_TEXTS

from hefsearch.embed import metrics

#: translation pairs among VERIFY_TEXTS (distinct meanings, so top-1 has one right answer)
SAMPLE_PAIRS: list[tuple[int, int]] = [(0, 1), (15, 16), (17, 18), (19, 20), (28, 27), (31, 32), (3, 9)]

#: a fit counts when it lifts the token cosine at least this much, to at least FIT_MIN
FIT_GAIN, FIT_MIN = 0.10, 0.90
#: the NPU "matches" FP32 above this median sentence cosine
MATCH_COSINE = 0.98
#: basis-invariant metrics count as fine from here
FINE_CORRELATION = 0.90
#: "broken" is judged by retrieval: embed/metrics.py ``ranking_lost`` (INFORMATIVE_TOP1,
#: LOST_TOP1_SHARE, LOST_NEIGHBOURS, LOST_CORRELATION), the same rule as the emulator report of
#: ``compile hef``


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
    cause: str = ""  # match | quantisation | transposed | permuted | rotation | basis | broken
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


def collect_tokens(test, ref, texts: list[str], batch: int = 16) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Real-token hidden states of the same frames from two encoders: (as read, read as if the
    buffer held [H,S], reference), each [T, H].

    Frames are padded to a SEQ the test backend was compiled for, so its whole output buffer
    is seen (a transposed layout only shows on the full frame); the reference runs unpadded.
    """
    tok = test.host.tokenize(texts)
    order = np.argsort(tok.lengths, kind="stable")
    seq_lens = test.backend.seq_lens
    xs, xts, ys = [], [], []
    for i in range(0, len(order), batch):
        ids = [tok.ids[j] for j in order[i : i + batch]]
        longest = max(len(a) for a in ids)
        pad = (min([q for q in seq_lens if q >= longest] or [max(seq_lens)]) if seq_lens else longest)
        e, m = test.host.embed(ids, pad_to=pad)
        h_test = test.backend.run(e, m)
        h_ref = ref.backend.run(np.ascontiguousarray(e[:, :longest]), np.ascontiguousarray(m[:, :longest]))
        n, s, h = h_test.shape
        valid = m.astype(bool)
        xs.append(h_test[valid])
        xts.append(h_test.reshape(n, h, s).transpose(0, 2, 1)[valid])
        ys.append(h_ref[valid[:, :longest]])
    return np.concatenate(xs), np.concatenate(xts), np.concatenate(ys)


def match_channels(x: np.ndarray, y: np.ndarray):
    """Is ``x`` a channel permutation (with signs) of ``y``? (mapping, signs, weakest |corr|) or None.

    ``mapping[j]`` is the channel of ``y`` that channel ``j`` of ``x`` copies. Constant channels
    (some encoders have a few) carry no correlation; they are matched among themselves by value.
    """
    t, h = x.shape
    sx, sy = x.std(axis=0), y.std(axis=0)
    live_x = sx > 1e-4 * max(float(sx.max()), 1e-30)  # float32 std of a constant is not 0
    live_y = sy > 1e-4 * max(float(sy.max()), 1e-30)
    if live_x.sum() != live_y.sum() or live_x.sum() < 3:
        return None
    ix, iy = np.flatnonzero(live_x), np.flatnonzero(live_y)
    # unrelated channels correlate at about 1/sqrt(T); 8-bit noise keeps copies far above that
    perm = metrics.detect_permutation(y[:, iy], x[:, ix], threshold=max(0.3, 6 / np.sqrt(max(t, 1))))
    if not (perm.is_permutation or perm.is_identity):
        return None
    mapping = np.empty(h, dtype=np.int64)
    signs = np.ones(h, dtype=np.float32)
    mapping[ix] = iy[perm.mapping]
    signs[ix] = perm.signs
    cx, cy = np.flatnonzero(~live_x), np.flatnonzero(~live_y)
    scale = float(np.abs(y).max()) or 1.0
    if np.array_equal(cx, cy) and np.allclose(x[0, cx], y[0, cy], atol=1e-2 * scale):
        mapping[cx] = cy  # constants already in place
    else:
        mapping[cx[np.argsort(x[0, cx], kind="stable")]] = cy[np.argsort(y[0, cy], kind="stable")]
    return mapping, signs, perm.min_correlation


def layout_fits(x: np.ndarray, x_transposed: np.ndarray, y: np.ndarray) -> list[LayoutFit]:
    """Token-level cosine of the test hidden states as read and under each layout hypothesis.

    ``x``: the test backend's real tokens [T, H]; ``x_transposed``: the same frames read as if
    the device wrote [H, S]; ``y``: the reference's tokens.
    """
    t, h = x.shape
    fits = [LayoutFit("as read", _mean_cos(x, y))]
    fits.append(LayoutFit("transposed [H,S]", _mean_cos(x_transposed, y),
                          "the device wrote hidden x tokens; the host read tokens x hidden"))
    match = match_channels(x, y)
    if match is None:
        fits.append(LayoutFit("permuted channels", fits[0].token_cosine, "no channel permutation found"))
    else:
        mapping, signs, weakest = match
        if np.array_equal(mapping, np.arange(h)) and np.all(signs == 1):
            fits.append(LayoutFit("permuted channels", fits[0].token_cosine,
                                  "the channels are already in FP32's order"))
        else:
            fixed = np.zeros_like(x)
            fixed[:, mapping] = x * signs
            fits.append(LayoutFit("permuted channels", _mean_cos(fixed, y),
                                  f"every channel copies another one (weakest |corr| {weakest:.3f})"))
    if t >= 4 * h:
        pf = metrics.procrustes_fit(x, y, holdout=0.5)
        fits.append(LayoutFit("rotation (Procrustes)", pf.cosine_after,
                              f"orthogonal map fitted on {pf.fit_rows} tokens, measured on the others "
                              f"(residual {pf.residual:.3f})"))
    else:
        fits.append(LayoutFit("rotation (Procrustes)", float("nan"),
                              f"not fitted: {t} tokens, needs {4 * h} for {h} dimensions"))
    return fits


def _ranking(comparison: dict, subject: str) -> str:
    corr = comparison.get("similarity_pearson")
    top_ref, top_test = comparison.get("top1_ref"), comparison.get("top1_test")
    text = f"similarity correlation {corr:.3f}" if corr is not None else "no similarity correlation"
    nn = comparison.get("neighbour_agreement")
    if nn is not None:
        text += f", same nearest neighbour for {nn:.0%} of the texts"
    if top_ref is not None and top_test is not None:
        text += f", top-1 translation retrieval {top_test:.1%} ({subject}) vs {top_ref:.1%} (FP32)"
    return text


def diagnose(cosines: list[float], comparison: dict, fits: list[LayoutFit],
             subject: str = "NPU") -> tuple[str, str, list[str]]:
    """(cause, verdict, notes) from the sentence cosines, basis-invariant metrics and fits;
    ``subject`` is what the verdict calls the encoder tested ("NPU", "CPU int8 encoder")."""
    notes = []
    median = float(np.median(cosines))
    corr = comparison.get("similarity_pearson") or float("nan")
    top_ref, top_test = comparison.get("top1_ref"), comparison.get("top1_test")
    fine = corr >= FINE_CORRELATION and (top_ref is None or top_test is None or top_test >= top_ref - 0.15)
    nn = comparison.get("neighbour_agreement")
    lost = metrics.ranking_lost(corr, nn, top_ref, top_test)
    ranking = _ranking(comparison, subject)
    direct = fits[0].token_cosine
    tried = [f for f in fits[1:] if np.isfinite(f.token_cosine)]
    best = max(tried, key=lambda f: f.token_cosine, default=None)
    # the simplest explanation that fits wins (a permutation is also a rotation)
    explains = [f for f in tried if f.token_cosine >= max(FIT_MIN, direct + FIT_GAIN)]
    if median >= MATCH_COSINE:
        return "match", (f"The {subject} matches FP32: median cosine {median:.4f}; only quantisation error remains "
                         f"({ranking})."), notes
    if median < 0.9 and fine:
        notes.append(f"Direct cosines are low (median {median:.3f}) while the basis-invariant metrics are fine "
                     f"(similarity correlation {corr:.3f}): the {subject}'s vectors look right in another basis. "
                     "Testing the usual layout causes.")
    if explains and explains[0].name == "transposed [H,S]":
        best = explains[0]
        return "transposed", (f"Layout bug, not quantisation: the output is laid out [H,S] but read as [S,H]. "
                              f"Token cosine {direct:.3f} as read, {best.token_cosine:.3f} after fitting it. Tokens "
                              f"and channels are mixed up, so the {subject}'s vectors are unusable as they are. Run "
                              "'hefsearch inspect' on the HEF and report it."), notes
    if explains:
        best = explains[0]
        cause = {"permuted channels": "permuted", "rotation (Procrustes)": "rotation"}[best.name]
        what = ("its channels are FP32's, reordered" if cause == "permuted"
                else "it is a rotation of FP32's basis")
        residual = ("only quantisation error remains" if best.token_cosine >= MATCH_COSINE else
                    f"after the fit, token cosine {best.token_cosine:.3f}: quantisation error")
        return cause, (f"The {subject}'s output is in the compiled network's own channel basis ({what}; Hailo's "
                       f"compiler reorders channels, as the public Hailo-10H report found for every HEF). Expected, "
                       f"not a bug: {ranking}; {residual}. Search inside the {subject} space works; its vectors are "
                       "never compared with FP32 ones."), notes
    best_txt = f"best {best.token_cosine:.3f} vs {direct:.3f} as read" if best is not None else "none tried"
    if median < 0.9 and fine:
        return "basis", (f"The {subject}'s vectors rank like FP32's ({ranking}) in another basis that no simple fit "
                         f"explains ({best_txt}; median cosine {median:.3f}), as a compiled network's may be. Search "
                         f"in the {subject} space works; its vectors are never compared with FP32 ones."), notes
    if lost:
        return "broken", (f"The {subject}'s output does not rank like the encoder's ({ranking}), in any basis, and "
                          f"no layout fit explains it ({best_txt}). A wrong HEF, a wrong mask input or a broken "
                          "compile: run 'hefsearch inspect' and recompile."), notes
    if median < 0.9 or not fine:
        return "quantisation", (f"Heavy quantisation error: {ranking}; no layout fit helps ({best_txt}; median "
                                f"cosine {median:.3f}, which another basis would also lower). Check the mask "
                                "handling and try --precision balanced ('hefsearch bench quality' shows what it "
                                "costs in retrieval); FP32 re-ranking wins it back."), notes
    return "quantisation", (f"Quantisation error: median cosine {median:.3f}, {ranking}; no layout fit helps "
                            f"({best_txt}). A 16-bit profile (--precision balanced) or FP32 re-ranking wins it "
                            "back."), notes


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
    from hefsearch.embed.reference import open_reference_encoder

    if texts is None:
        texts, pairs = builtin_texts()
    if not isinstance(bundle, Bundle):
        bundle = Bundle.open(bundle)
    with Encoder.open(bundle, backend=backend, **backend_opts) as test, open_reference_encoder(bundle) as ref:
        a = test.encode(texts)
        b = ref.encode(texts)
        fits = layout_fits(*collect_tokens(test, ref, texts))
        label, ref_label = test.label, ref.label
        subject = "NPU" if test.backend.is_npu else f"{test.label} encoder"  # CPU int8 is no NPU
    cos = [float(c) for c in metrics.paired_cosine(a, b)]
    comp = metrics.compare_spaces(b, a, pairs=pairs).to_dict()
    nearest = np.argmax(metrics.cosine_matrix(a, b), axis=1)
    cross = float(np.mean([texts[j] == t for j, t in zip(nearest, texts)]))  # repeated texts count as found
    cause, verdict, notes = diagnose(cos, comp, fits, subject)
    return VerifyReport(label, ref_label, list(texts), cos, comp, cross, fits, verdict, cause, notes)

"""Calibration for the NPU simulation: which texts, and the min/max range of every site.

    calibration_from_bundle   the bundle's ``compile calib`` set -> Calibration (or None)
    calibration_from_texts    texts embedded by the host pipeline -> Calibration
    measure_ranges            prepared FP32 graph + Calibration -> {site tensor: (min, max)}

Ranges are plain min/max over the real (unpadded) query tokens of every text, on the FP32
graph of :mod:`hefsearch.compile.sim.graph`; it predicts what a build choice costs, not a HEF's
exact numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from hefsearch.embed.bundle import Bundle

from .graph import SimBuildError, Site

DEFAULT_CALIB_LIMIT = 512
CALIB_BATCH = 8


@dataclass
class Calibration:
    embeddings: np.ndarray  # [N, S, H] float32
    mask: np.ndarray  # [N, S] int64
    source: str  # what it is, for the manifest and the user


def calibration_from_bundle(bundle: Bundle, limit: int | None = DEFAULT_CALIB_LIMIT) -> Calibration | None:
    """The 4D arrays ``compile calib`` stored in the bundle (``calib/calib_s<SEQ>.npz``),
    reshaped to the body's 3D contract. Prefers the bundle's own SEQ, else the longest set."""
    from hefsearch.compile.calib import load_calibration

    sets = bundle.manifest.get("calibration")
    if not isinstance(sets, dict):
        return None
    seqs = sorted(int(k[1:]) for k in sets if isinstance(k, str) and k.startswith("s") and k[1:].isdigit())
    if not seqs:
        return None
    seq = bundle.seq_len if bundle.seq_len in seqs else seqs[-1]
    e, m, info = load_calibration(bundle, seq)
    if e.ndim == 4:  # [N,1,S,H]
        e = e.reshape(e.shape[0], e.shape[2], e.shape[3])
    m = np.asarray(m).reshape(m.shape[0], m.shape[-1])
    if e.ndim != 3 or e.shape[:2] != m.shape or e.shape[2] != bundle.hidden:
        raise SimBuildError(
            f"Calibration arrays in {bundle.path} ({info.get('file')}) have shapes {list(e.shape)} and "
            f"{list(m.shape)}; expected [N,1,S,{bundle.hidden}] and [N,1,1,S].",
            "Rebuild them with 'hefsearch compile calib'.",
        )
    total = int(e.shape[0])
    n = total if limit is None else min(limit, total)
    # an even spread over the set, not its first rows (it is not shuffled by length)
    pick = np.linspace(0, total - 1, n).round().astype(int) if n < total else np.arange(total)
    return Calibration(np.ascontiguousarray(e[pick], dtype=np.float32), (m[pick] > 0.5).astype(np.int64),
                       f"bundle calibration set {info.get('file')} ({n} of {total} rows, SEQ {e.shape[1]})")


def calibration_from_texts(bundle: Bundle, texts: Sequence[str], note: str) -> Calibration:
    """Embed texts with the host pipeline, padded to the bundle's fixed length as on the NPU
    (an additive mask only shows up in the score ranges when there is padding)."""
    from hefsearch.embed.host import HostPipeline

    host = HostPipeline(bundle)
    texts = [t for t in texts if t and not t.isspace()]
    tok = host.tokenize(list(texts))
    e, m = host.embed(tok.ids, pad_to=host.max_tokens)
    return Calibration(e, m, note)


#: values kept per site and batch for percentile ranges (a seeded random subsample)
PERCENTILE_SAMPLE = 4096


def parse_ranges(spec: str | None) -> float | None:
    """``minmax`` (or None) -> None; ``percentile:P`` -> P (50 < P < 100)."""
    s = (spec or "minmax").strip().lower()
    if s in ("minmax", "min-max", "min/max"):
        return None
    head, _, tail = s.partition(":")
    try:
        p = float(tail)
    except ValueError:
        p = -1.0
    if head != "percentile" or not 50 < p < 100:
        raise SimBuildError(f"Range estimator {spec!r} is unknown.", "Use minmax or percentile:P, e.g. percentile:99.99.")
    return p


#: texts run through the graph at once when measuring ranges. Every site tensor is an output of
#: that run and all are alive together: for a 512-token text, multilingual-e5-small's attention
#: sites alone are ~0.6 GB per text, so 8 at once peaked at 10.8 GB; one at a time, ~2 GB
RUN_BATCH = 1


def measure_ranges(model, calib: Calibration, sites: Sequence[Site], batch: int = CALIB_BATCH,
                   progress: Callable[[str], None] | None = None,
                   percentile: float | None = None, run_batch: int = RUN_BATCH) -> dict[str, tuple[float, float]]:
    """Min/max of every site tensor over the calibration set, on the FP32 graph; with
    ``percentile`` P, the (100-P)th and Pth percentiles of each site's values instead (from a
    seeded subsample of every ``batch`` texts), as a compiler that clips its ranges would.

    Streamed: the graph runs ``run_batch`` texts at a time and only each site's running min and
    max are kept (with ``percentile``, the real rows of ``batch`` texts until they are
    subsampled), so memory does not grow with the calibration set or ``batch``. The ranges are
    those of running ``batch`` texts at once (the same min/max; the same subsample)."""
    sess = _ranges_session(model)
    inputs = {"embeddings", "attention_mask"}
    names = [s.tensor for s in sites if s.tensor not in inputs]
    lo = {s.tensor: np.inf for s in sites}
    hi = {s.tensor: -np.inf for s in sites}
    samples: dict[str, list[np.ndarray]] = {s.tensor: [] for s in sites}
    rng = np.random.default_rng(0)
    n = len(calib.embeddings)
    step = max(1, min(int(run_batch), int(batch)))
    for i in range(0, n, batch):
        parts: dict[str, list[np.ndarray]] = {}
        for j in range(i, min(i + batch, n), step):
            end = min(j + step, i + batch, n)
            e = np.ascontiguousarray(calib.embeddings[j:end], dtype=np.float32)
            m = calib.mask[j:end]
            feeds = {"embeddings": e, "attention_mask": m}
            got = list(zip(names, sess.run(names, feeds)))
            got += [(t, v) for t, v in feeds.items() if t in lo]
            real = m.astype(bool)
            for t, v in got:
                v = _real_rows(v, real)
                if v.size == 0:
                    continue
                lo[t] = min(lo[t], float(np.min(v)))
                hi[t] = max(hi[t], float(np.max(v)))
                if percentile is not None:
                    parts.setdefault(t, []).append(np.array(v.reshape(-1), dtype=np.float32))
            del got
        for t, pieces in parts.items():  # the same draw as from one run of the whole batch
            flat = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
            if flat.size > PERCENTILE_SAMPLE:
                flat = flat[rng.integers(0, flat.size, PERCENTILE_SAMPLE)]
            samples[t].append(flat)
        if progress and (i // batch) % 16 == 0:
            progress(f"calibrating: {min(i + batch, n)}/{n} texts")
    if percentile is not None:
        for t, parts_ in samples.items():
            if parts_:
                allv = np.concatenate(parts_)
                lo[t], hi[t] = float(np.percentile(allv, 100 - percentile)), float(np.percentile(allv, percentile))
    return {t: (lo[t], hi[t]) for t in lo}


def _real_rows(v: np.ndarray, real: np.ndarray) -> np.ndarray:
    """The values of real (unpadded) query tokens. Padded rows are zero vectors whose LayerNorm
    variance is 0, so their reciprocal std is 1/sqrt(eps) (1e6 for BERT): counting them would
    stretch every range by orders of magnitude, and their outputs are discarded by pooling.
    Padded *keys* stay in the score ranges, so an additive mask value is measured as the NPU sees it."""
    n, s = real.shape
    if v.ndim == 3 and v.shape[:2] == (n, s):
        return v[real]
    if v.ndim == 4 and v.shape[0] == n and v.shape[2] == s:  # [N, heads, S(queries), *]
        return v.transpose(0, 2, 1, 3)[real]
    return v


def _ranges_session(model):
    """A session for the range run without ONNX Runtime's memory arena: the arena keeps the
    largest run's buffers for the session's life, which the range run does not reuse."""
    import onnxruntime as ort

    from hefsearch.embed.ort_session import session_options

    opts = session_options(None)
    opts.enable_cpu_mem_arena = False
    return ort.InferenceSession(model.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"])

"""The training texts of ``compile robust``: the bundle's calibration pool plus the built-in
multilingual samples, cut to a training length, with the FP32 teacher's sentence vectors
(numpy and ONNX Runtime only; torch is not needed here).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from hefsearch.embed.bundle import Bundle
from hefsearch.base.errors import HefsearchError
from hefsearch.embed.host import l2_normalize, mean_pool

from hefsearch.compile.body_choice import resolve_body


class RobustError(HefsearchError):
    title = "robust training error"


@dataclass
class TrainData:
    emb: np.ndarray  # [N, S, H] float32, S <= max_tokens
    mask: np.ndarray  # [N, S] int64
    lengths: np.ndarray  # [N]
    teacher: np.ndarray  # [N, H] the FP32 body's normalised sentence vectors
    source: str
    sha: str
    train_rows: np.ndarray  # indices
    holdout_rows: np.ndarray


def training_data(bundle: Bundle, max_tokens: int, holdout: int, seed: int, calib_limit: int | None,
                  say: Callable[[str], None]) -> TrainData:
    """Consumes the bundle's calibration pool and the built-in samples; produces the training
    rows, cut to ``max_tokens``, with the FP32 teacher's vectors; a tenth (at most ``holdout``
    rows) is held out to report the 8-bit error."""
    from hefsearch.compile.calib import sample_texts
    from hefsearch.compile.sim.ranges import calibration_from_bundle, calibration_from_texts

    parts = []
    calib = calibration_from_bundle(bundle, calib_limit)
    notices = []
    if calib is None:
        notices.append("no calibration pool (hefsearch compile calib BUNDLE --from DOCS)")
    else:
        parts.append(calib)
    parts.append(calibration_from_texts(bundle, sample_texts(), "built-in multilingual samples"))
    s = min(max_tokens, max(p.embeddings.shape[1] for p in parts))
    emb = np.concatenate([fit_tokens(p.embeddings, s) for p in parts]).astype(np.float32)
    mask = np.concatenate([fit_tokens(p.mask, s) for p in parts]).astype(np.int64)
    lengths = mask.sum(1)
    keep = lengths > 0
    emb, mask, lengths = emb[keep], mask[keep], lengths[keep]
    if len(emb) < 16:
        raise RobustError(f"Only {len(emb)} training texts.",
                          f"Build a calibration pool first: hefsearch compile calib {bundle.path} --from ~/Documents")
    say(f"training texts: {len(emb)} ({'; '.join(p.source for p in parts)}), cut to {s} tokens")
    teacher = teacher_vectors(bundle, emb, mask, lengths)
    order = np.random.default_rng(seed).permutation(len(emb))
    n_hold = min(holdout, len(emb) // 10)
    sha = hashlib.sha256(emb.tobytes() + mask.tobytes()).hexdigest()[:16]
    source = "; ".join(p.source for p in parts)
    if notices:
        source += " (" + ", ".join(notices) + ")"
    return TrainData(emb, mask, lengths, teacher, source, sha, np.sort(order[n_hold:]), np.sort(order[:n_hold]))


def fit_tokens(a: np.ndarray, s: int) -> np.ndarray:
    """Cut (or zero-pad) the token axis (axis 1) to ``s``."""
    if a.shape[1] >= s:
        return a[:, :s]
    pad = [(0, 0)] * a.ndim
    pad[1] = (0, s - a.shape[1])
    return np.pad(a, pad)


def teacher_vectors(bundle: Bundle, emb, mask, lengths, batch: int = 16) -> np.ndarray:
    from hefsearch.embed.backends.cpu import make_session

    sess = make_session(str(resolve_body(bundle).path(bundle)))
    out = np.zeros((len(emb), emb.shape[2]), np.float32)
    for i in range(0, len(emb), batch):
        sl = slice(i, i + batch)
        s = max(1, int(lengths[sl].max()))
        h = sess.run(["last_hidden_state"], {"embeddings": emb[sl, :s], "attention_mask": mask[sl, :s]})[0]
        out[sl] = l2_normalize(mean_pool(h, mask[sl, :s]))
    return out


def length_buckets(lengths: np.ndarray, rows: np.ndarray, batch: int) -> list[np.ndarray]:
    """Rows sorted by length, cut into batches: little padding, and similar texts together."""
    srt = rows[np.argsort(lengths[rows], kind="stable")]
    return [srt[i : i + batch] for i in range(0, len(srt), batch) if len(srt[i : i + batch]) >= 2]

"""Quality metrics shared by ``compile hef``'s emulator report, ``doctor --verify`` and
``bench quality``. numpy only: importing this loads no index, no FAISS, no ML framework.

Two families, and the difference matters:

- **Basis-invariant** metrics compare each space with itself (similarities between texts,
  rankings, nearest neighbours). A HEF's output may come back in another basis (permuted or
  rotated channels) and still be exactly as useful for search; these metrics do not notice.
  Use them first: :func:`top1_retrieval`, :func:`retrieval_margin`,
  :func:`similarity_correlation`, :func:`mean_pairwise_cosine`, :func:`recall_at_k`,
  :func:`mrr`, :func:`overlap_at_k`, :func:`rank_biased_overlap`.
- **Paired** metrics compare two spaces coordinate by coordinate: :func:`paired_cosine`. They
  drop when the basis changes, which is what :func:`procrustes_fit` and
  :func:`detect_permutation` diagnose (is the NPU output a reordering of FP32, or noise?).

All functions take float arrays [N, D] (rows are texts) and normalise rows themselves where
a cosine is meant, so they work on raw hidden states as well as on unit vectors.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable, Sequence

import numpy as np

__all__ = [
    "unit_rows",
    "cosine_matrix",
    "top1_retrieval",
    "retrieval_margin",
    "similarity_correlation",
    "neighbour_agreement",
    "paired_cosine",
    "procrustes_fit",
    "ProcrustesFit",
    "detect_permutation",
    "PermutationCheck",
    "recall_at_k",
    "hit_at_k",
    "mrr",
    "mean_pairwise_cosine",
    "overlap_at_k",
    "rank_biased_overlap",
    "compare_spaces",
    "SpaceComparison",
    "ranking_lost",
]


#: "broken" is judged by retrieval, never by coordinates or by the similarity correlation alone
#: (the public Hailo-10H report's working 8-bit HEF had a correlation of 0.37 and top-1 70.8% vs
#: FP32's 100%): where the reference retrieves translations (top-1 from INFORMATIVE_TOP1), the
#: test space has lost them below LOST_TOP1_SHARE of the reference's top-1; elsewhere (models too
#: small to retrieve translations) its nearest neighbours agree with the reference's for fewer than
#: LOST_NEIGHBOURS of the texts and its similarity correlation is below LOST_CORRELATION as well.
#: One rule for ``doctor --verify`` (evaluate/npu_verify.py) and the emulator report of ``compile hef``.
INFORMATIVE_TOP1, LOST_TOP1_SHARE, LOST_NEIGHBOURS, LOST_CORRELATION = 0.3, 0.25, 0.25, 0.6


def ranking_lost(similarity: float | None, neighbours: float | None, top1_ref: float | None,
                 top1_test: float | None) -> bool:
    """True when a quantised space no longer ranks like its reference (the "broken" verdict):
    see :data:`INFORMATIVE_TOP1` for the rule and why it is about retrieval."""
    if top1_ref is not None and top1_test is not None and top1_ref >= INFORMATIVE_TOP1:
        return top1_test < LOST_TOP1_SHARE * top1_ref
    corr = float("nan") if similarity is None else similarity
    return neighbours is not None and neighbours < LOST_NEIGHBOURS and corr < LOST_CORRELATION


# -- basics ------------------------------------------------------------------------------
def _as2d(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D array [N, D], got shape {x.shape}")
    return x


def unit_rows(x) -> np.ndarray:
    """Rows scaled to unit length (all-zero rows stay zero). float64."""
    x = _as2d(x)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n > 0, n, 1.0)


def cosine_matrix(a, b=None) -> np.ndarray:
    """Cosine similarities between the rows of ``a`` and the rows of ``b`` (default ``a``)."""
    ua = unit_rows(a)
    ub = ua if b is None else unit_rows(b)
    return ua @ ub.T


def _check_paired(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"paired sets need the same number of rows ({a.shape[0]} vs {b.shape[0]})")


# -- translation retrieval (paired sets in ONE space) --------------------------------------
def top1_retrieval(a, b, direction: str = "both") -> float:
    """Fraction of pairs whose partner is the nearest neighbour across the two sets.

    ``a[i]`` and ``b[i]`` are the two sides of pair i (e.g. a sentence and its translation),
    both encoded in the same space. ``"a2b"``: b[i] is a[i]'s nearest among all b;
    ``"b2a"``: the reverse; ``"both"``: the mean of the two.
    """
    a, b = _as2d(a), _as2d(b)
    _check_paired(a, b)
    if a.shape[0] == 0:
        return float("nan")
    s = cosine_matrix(a, b)
    idx = np.arange(a.shape[0])
    a2b = float(np.mean(np.argmax(s, axis=1) == idx))
    b2a = float(np.mean(np.argmax(s, axis=0) == idx))
    if direction == "a2b":
        return a2b
    if direction == "b2a":
        return b2a
    if direction == "both":
        return (a2b + b2a) / 2
    raise ValueError(f"direction must be 'a2b', 'b2a' or 'both', not {direction!r}")


def retrieval_margins(a, b) -> np.ndarray:
    """Per pair (a->b): cos(a_i, b_i) minus the best cos(a_i, b_j), j != i.

    Positive: the partner wins by that much; negative: a wrong text is nearer.
    """
    a, b = _as2d(a), _as2d(b)
    _check_paired(a, b)
    n = a.shape[0]
    if n < 2:
        return np.full(n, np.nan)
    s = cosine_matrix(a, b)
    pos = np.diag(s).copy()
    np.fill_diagonal(s, -np.inf)
    return pos - s.max(axis=1)


def retrieval_margin(a, b, direction: str = "both") -> float:
    """Mean of :func:`retrieval_margins` (``"both"``: averaged over a->b and b->a)."""
    if direction == "a2b":
        return float(np.mean(retrieval_margins(a, b)))
    if direction == "b2a":
        return float(np.mean(retrieval_margins(b, a)))
    if direction == "both":
        return float((np.mean(retrieval_margins(a, b)) + np.mean(retrieval_margins(b, a))) / 2)
    raise ValueError(f"direction must be 'a2b', 'b2a' or 'both', not {direction!r}")


# -- comparing two spaces ------------------------------------------------------------------
def _rankdata(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties averaged (what scipy.stats.rankdata does by default)."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    ranks = np.empty(len(x), dtype=np.float64)
    # boundaries of runs of equal values
    starts = np.r_[0, np.flatnonzero(np.diff(xs)) + 1]
    ends = np.r_[starts[1:], len(x)]
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e + 1) / 2.0
    return ranks


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    x = x - x.mean()
    y = y - y.mean()
    den = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / den) if den > 0 else float("nan")


def similarity_correlation(a, b, method: str = "pearson") -> float:
    """Correlation of the off-diagonal entries of the two spaces' similarity matrices.

    ``a`` and ``b`` encode the same N texts in two spaces (FP32 and 8-bit, say). Each space is
    compared with itself first, so any rotation or permutation of a basis leaves this
    unchanged. ``method``: ``"pearson"`` or ``"spearman"``.
    """
    a, b = _as2d(a), _as2d(b)
    _check_paired(a, b)
    n = a.shape[0]
    if n < 3:
        return float("nan")
    iu = np.triu_indices(n, k=1)
    x = cosine_matrix(a)[iu]
    y = cosine_matrix(b)[iu]
    if method == "spearman":
        x, y = _rankdata(x), _rankdata(y)
    elif method != "pearson":
        raise ValueError(f"method must be 'pearson' or 'spearman', not {method!r}")
    return _pearson(x, y)


def neighbour_agreement(ref, test) -> float:
    """Share of texts whose nearest other text is the same in both spaces (basis-invariant; about
    1/N when the test space has lost the reference's structure)."""
    ref, test = _as2d(ref), _as2d(test)
    _check_paired(ref, test)
    if len(ref) < 2:
        return float("nan")

    def nearest(x):
        sim = cosine_matrix(x)
        np.fill_diagonal(sim, -np.inf)
        return np.argmax(sim, axis=1)

    return float(np.mean(nearest(ref) == nearest(test)))


def paired_cosine(a, b) -> np.ndarray:
    """Per row: cos(a_i, b_i). Coordinate-wise: NOT basis-invariant (a permutation drops it)."""
    a, b = _as2d(a), _as2d(b)
    _check_paired(a, b)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"paired cosine needs the same dimension ({a.shape[1]} vs {b.shape[1]})")
    return np.sum(unit_rows(a) * unit_rows(b), axis=1)


@dataclass
class ProcrustesFit:
    """The orthogonal map R minimising ||a R - b|| on unit rows, and how well it fits.

    ``residual`` is ||a R - b||_F / ||b||_F (0 = b is exactly a rotated/permuted a).
    ``cosine_before`` / ``cosine_after``: mean paired cosine without and with the map.
    ``heldout``: True when the residual and cosine_after were measured on rows not used to
    fit R. Fit on at least a few times more rows than dimensions, or hold rows out: with
    fewer rows than dimensions an orthogonal map fits any noise exactly.
    """

    rotation: np.ndarray
    residual: float
    cosine_before: float
    cosine_after: float
    fit_rows: int
    heldout: bool

    def summary(self) -> dict:
        d = asdict(self)
        d.pop("rotation")
        return d


def procrustes_fit(a, b, *, holdout: float = 0.0, seed: int = 0) -> ProcrustesFit:
    """Orthogonal Procrustes from space ``a`` to space ``b`` (same texts, same dimension).

    A diagnosis tool (``doctor --verify``): a small residual with a low paired cosine means
    the NPU returns the right vectors in another basis (e.g. permuted channels); a large
    residual means the difference is noise that no map can undo. ``holdout`` in [0, 1):
    the fraction of rows kept out of the fit and used for the residual.
    """
    a, b = unit_rows(a), unit_rows(b)
    _check_paired(a, b)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"Procrustes needs the same dimension ({a.shape[1]} vs {b.shape[1]})")
    n = a.shape[0]
    idx = np.random.default_rng(seed).permutation(n)
    n_test = int(round(n * holdout)) if holdout > 0 else 0
    if holdout > 0 and (n_test < 1 or n - n_test < 1):
        raise ValueError(f"holdout={holdout} leaves no rows to fit or to test among {n}")
    test, fit = (idx[:n_test], idx[n_test:]) if n_test else (idx, idx)
    u, _, vt = np.linalg.svd(a[fit].T @ b[fit])
    r = u @ vt
    mapped = a[test] @ r
    den = np.linalg.norm(b[test])
    residual = float(np.linalg.norm(mapped - b[test]) / den) if den > 0 else float("nan")
    return ProcrustesFit(
        rotation=r,
        residual=residual,
        cosine_before=float(np.mean(paired_cosine(a[test], b[test]))),
        cosine_after=float(np.mean(paired_cosine(mapped, b[test]))),
        fit_rows=len(fit),
        heldout=bool(n_test),
    )


@dataclass
class PermutationCheck:
    """Whether space ``b`` is space ``a`` with its channels reordered (and possibly sign-flipped).

    ``mapping[j]`` is the channel of ``a`` that channel ``j`` of ``b`` copies (-1 when none
    matches), ``signs[j]`` its sign, ``min_correlation`` the weakest matched |correlation|.
    ``is_permutation``: every channel matched a distinct source channel above the threshold
    and the mapping is not the identity with all-positive signs.
    """

    is_permutation: bool
    is_identity: bool
    mapping: np.ndarray
    signs: np.ndarray
    min_correlation: float
    matched: int

    def summary(self) -> dict:
        return {
            "is_permutation": self.is_permutation,
            "is_identity": self.is_identity,
            "min_correlation": self.min_correlation,
            "matched": self.matched,
        }


def detect_permutation(a, b, threshold: float = 0.95) -> PermutationCheck:
    """Match every channel of ``b`` to the channel of ``a`` it correlates with most (over texts).

    Works with fewer texts than dimensions (unlike :func:`procrustes_fit`): with N texts, an
    unrelated channel correlates at about 1/sqrt(N), far below a copied channel's 1.0.
    Needs N >= 3 rows.
    """
    a, b = _as2d(a), _as2d(b)
    _check_paired(a, b)
    d = a.shape[1]
    if b.shape[1] != d:
        raise ValueError(f"permutation check needs the same dimension ({d} vs {b.shape[1]})")
    if a.shape[0] < 3:
        raise ValueError("permutation check needs at least 3 rows")
    za = a - a.mean(axis=0)
    zb = b - b.mean(axis=0)
    na = np.linalg.norm(za, axis=0)
    nb = np.linalg.norm(zb, axis=0)
    corr = (zb.T @ za) / np.outer(np.where(nb > 0, nb, 1.0), np.where(na > 0, na, 1.0))  # [d_b, d_a]
    best = np.argmax(np.abs(corr), axis=1)
    best_corr = corr[np.arange(d), best]
    ok = np.abs(best_corr) >= threshold
    mapping = np.where(ok, best, -1)
    signs = np.where(ok, np.sign(best_corr), 0).astype(np.int8)
    distinct = len(set(mapping[ok].tolist())) == int(ok.sum())
    all_matched = bool(ok.all()) and distinct
    identity = all_matched and bool(np.all(mapping == np.arange(d))) and bool(np.all(signs == 1))
    return PermutationCheck(
        is_permutation=all_matched and not identity,
        is_identity=identity,
        mapping=mapping,
        signs=signs,
        min_correlation=float(np.min(np.abs(best_corr))) if d else float("nan"),
        matched=int(ok.sum()) if distinct else len(set(mapping[ok].tolist())),
    )


def mean_pairwise_cosine(x, *, max_rows: int | None = None, seed: int = 0) -> float:
    """Mean cosine between distinct rows: the collapse detector.

    Healthy sentence-embedding libraries sit around 0.0-0.3; a quantised encoder whose
    attention broke pushes every document towards one direction (0.4 and above).
    Exact in O(N D) via the norm of the sum; ``max_rows`` samples rows for huge libraries.
    """
    u = unit_rows(x)
    u = u[np.linalg.norm(u, axis=1) > 0]  # zero vectors (empty texts) carry no direction
    if max_rows is not None and len(u) > max_rows:
        u = u[np.random.default_rng(seed).choice(len(u), size=max_rows, replace=False)]
    n = len(u)
    if n < 2:
        return float("nan")
    s = u.sum(axis=0)
    return float((s @ s - n) / (n * (n - 1)))


# -- rankings ------------------------------------------------------------------------------
def _relevant_sets(truth_ids) -> list[set]:
    out = []
    for t in truth_ids:
        if isinstance(t, (int, np.integer)):
            out.append({int(t)})
        else:
            out.append({int(v) for v in t})
    return out


def recall_at_k(truth_ids, got_ids, k: int) -> float:
    """Mean over queries of |relevant ∩ got[:k]| / |relevant|.

    ``truth_ids[q]`` is the relevant id of query q, or an iterable of relevant ids (e.g.
    FP32's top-1 as ground truth: one id per query; a labelled set: several).
    ``got_ids[q]`` is the ranked list a space returned. Queries without relevant ids are
    skipped.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    rel = _relevant_sets(truth_ids)
    if len(rel) != len(got_ids):
        raise ValueError(f"{len(rel)} ground-truth entries for {len(got_ids)} rankings")
    vals = [len(r & {int(g) for g in list(got)[:k]}) / len(r) for r, got in zip(rel, got_ids) if r]
    return float(np.mean(vals)) if vals else float("nan")


def hit_at_k(truth_ids, got_ids, k: int) -> float:
    """Fraction of queries with at least one relevant id in ``got[:k]`` (success@k). Equals
    :func:`recall_at_k` when each query has one relevant id; with a set (e.g. every chunk of
    the expected document) it asks "was the document found", not "were all its chunks"."""
    if k < 1:
        raise ValueError("k must be >= 1")
    rel = _relevant_sets(truth_ids)
    if len(rel) != len(got_ids):
        raise ValueError(f"{len(rel)} ground-truth entries for {len(got_ids)} rankings")
    vals = [float(bool(r & {int(g) for g in list(got)[:k]})) for r, got in zip(rel, got_ids) if r]
    return float(np.mean(vals)) if vals else float("nan")


def mrr(truth_ids, got_ids, k: int | None = None) -> float:
    """Mean reciprocal rank of the first relevant id in each ranking (0 when absent or
    beyond ``k``)."""
    rel = _relevant_sets(truth_ids)
    if len(rel) != len(got_ids):
        raise ValueError(f"{len(rel)} ground-truth entries for {len(got_ids)} rankings")
    vals = []
    for r, got in zip(rel, got_ids):
        if not r:
            continue
        rr = 0.0
        for pos, g in enumerate(list(got)[: k if k else None], start=1):
            if int(g) in r:
                rr = 1.0 / pos
                break
        vals.append(rr)
    return float(np.mean(vals)) if vals else float("nan")


def overlap_at_k(a_ids: Sequence, b_ids: Sequence, k: int) -> float:
    """|top-k of a ∩ top-k of b| / k: how many of one list's first k the other also has."""
    if k < 1:
        raise ValueError("k must be >= 1")
    return len(set(list(a_ids)[:k]) & set(list(b_ids)[:k])) / k


def rank_biased_overlap(a_ids: Sequence, b_ids: Sequence, p: float = 0.9, k: int | None = None) -> float:
    """Extrapolated rank-biased overlap (Webber, Moffat & Zobel 2010, eq. 32) of two rankings.

    1.0 for identical rankings, 0.0 for disjoint ones; top ranks weigh most (``p`` = 0.9
    puts about 86% of the weight on the first 10). Both lists are cut to the shorter length
    (or ``k``).
    """
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    a, b = list(a_ids), list(b_ids)
    depth = min(len(a), len(b))
    if k is not None:
        depth = min(depth, k)
    if depth == 0:
        return float("nan")
    seen_a: set = set()
    seen_b: set = set()
    overlap = 0
    acc = 0.0
    for d in range(1, depth + 1):
        x, y = a[d - 1], b[d - 1]
        if x == y:
            overlap += 1
        else:
            overlap += (x in seen_b) + (y in seen_a)
        seen_a.add(x)
        seen_b.add(y)
        acc += (overlap / d) * p**d
    return float((overlap / depth) * p**depth + (1 - p) / p * acc)


def topk_ids(scores: np.ndarray, k: int) -> np.ndarray:
    """Indexes of the k largest scores per row, best first (ties by lower index)."""
    scores = np.asarray(scores)
    k = min(k, scores.shape[1])
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    rows = np.arange(scores.shape[0])[:, None]
    order = np.lexsort((part, -scores[rows, part]), axis=1)
    return part[rows, order]


# -- one call for reports --------------------------------------------------------------------
@dataclass
class SpaceComparison:
    """A reference space (FP32) against a test space (8-bit, HEF, simulation) on paired texts.

    ``top1_*`` and ``margin_*`` need translation pairs (``pairs``); otherwise they are None.
    """

    n_texts: int
    paired_cosine_mean: float | None
    paired_cosine_min: float | None
    similarity_pearson: float
    similarity_spearman: float
    mean_pairwise_cosine_ref: float
    mean_pairwise_cosine_test: float
    neighbour_agreement: float | None = None
    top1_ref: float | None = None
    top1_test: float | None = None
    margin_ref: float | None = None
    margin_test: float | None = None
    permutation: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def compare_spaces(ref, test, pairs: Iterable[tuple[int, int]] | None = None) -> SpaceComparison:
    """Everything a quality report shows, for N texts encoded in two spaces.

    ``pairs``: (i, j) row pairs that are translations of each other, for top-1 retrieval and
    margins within each space. The paired cosine and the permutation check are only filled
    when the dimensions agree.
    """
    ref, test = _as2d(ref), _as2d(test)
    _check_paired(ref, test)
    same_dim = ref.shape[1] == test.shape[1]
    pc = paired_cosine(ref, test) if same_dim and len(ref) else None
    out = SpaceComparison(
        n_texts=len(ref),
        paired_cosine_mean=float(pc.mean()) if pc is not None else None,
        paired_cosine_min=float(pc.min()) if pc is not None else None,
        similarity_pearson=similarity_correlation(ref, test, "pearson"),
        similarity_spearman=similarity_correlation(ref, test, "spearman"),
        mean_pairwise_cosine_ref=mean_pairwise_cosine(ref),
        mean_pairwise_cosine_test=mean_pairwise_cosine(test),
        neighbour_agreement=neighbour_agreement(ref, test),
    )
    pairs = list(pairs or [])
    if pairs:
        ia = [i for i, _ in pairs]
        ib = [j for _, j in pairs]
        out.top1_ref = top1_retrieval(ref[ia], ref[ib])
        out.top1_test = top1_retrieval(test[ia], test[ib])
        out.margin_ref = retrieval_margin(ref[ia], ref[ib])
        out.margin_test = retrieval_margin(test[ia], test[ib])
    if same_dim and len(ref) >= 3:
        out.permutation = detect_permutation(ref, test).summary()
    return out


def k_occurrence_skewness(x, *, k: int = 10, max_rows: int | None = 2000, seed: int = 0) -> float:
    """Skewness of the k-occurrence: how often each row is among the ``k`` nearest (cosine) of
    the other rows. About 0 when every row is as often a neighbour as any other; well above 1
    when a few rows (hubs) are near nearly everything and many are near nothing. O(N^2) over
    at most ``max_rows`` sampled rows; nan under ``k + 2`` rows."""
    u = unit_rows(x)
    u = u[np.linalg.norm(u, axis=1) > 0]
    if max_rows is not None and len(u) > max_rows:
        u = u[np.random.default_rng(seed).choice(len(u), size=max_rows, replace=False)]
    if len(u) < k + 2:
        return float("nan")
    sim = u @ u.T
    np.fill_diagonal(sim, -np.inf)
    nearest = np.argpartition(-sim, k, axis=1)[:, :k]
    counts = np.bincount(nearest.ravel(), minlength=len(u)).astype(np.float64)
    c = counts - counts.mean()
    var = float((c * c).mean())
    return float((c ** 3).mean() / var ** 1.5) if var > 0 else 0.0


def hub_share(top1, relevant=None, *, hubs: int = 3) -> float:
    """The share of queries whose top hit is one of the ``hubs`` items that take most top-1
    places among the queries answered wrongly (``relevant[i]``: the set of right items of query
    i; None: every query counts). High when the same few documents come first whatever is
    asked. ``top1[i]`` is None for a query with no hit."""
    wrong = [t for i, t in enumerate(top1)
             if t is not None and (relevant is None or t not in relevant[i])]
    if not top1 or not wrong:
        return 0.0
    counts: dict = {}
    for t in wrong:
        counts[t] = counts.get(t, 0) + 1
    return sum(sorted(counts.values(), reverse=True)[:hubs]) / len(top1)

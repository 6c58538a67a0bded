"""Synthetic sentence-embedding-like vectors for the scale benchmarks, and how to tell how
realistic they are.

Two kinds, both unit vectors around a few thousand topic centres with Zipf-like sizes:

- ``documents`` (the default of ``bench/scale.py``): the way a folder of documents looks to an
  encoder. Topics group under 50 broad themes; each topic varies along its own 24 directions
  (power-law scales: a few strong, many weak); chunks come in documents of ~8 chunks that share a
  document offset, plus some isotropic noise. Calibrated with :func:`describe` against the
  all-MiniLM-L6-v2 vectors of 5,143 distinct real chunks (Rust and Debian docs, npm READMEs): see
  the table in ``bench/realism.py``: the same local intrinsic dimension (~11), and about twice
  their scan for IVF recall 0.95, i.e. *harder* than that real folder, on purpose.
- ``isotropic``: each point is its topic centre plus gaussian noise in all 384 directions. Its
  neighbours are all about equally far (local intrinsic dimension ~54 against ~11 for real text
  embeddings), which no partition can exploit: IVF must scan about a fifth of the space for
  recall 0.95 at any size. A worst case, kept to show what such data costs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KINDS = ("documents", "isotropic")


def cluster_centres(dim: int, clusters: int = 2000, seed: int = 0, mean_weight: float = 0.45,
                    spread: float = 0.5, supers: int = 0,
                    super_spread: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(unit topic centres around one dominant direction, topic weights). ``supers`` > 0 groups
    the topics under that many broad themes, each pulling its topics ``super_spread`` its way."""
    rng = np.random.default_rng(seed)
    mean = _unit(rng.standard_normal(dim).astype(np.float32))
    g = _unit(rng.standard_normal((clusters, dim)).astype(np.float32))
    centres = mean_weight * mean + spread * g
    w = rng.pareto(1.2, clusters) + 1
    if supers:
        themes = _unit(rng.standard_normal((supers, dim)).astype(np.float32))
        centres += super_spread * themes[rng.integers(0, supers, clusters)]
    return _unit(centres), w / w.sum()


def isotropic_blocks(n: int, dim: int = 384, *, seed: int = 0, points_seed: int = 1,
                     noise: float = 0.6, block: int = 100_000):
    """``n`` unit vectors: topic centre + isotropic gaussian noise, in blocks of ``block``;
    ``points_seed`` draws other points from the same topics (queries)."""
    centres, weights = cluster_centres(dim, seed=seed)
    rng = np.random.default_rng(points_seed)
    for start in range(0, n, block):
        m = min(block, n - start)
        c = rng.choice(len(centres), m, p=weights)
        yield _unit(centres[c] + noise / np.sqrt(dim) * rng.standard_normal((m, dim)).astype(np.float32))


@dataclass(frozen=True)
class DocumentShape:
    """How the ``documents`` kind is shaped; the defaults are the calibrated ones (module doc)."""

    rank: int = 24  # directions each topic varies along
    alpha: float = 0.7  # power-law decay of their scales
    doc_scale: float = 1.0  # the offset a document's chunks share
    chunk_scale: float = 0.9  # each chunk's own offset
    iso: float = 0.9  # isotropic noise
    mean_chunks: int = 8  # chunks per document, on average


def document_blocks(n: int, dim: int = 384, *, seed: int = 0, points_seed: int = 1,
                    shape: DocumentShape = DocumentShape(), block: int = 100_000):
    """``n`` unit vectors shaped like chunks of documents (module doc), in blocks of ``block``."""
    rank, alpha, doc_scale = shape.rank, shape.alpha, shape.doc_scale
    chunk_scale, iso, mean_chunks = shape.chunk_scale, shape.iso, shape.mean_chunks
    centres, weights = cluster_centres(dim, seed=seed, mean_weight=0.55, spread=0.45, supers=50,
                                       super_spread=0.35)
    rs = np.random.default_rng(seed + 1000)
    basis = np.linalg.qr(rs.standard_normal((dim, dim)))[0].astype(np.float32)
    own = np.argsort(rs.random((len(centres), dim)), axis=1)[:, :rank]  # each topic's directions
    scale = (np.arange(1, rank + 1, dtype=np.float32) ** -alpha)
    scale /= np.sqrt((scale**2).sum())
    rng = np.random.default_rng(points_seed)
    done = 0
    while done < n:
        m = min(block, n - done)
        docs = m // mean_chunks * 2 + 2  # more than enough documents for m chunks
        topic = rng.choice(len(centres), docs, p=weights)
        doc_of = np.repeat(np.arange(docs), rng.geometric(1 / mean_chunks, docs))[:m]
        if len(doc_of) < m:  # pragma: no cover - 2x the expected documents always suffice
            continue
        t = topic[doc_of]
        doc_part = rng.standard_normal((docs, rank)).astype(np.float32) * scale * doc_scale
        chunk_part = rng.standard_normal((m, rank)).astype(np.float32) * scale * chunk_scale
        coef = np.zeros((m, dim), np.float32)
        np.put_along_axis(coef, own[t], doc_part[doc_of] + chunk_part, axis=1)
        noise = iso / np.sqrt(dim) * rng.standard_normal((m, dim)).astype(np.float32)
        done += m
        yield _unit(centres[t] + coef @ basis.T + noise)


def blocks(kind: str, n: int, dim: int = 384, **kw):
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
    return (document_blocks if kind == "documents" else isotropic_blocks)(n, dim, **kw)


def vectors(kind: str, n: int, dim: int = 384, **kw) -> np.ndarray:
    return np.concatenate(list(blocks(kind, n, dim, **kw))) if n else np.empty((0, dim), np.float32)


def clustered_vectors(n: int, dim: int = 384, **kw) -> np.ndarray:
    """The isotropic kind (the tests' vectors: their thresholds were measured on it)."""
    return vectors("isotropic", n, dim, **kw)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


# -- how realistic --------------------------------------------------------------------------
def describe(x: np.ndarray, *, sample: int = 300, seed: int = 0) -> dict:
    """What makes vectors easy or hard to search: mean cosine of random pairs, cosine of the
    1st and 10th nearest neighbour (medians), local intrinsic dimension (MLE on 20 neighbours),
    and for an IVF index of sqrt(n) lists (exact codes) recall@10 and the share of vectors
    scanned at nprobe 1, 2, 4, ... (uneven lists show as a scanned share above nprobe/lists)."""
    import faiss

    from hefsearch.embed.metrics import recall_at_k

    n, dim = x.shape
    rng = np.random.default_rng(seed)
    s = rng.choice(n, min(sample, n), replace=False)
    flat = faiss.IndexFlatIP(dim)
    flat.add(x)
    d, i = flat.search(x[s], 21)
    d, i = d[:, 1:], i[:, 1:]  # each sample's own vector left out
    dist = np.sqrt(np.maximum(2 - 2 * d, 1e-12))
    lid = -1 / np.mean(np.log(dist[:, :-1] / dist[:, -1:]), axis=1)
    lists = max(1, int(np.sqrt(n)))
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, lists, faiss.METRIC_INNER_PRODUCT)
    ivf.train(x)
    ivf.add(x)
    curve = []
    for nprobe in (1, 2, 4, 8, 16, 32):
        if nprobe > lists:
            break
        ivf.nprobe = nprobe
        faiss.cvar.indexIVF_stats.reset()
        _d, j = ivf.search(x[s], 11)
        recall = recall_at_k(i[:, :10], j[:, 1:], 10)  # each sample's own vector left out
        scanned = faiss.cvar.indexIVF_stats.ndis / len(s) / n
        curve.append((nprobe, round(float(recall), 3), round(float(scanned), 4)))
    return {"n": n, "pair_cos": round(float((x[s] @ x[rng.choice(n, len(s))].T).mean()), 3),
            "nn1_cos": round(float(np.median(d[:, 0])), 3), "nn10_cos": round(float(np.median(d[:, 9])), 3),
            "lid": round(float(np.median(lid)), 1), "ivf_lists": lists, "ivf_curve": curve}


def distinct(x: np.ndarray, threshold: float = 0.98, block: int = 2000) -> np.ndarray:
    """``x`` without near-duplicates (cosine >= ``threshold`` to an earlier vector): real folders
    hold many copies (licences, templates) that make neighbours trivially close."""
    import faiss

    seen = faiss.IndexFlatIP(x.shape[1])
    keep = []
    for s in range(0, len(x), block):
        b = x[s : s + block]
        new = seen.search(b, 1)[0][:, 0] < threshold if seen.ntotal else np.ones(len(b), bool)
        within = np.triu(b @ b.T > threshold, 1).any(axis=0)
        b = b[new & ~within]
        seen.add(b)
        keep.append(b)
    return np.concatenate(keep) if keep else x[:0]

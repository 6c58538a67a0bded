"""A space's FAISS index checked against its raw vectors (the source of truth): whether a
sample of them is still found (at load, and by ``doctor``), which stored vectors are not
finite, and the recall of its search against exact search (after a build: the IVF's nprobe and
HNSW's efSearch are tuned by it). A mixin of :class:`~hefsearch.index.spaces.Space`, whose
state (members, index, raw vectors, lock) it reads."""

from __future__ import annotations

import random

import numpy as np

from .faiss_index import (LOAD_CHECK_SAMPLE, RECALL_LEAVE_OUT, RECALL_QUERIES, SELF_FIND_SHARE, ann_search,
                          exact_top_k, inner_index, ivf_of, load_faiss, outside_own_document, tune_ef_search,
                          tune_nprobe)


class IndexChecks:
    """The checks of :class:`~hefsearch.index.spaces.Space`'s index."""

    def index_mismatch(self, sample: int = LOAD_CHECK_SAMPLE) -> str | None:
        """Why the FAISS index does not hold the raw vectors, or None when a sample agrees.

        An index that stores vectors exactly (flat, HNSW over flat) must give back the raw
        vector of each sampled id; any other (IVF, PQ: lossy) must find most sampled raw
        vectors themselves. Raw vectors that are not finite are left to ``doctor``.
        """
        with self._lock:
            if self.index is None:
                return None
            ids = (self._members & self._in_index).ids
            if not len(ids):
                return None
            # stdlib random: numpy.random costs a cold search ~6 ms to import
            pick = ids[sorted(random.sample(range(len(ids)), min(sample, len(ids))))]
            raw = self.raw.get(pick)
            keep = np.isfinite(raw).all(axis=1)
            pick, raw = pick[keep], np.ascontiguousarray(raw[keep])
            if not len(pick):
                return None
            if self._stores_exact_vectors():
                got = self.index.reconstruct_batch(pick)
                differ = int((~np.isclose(got, raw, rtol=1e-5, atol=1e-6).all(axis=1)).sum())
                if differ:
                    return f"{differ} of {len(pick)} sampled vectors differ"
                return None
            # the index's own ranking, without re-scoring (which would hide any index
            # whose candidates cover the space)
            _scores, found = self.index.search(raw, min(10, self.index.ntotal))
            share = float(np.mean([self._finds_itself(q, row) for q, row in zip(raw, found)]))
            if share < SELF_FIND_SHARE:
                return f"only {share:.0%} of {len(pick)} sampled vectors find themselves"
            return None

    def _finds_itself(self, query: np.ndarray, found: np.ndarray) -> bool:
        """Whether a search hit holds the query's own raw vector (by value: a chunk repeated
        more often than the search returns finds a twin, not necessarily its own id)."""
        ids = found[(found >= 0) & self._members.contains(found)].astype(np.int64)
        if not len(ids):
            return False
        return bool(np.isclose(self.raw.get(ids), query, rtol=1e-5, atol=1e-6).all(axis=1).any())

    def nonfinite_ids(self, block: int = 65536) -> np.ndarray:
        """Member ids whose stored vector holds NaN or infinity (reads every vector: doctor)."""
        with self._lock:
            ids = self._members.ids
        ids = ids[self.raw.has(ids)] if len(ids) else ids
        bad = [part[~np.isfinite(self.raw.get(part)).all(axis=1)]
               for part in (ids[i : i + block] for i in range(0, len(ids), block))]
        return np.concatenate(bad) if bad else np.empty(0, np.int64)

    def _stores_exact_vectors(self) -> bool:
        faiss = load_faiss()
        base = inner_index(self.index)
        if hasattr(base, "hnsw"):
            base = faiss.downcast_index(base.storage)
        return isinstance(base, faiss.IndexFlat)

    def measure_recall(self, queries: int = RECALL_QUERIES, k: int = 10) -> dict:
        """recall@k of this space's search (re-scoring included) against exact search, with
        ``queries`` stored vectors of the space as queries, each query's own document left out
        of both lists (ids within :data:`RECALL_LEAVE_OUT` of its own id; reads every raw
        vector once). An IVF index first gets the smallest
        ``nprobe`` reaching :data:`TARGET_RECALL` (:func:`tune_nprobe`): how far neighbours
        spread over the lists depends on the data, not only on its size; an HNSW index the
        smallest efSearch of a doubling reaching :data:`HNSW_TARGET_RECALL`
        (:func:`tune_ef_search`, kept in ``index.json`` as ``ef_search``)."""
        with self._lock:
            ids = (self._members & self._in_index).ids  # sorted
            if len(ids) <= k:
                return {}
            rng = np.random.default_rng(1)
            q_ids = np.sort(rng.choice(ids, min(queries, len(ids)), replace=False))
            q = np.ascontiguousarray(self.raw.get(q_ids))
            wide = k + 2 * RECALL_LEAVE_OUT + 1  # enough to keep k after leaving out
            truth = exact_top_k(q, ids, self.raw.get, wide)

            def recall(ef: int | None = None) -> float:
                found = ann_search(self.index, self.raw, q, wide, ef_search=ef or self._ef_search())[1]
                hits = [len(outside_own_document(f, own, k) & outside_own_document(t, own, k)) / k
                        for f, t, own in zip(found, truth, q_ids)]
                return float(np.mean(hits))

            ivf = ivf_of(self.index)
            out = {"recall_queries": len(q), "recall_vectors": int(len(ids))}
            if ivf is not None:
                r = tune_nprobe(ivf, recall)
                out["nprobe"] = int(ivf.nprobe)
            elif hasattr(inner_index(self.index), "hnsw"):
                out["ef_search"], r = tune_ef_search(inner_index(self.index), recall)
                self.index_stats["ef_search"] = out["ef_search"]
            else:
                r = recall()
            return {"recall_at_10": round(r, 4), **out}

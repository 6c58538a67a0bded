"""Which FAISS index for which space size (issue 22): flat, 8-bit scalar codes re-scored from
float32, HNSW32 at several efSearch, on the same vectors in the same run.

    python bench/index_choice.py [--sizes 10000 100000] [--kinds random documents] [--queries 200]

Per size and kind: p50 and p95 of one query at a time (one FAISS thread, as hefsearch searches;
top 50, the candidates a grouped search asks for), the ratio of each p50 to flat's, and recall@10
of the top 10 against exact search, for new queries from the same distribution. ``random``: unit
gaussian vectors (bench/query_latency.py's stub; the hardest case for a graph index);
``documents``: bench/synthetic.py's document-like vectors. The load average is printed beside
every row: other jobs on the cores move the figures, so compare rows of one run.
The size rule in hefsearch.index.faiss_index (DEFAULT_SQ8_THRESHOLD) comes from this table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from hefsearch.bench import synthetic

DIM, TOP = 384, 50


def vectors(kind: str, n: int) -> np.ndarray:
    if kind == "random":
        x = np.random.default_rng(0).standard_normal((n, DIM)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)
    return synthetic.vectors(kind, n, DIM).astype(np.float32)


def one_at_a_time(search, queries) -> tuple[list[float], list[np.ndarray]]:
    times, found = [], []
    for q in queries:
        t = time.perf_counter()
        found.append(search(q[None]))
        times.append((time.perf_counter() - t) * 1000)
    return times, found


def recall_at_10(found, truth) -> float:
    return float(np.mean([len(set(f[:10].tolist()) & set(t.tolist())) / 10 for f, t in zip(found, truth)]))


def variants(db: np.ndarray, hnsw_ef: list[int]):
    import faiss

    flat = faiss.IndexFlatIP(DIM)
    flat.add(db)
    yield "flat (exact)", lambda q: flat.search(q, TOP)[1][0]
    sq = faiss.IndexScalarQuantizer(DIM, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
    sq.train(db)
    sq.add(db)
    for fetch in (64, 128):
        def sq8(q, fetch=fetch):  # codes, then the candidates re-scored from float32 (as hefsearch)
            cand = sq.search(q, fetch)[1][0]
            return cand[np.argsort(-(db[cand] @ q[0]), kind="stable")[:TOP]]
        yield f"SQ8 + re-score {fetch}", sq8
    h = faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT)
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    h.add(db)
    faiss.omp_set_num_threads(1)
    for ef in hnsw_ef:
        def hnsw(q, ef=ef):
            h.hnsw.efSearch = ef
            return h.search(q, TOP)[1][0]
        yield f"HNSW32 efSearch {ef}", hnsw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--kinds", nargs="+", default=["random", "documents"])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--ef", type=int, nargs="+", default=[64, 128, 256, 512])
    args = ap.parse_args()
    import faiss

    faiss.omp_set_num_threads(1)
    print(f"cores: {os.cpu_count()}; p50/p95 of {args.queries} single queries, top {TOP}; "
          "ratio = flat p50 / this p50")
    for kind in args.kinds:
        for n in args.sizes:
            x = vectors(kind, n + args.queries)
            db, queries = x[:n], x[n:]
            truth = None
            for name, search in variants(db, args.ef):
                times, found = one_at_a_time(search, queries)
                if truth is None:
                    truth, flat_p50 = [f[:10] for f in found], statistics.median(times)
                p50 = statistics.median(times)
                print(f"{kind:9s} {n:>9,} {name:22s} p50 {p50:6.2f} ms  p95 {np.percentile(times, 95):6.2f} ms"
                      f"  ratio {flat_p50 / p50:4.1f}x  recall@10 {recall_at_10(found, truth):.4f}"
                      f"  load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()

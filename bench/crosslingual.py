"""Cross-lingual ranking with and without the language-neutral transform (issue 14, item 3).

    python bench/crosslingual.py --bundle BUNDLE          # a multilingual bundle (e5: prefixes)
    python bench/crosslingual.py --model HF_FOLDER        # exported into a temp bundle first

Vector search only (no keyword fusion, no re-ranking), CPU FP32 (or ``--backend``, e.g.
``npu-sim --sim a8-robust``), top-1 = the first hit is (a chunk of) a relevant document. Three sets:

- ``parallel``: the bundled parallel set (evaluate/parallel.py): all its sentences are the
  documents; each sentence is a query whose relevant document is its translation (itself
  left out). Every query is cross-lingual, and its own language's sentences, near-duplicates
  among them, compete.
- ``sample``: data/sample-corpus indexed by hefsearch (real extraction and chunking) with the
  queries of its queries.tsv: cross-lingual, same-language and keyword (codes) queries.
- ``mixed`` (larger, held out): the sample corpus plus, from each parallel pair, one side
  (drawn at random, seeded) as a one-sentence document, plus the documents of
  bench/retrieval_sets.py (English, and de/fr/es with English distractors); queries: the other
  side of each pair (cross-lingual), the sample queries and the retrieval sets' queries
  (English same-language, English -> de/fr/es cross-lingual). The offsets are fitted on the
  documents only; no query is in them.

For each alpha (0 = without the transform) and language minimum it prints top-1 and top-10
per query kind (with the hub correction of queries), then at the default alpha without and with
hub corrections of several strengths (``--hub-betas``). Then it checks the library path: ``derive_neutral_space`` on the sample
library and ``Searcher`` (vector, no re-rank) must give the figure computed here.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hefsearch.bench.harness import ROOT

from hefsearch.search.request import SearchRequest
SAMPLES = ROOT / "data" / "sample-corpus"


def kind_of_query(note: str) -> str:
    if note.startswith("keyword"):
        return "keyword"
    return "cross" if "cross-lingual" in note else "same"


def sample_queries() -> list[tuple[str, set[str], str]]:
    with open(SAMPLES / "queries.tsv", encoding="utf-8") as f:
        return [(r["query"], set(r["expected"].split("|")), kind_of_query(r["note"]))
                for r in csv.DictReader(f, delimiter="\t")]


def top_docs(doc_vecs, doc_keys, q_vecs, k=10, exclude=None) -> list[list]:
    """Per query the keys of the top-k *distinct* documents by inner product."""
    scores = q_vecs @ doc_vecs.T
    if exclude is not None:
        scores[np.arange(len(q_vecs)), exclude] = -np.inf
    out = []
    for row in np.argsort(-scores, axis=1):
        keys: list = []
        for j in row:
            if doc_keys[j] not in keys:
                keys.append(doc_keys[j])
                if len(keys) == k:
                    break
        out.append(keys)
    return out


def score(ranked, wanted, kinds) -> dict[str, tuple[float, float, int]]:
    """kind -> (top-1, top-10, count)."""
    out = {}
    for kind in sorted(set(kinds)):
        rows = [i for i, k in enumerate(kinds) if k == kind]
        t1 = np.mean([ranked[i][0] in wanted[i] for i in rows])
        t10 = np.mean([bool(set(ranked[i]) & wanted[i]) for i in rows])
        out[kind] = (float(t1), float(t10), len(rows))
    return out


@dataclass
class LabelledSet:
    """Document and query vectors with their languages, each query's relevant document keys and
    kind; ``exclude[i]``: a document row query ``i`` may not find (itself, in the parallel set)."""

    docs: np.ndarray
    doc_langs: list
    doc_keys: list
    queries: np.ndarray
    q_langs: list
    wanted: list[set]
    kinds: list[str]
    exclude: np.ndarray | None = None


def evaluate(s: LabelledSet, alpha: float, min_chunks: int, reference=None,
             beta: float | None = None) -> dict[str, tuple[float, float, int]]:
    """Top-1/top-10 per query kind; ``reference`` (``reference_queries(enc)``) and ``beta``:
    the hub correction (beta None: the product's HUB_BETA; no reference: none)."""
    from hefsearch.embed.post_transform import LanguageNeutral
    from hefsearch.search.language_neutral import HUB_BETA

    docs, queries = s.docs, s.queries
    if alpha:
        ln = LanguageNeutral.fit(docs, s.doc_langs, alpha=alpha, min_chunks=min_chunks, reference=reference,
                                 beta=HUB_BETA if beta is None else beta)
        docs, queries = ln.apply(docs, languages=s.doc_langs), ln.apply(queries, languages=s.q_langs, passages=False)
    return score(top_docs(docs, s.doc_keys, queries, exclude=s.exclude), s.wanted, s.kinds)


def build_sets(enc, tmp: Path) -> tuple[dict[str, LabelledSet], object]:
    from hefsearch.bench.retrieval_sets import CROSS_DOCS, CROSS_QUERIES, ENGLISH_DOCS, ENGLISH_QUERIES
    from hefsearch.embed.language import identify_all
    from hefsearch.evaluate.parallel import load_parallel
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync

    sets = {}
    pairs = load_parallel()
    sents = [p.text_a for p in pairs] + [p.text_b for p in pairs]
    partner = list(range(len(pairs), 2 * len(pairs))) + list(range(len(pairs)))
    s_docs = enc.encode_passages(sents)
    s_queries = enc.encode_queries(sents)
    s_langs = identify_all(sents)
    sets["parallel"] = LabelledSet(docs=s_docs, doc_langs=s_langs, doc_keys=list(range(len(sents))),
                                   queries=s_queries, q_langs=s_langs, wanted=[{j} for j in partner],
                                   kinds=["cross"] * len(sents), exclude=np.arange(len(sents)))

    lib = Library.open(tmp / "sample-lib")
    sync(lib, [SAMPLES], [enc])
    ids = lib.member_ids(enc.space_name)  # sorted
    chunks = lib.chunks(ids)
    c_vecs = lib.space(enc.space_name).vectors([c.id for c in chunks])
    c_keys = [Path(c.path).name for c in chunks]
    c_langs = identify_all([c.text for c in chunks])
    qs = sample_queries()
    q_texts = [q for q, _, _ in qs]
    q_vecs = enc.encode_queries(q_texts)
    q_langs = identify_all(q_texts)
    sets["sample"] = LabelledSet(docs=c_vecs, doc_langs=c_langs, doc_keys=c_keys, queries=q_vecs, q_langs=q_langs,
                                 wanted=[w for _, w, _ in qs], kinds=[k for _, _, k in qs])

    rng = random.Random(14)
    side = [rng.random() < 0.5 for _ in pairs]  # True: text_a is the document
    d_idx = [i if a else len(pairs) + i for i, a in enumerate(side)]
    q_idx = [partner[i] for i in d_idx]
    r_docs = {**ENGLISH_DOCS, **CROSS_DOCS}
    r_queries = [(q, d, "same") for q, d in ENGLISH_QUERIES] + [(q, d, "cross") for q, d in CROSS_QUERIES]
    r_texts = [q for q, _, _ in r_queries]
    sets["mixed"] = LabelledSet(
        docs=np.vstack([c_vecs, s_docs[d_idx], enc.encode_passages(list(r_docs.values()))]),
        doc_langs=c_langs + [s_langs[i] for i in d_idx] + identify_all(r_docs.values()),
        doc_keys=c_keys + [f"par:{i % len(pairs)}" for i in d_idx] + [f"set:{k}" for k in r_docs],
        queries=np.vstack([q_vecs, s_queries[q_idx], enc.encode_queries(r_texts)]),
        q_langs=q_langs + [s_langs[i] for i in q_idx] + identify_all(r_texts),
        wanted=[w for _, w, _ in qs] + [{f"par:{i % len(pairs)}"} for i in q_idx]
        + [{f"set:{d}"} for _, d, _ in r_queries],
        kinds=[k for _, _, k in qs] + ["cross"] * len(q_idx) + [k for _, _, k in r_queries])
    return sets, lib


def language_counts(langs) -> str:
    counts: dict = {}
    for lang in langs:
        counts[lang or "?"] = counts.get(lang or "?", 0) + 1
    return " ".join(f"{k}:{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def check_library_path(lib, enc, alpha: float, min_chunks: int, expected: dict) -> str:
    from hefsearch.search import Searcher
    from hefsearch.search.language_neutral import derive_neutral_space

    sp = derive_neutral_space(lib, enc.space_name, enc, alpha=alpha, min_chunks=min_chunks)
    s = Searcher(lib, bundle=str(enc.bundle.path))
    try:
        hits = []
        for q, want, kind in sample_queries():
            res = s.search(SearchRequest(q, k=1, mode="vector", space=sp.info.name, rerank_depth=0))
            hits.append((kind, bool(res.hits) and Path(res.hits[0].path).name in want))
    finally:
        s.close()
    got = {k: float(np.mean([h for kk, h in hits if kk == k])) for k in {k for k, _ in hits}}
    same = all(abs(got[k] - expected[k][0]) < 1e-9 for k in got)
    return ("agrees" if same else "DIFFERS") + ": " + ", ".join(f"{k} {got[k]:.3f}" for k in sorted(got))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--bundle", help="a multilingual model bundle")
    src.add_argument("--model", help="a Hugging Face model folder, exported to a temp bundle")
    ap.add_argument("--alphas", default="0,0.25,0.5,0.75,1.0")
    ap.add_argument("--min-chunks", default="3,5,8,20", help="a language's minimum chunks for an offset")
    ap.add_argument("--backend", default="cpu", help="the encoder backend (cpu, cpu-int8, npu-sim)")
    ap.add_argument("--sim", default=None, help="with --backend npu-sim: the simulation (e.g. a8-robust)")
    ap.add_argument("--hub-betas", default="none,0.25,0.5,1",
                    help="hub corrections compared at the default alpha (none: without one)")
    ap.add_argument("--check-alpha", type=float, default=None,
                    help="alpha of the library-path check (default: the module's DEFAULT_ALPHA)")
    args = ap.parse_args(argv)
    from hefsearch.embed import Encoder
    from hefsearch.search.language_neutral import DEFAULT_ALPHA, MIN_CHUNKS, reference_queries

    alphas = [float(a) for a in args.alphas.split(",")]
    minimums = [int(m) for m in args.min_chunks.split(",")]
    with tempfile.TemporaryDirectory(prefix="hefsearch-xling-") as t:
        tmp = Path(t)
        bundle = args.bundle
        if args.model:
            from hefsearch.bench.harness import export_temp_bundle

            bundle = export_temp_bundle(args.model, tmp)
        opts = {"profile": args.sim} if args.backend == "npu-sim" and args.sim else {}
        with Encoder.open(bundle, backend=args.backend, **opts) as enc:
            print(f"bundle {bundle} (prefixes {enc.bundle.prefixes}); vector search, {enc.label}, no re-rank")
            sets, lib = build_sets(enc, tmp)
            ref = reference_queries(enc)
            for name, s in sets.items():
                print(f"\n## {name}: {len(s.docs)} documents/chunks, {len(s.queries)} queries")
                print(f"languages of the documents: {language_counts(s.doc_langs)}")
                print(f"languages of the queries:   {language_counts(s.q_langs)}")
                print("| alpha | min chunks | " + " | ".join(
                    f"{k} top-1 | {k} top-10" for k in sorted(set(s.kinds))) + " |")
                for alpha in alphas:
                    for m in (minimums if alpha else minimums[:1]):
                        r = evaluate(s, alpha, m, ref)
                        cells = " | ".join(f"{t1:.3f} | {t10:.3f}" for t1, t10, _ in r.values())
                        print(f"| {alpha:.2f} | {m if alpha else '-'} | {cells} |")
                print(f"hub correction at alpha {DEFAULT_ALPHA}, min chunks {MIN_CHUNKS} (beta):")
                for h in args.hub_betas.split(","):
                    r = evaluate(s, DEFAULT_ALPHA, MIN_CHUNKS, None if h == "none" else ref, None if h == "none" else float(h))
                    cells = " | ".join(f"{t1:.3f} | {t10:.3f}" for t1, t10, _ in r.values())
                    print(f"| hubs {h} | {MIN_CHUNKS} | {cells} |")
            a = DEFAULT_ALPHA if args.check_alpha is None else args.check_alpha
            s = sets["sample"]
            want = evaluate(s, a, MIN_CHUNKS, ref)
            print(f"\nlibrary path (derive_neutral_space + Searcher, alpha {a}, min chunks {MIN_CHUNKS}) on "
                  f"sample: {check_library_path(lib, enc, a, MIN_CHUNKS, want)}")
            lib.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

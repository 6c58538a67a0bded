"""Why do long passages rank badly, and what corrects it? Hubness and anisotropy, measured.

    python bench/hubness.py --library LIB --set DIR [--cache DIR] [--spaces A,B] [--default-search]

``LIB`` indexed ``DIR/docs`` (``bench/long_parallel.py``, ``bench/long_parallel_system.py``, or
any folder with a ``queries.tsv`` of ``query`` and ``|``-separated ``expected`` file names). Each
plain space's chunk vectors, its encoder's query vectors and reference queries
(``reference_queries``) are cached under ``--cache`` (.npz, git-ignored), so later runs only
compute. Per space, and its language-neutral copy made here, and per variant of the scores (raw
cosine; the hub correction: the mean reference query taken off queries, at several strengths; the
library mean taken off chunks, or off both sides, with the top principal directions too, "all but
the top"; a CSLS penalty from each chunk's 10 nearest chunks; corrections from the reference
queries as a query bank), ranked one hit per file, k 30: MRR, success@1/@3 and hub3 (the share of
first places the 3 most frequent wrong files take). Per space: mean cosine between files, energy
along the mean, top principal directions, 10-occurrence skewness; which language takes the wrong
first places. ``--default-search`` derives the library's neutral default space anew without, then
with, the hub correction (it rewrites that space) and searches as a user does (hybrid, k 30),
timing the derivation; the query transform's cost is timed against the language move alone.

Peer: the raw cosine of the same space (each table's first row).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from hefsearch.bench.harness import load


def read_library(lib_path: Path, spaces, cache: Path, queries: list[str], tag: str = "queries") -> dict:
    """{space: (chunk vectors, query vectors, chunk file names, chunk token counts)}, cached."""
    from hefsearch.index.library import Library
    from hefsearch.search.searcher import Searcher
    from hefsearch.search.language_neutral import chunk_languages, reference_queries

    cache.mkdir(parents=True, exist_ok=True)
    out = {}
    lib = Library.open(lib_path, create=False)
    try:
        names = spaces or [i.name for i in lib.spaces()]
        with Searcher(lib) as s:
            for name in names:
                f = cache / f"{name}.{tag}.npz"
                if not f.exists():
                    ids = lib.member_ids(name)
                    docs = lib.space(name).vectors(ids)
                    enc = s.encoder_for(name)
                    q = enc.encode_queries(queries)
                    recs = {r.id: r for r in lib.chunks(ids.tolist())}
                    files = np.array([Path(recs[int(i)].path).name for i in ids])
                    lengths = np.array([len(recs[int(i)].text) for i in ids])
                    langs = np.array([x or "" for x in chunk_languages(lib, ids.tolist())])
                    ref, ref_langs = reference_queries(enc)
                    np.savez(f, docs=docs, q=q, files=files, lengths=lengths, langs=langs, ref=ref,
                             ref_langs=np.array([x or "" for x in ref_langs]))
                z = np.load(f)
                out[name] = (z["docs"], z["q"], z["files"], z["lengths"], z["langs"], z["ref"], z["ref_langs"])
    finally:
        lib.close()
    return out


def unit(v):
    n = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.where(n > 0, n, 1)


def file_ranking(scores: np.ndarray, files: np.ndarray, k: int = 30) -> list[list[str]]:
    out = []
    for row in scores:
        seen, ranked = set(), []
        for j in np.argsort(-row, kind="stable"):
            if files[j] not in seen:
                seen.add(files[j])
                ranked.append(files[j])
                if len(ranked) == k:
                    break
        out.append(ranked)
    return out


def metrics(ranked, expected) -> dict:
    rr, s1, s3 = [], [], []
    for r, exp in zip(ranked, expected):
        pos = next((i for i, f in enumerate(r) if f in exp), None)
        rr.append(0.0 if pos is None else 1.0 / (pos + 1))
        s1.append(pos == 0)
        s3.append(pos is not None and pos < 3)
    tops = [r[0] for r, exp in zip(ranked, expected) if r and r[0] not in exp]
    hub = 0.0
    if tops:
        counts = sorted((tops.count(f) for f in set(tops)), reverse=True)
        hub = sum(counts[:3]) / len(ranked)
    return {"mrr": float(np.mean(rr)), "s1": float(np.mean(s1)), "s3": float(np.mean(s3)), "hub3": hub}


def k_occurrence_skew(docs: np.ndarray, k: int = 10) -> float:
    sim = docs @ docs.T
    np.fill_diagonal(sim, -np.inf)
    nn = np.argpartition(-sim, k, axis=1)[:, :k]
    counts = np.bincount(nn.ravel(), minlength=len(docs)).astype(float)
    c = counts - counts.mean()
    return float((c ** 3).mean() / max((c ** 2).mean() ** 1.5, 1e-12))


def knn_mean(docs: np.ndarray, k: int) -> np.ndarray:
    sim = docs @ docs.T
    np.fill_diagonal(sim, -np.inf)
    top = -np.partition(-sim, k, axis=1)[:, :k]
    return top.mean(axis=1)


def neutral(docs, q, langs, qlangs, ref, ref_langs):
    """The language-neutral space as the product makes it (alpha 0.5, 5 chunks a language),
    without a hub correction: (chunks, queries, reference queries), moved."""
    from hefsearch.embed.post_transform import LanguageNeutral
    from hefsearch.search.language_neutral import DEFAULT_ALPHA, MIN_CHUNKS

    ln = LanguageNeutral.fit(docs, [x or None for x in langs], alpha=DEFAULT_ALPHA, min_chunks=MIN_CHUNKS)
    return (ln.apply(docs, languages=[x or None for x in langs]), ln.apply(q, languages=qlangs, passages=False),
            ln.apply(ref, languages=[x or None for x in ref_langs], passages=False))


def variants(docs, q, ref, ks=(10,), dims=(1, 2, 3, 5, 8)):
    """(label, chunk vectors, query vectors, per-chunk penalty or None) of every correction."""
    from hefsearch.embed.post_transform import HubCorrection

    mu = docs.mean(axis=0)
    yield "raw cosine", docs, q, None
    for beta in (0.25, 0.5, 0.75, 1.0):
        yield f"queries - {beta} x mean query (hub correction)", docs, HubCorrection.fit(ref, beta).apply(q), None
    yield "chunks - library mean (queries as they are)", unit(docs - mu), q, None
    dc, qc = unit(docs - mu), unit(q - mu)
    yield "both sides - library mean", dc, qc, None
    for d in dims:
        u = np.linalg.svd(docs - mu, full_matrices=False)[2][:d]
        proj = lambda x: unit((x - mu) - (x - mu) @ u.T @ u)  # noqa: E731
        yield f"both sides - mean - top {d} direction(s)", proj(docs), proj(q), None
    for k in ks:
        for beta in (0.5, 1.0):
            yield f"CSLS k={k} beta={beta}", docs, q, beta * knn_mean(docs, k)
            yield f"mean removed + CSLS k={k} beta={beta}", dc, qc, beta * knn_mean(dc, k)
    yield from bank_variants(docs, q, ref)


def bank_variants(docs, q, ref):
    """Corrections from a query bank (the reference queries): each chunk standardised by its
    scores against the bank (QB-Norm's query-bank normalisation), inverted softmax over the
    bank, CSLS against the bank's nearest queries; a penalty along the library mean; and the
    mean score of the set's own queries taken off (transductive: what no library can know).
    Penalties are per chunk, so z-scores come as a penalty that reproduces the division."""
    bank = ref @ docs.T  # (bank queries, chunks)
    mu, sd = bank.mean(axis=0), bank.std(axis=0)
    raw = q @ docs.T
    yield "bank z-score (mean only, 0.5)", docs, q, 0.5 * mu
    yield "bank z-score (mean and spread)", docs, q, raw - (raw - mu) / np.where(sd > 0, sd, 1)
    for t in (20, 50):
        top = bank.max(axis=0)
        log_z = np.log(np.exp(t * (bank - top)).sum(axis=0)) / t + top
        yield f"inverted softmax over the bank T={t}", docs, q, log_z
    for k in (5, 10):
        yield f"CSLS k={k} against the bank, beta 0.5", docs, q, 0.5 * -np.partition(-bank, k, axis=0)[:k].mean(axis=0)
    for beta in (0.25, 0.5):
        yield f"penalty along the library mean, {beta}", docs, q, beta * (docs @ docs.mean(axis=0))
    yield "the set's own mean query score, 0.5 (transductive)", docs, q, 0.5 * raw.mean(axis=0)


def anisotropy(docs, files) -> dict:
    sim = docs @ docs.T
    other = files[:, None] != files[None, :]
    mu = docs.mean(axis=0)
    c = docs - mu
    sv = np.linalg.svd(c, full_matrices=False)[1] ** 2
    along_mean = float(((docs @ (mu / np.linalg.norm(mu))) ** 2).sum() / (docs ** 2).sum())
    return {"mean_cos_other_files": float(sim[other].mean()), "norm_of_mean": float(np.linalg.norm(mu)),
            "energy_along_mean": along_mean, "top1_pc_share": float(sv[0] / sv.sum()),
            "top5_pc_share": float(sv[:5].sum() / sv.sum()), "k10_skew": k_occurrence_skew(docs)}


def main() -> None:
    from hefsearch.bench.long_parallel import read_set

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", type=Path, required=True)
    ap.add_argument("--set", type=Path, required=True)
    ap.add_argument("--cache", type=Path, default=Path(".bench-cache/hubness"))
    ap.add_argument("--spaces", default=None)
    ap.add_argument("--queries", default="queries.tsv", help="the queries file in DIR (e.g. queries-detail.tsv)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--default-search", action="store_true",
                    help="also search the library as a user does (every default, k 30, one hit per file), "
                         "its language-neutral default space derived anew without and with the hub "
                         "correction (this rewrites that space of LIB)")
    args = ap.parse_args()
    rows = read_set(args.set, args.queries)
    queries = [q for q, _ in rows]
    expected = [e for _, e in rows]
    data = read_library(args.library, args.spaces.split(",") if args.spaces else None,
                        args.cache / args.library.name, queries, Path(args.queries).stem)
    print(f"load {load()}")
    from hefsearch.embed.language import identify_all

    qlangs = identify_all(queries)
    report = {}
    expanded = {}
    for name, (docs, q, files, lengths, langs, ref, ref_langs) in data.items():
        if name.endswith("-neutral"):
            continue  # made here from the plain space, without and with the correction
        expanded[name] = (docs, q, files, ref)
        nd, nq, nr = neutral(docs, q, langs, qlangs, ref, ref_langs)
        expanded[f"{name}-neutral (language move, numpy)"] = (nd, nq, files, nr)
    for name, (docs, q, files, ref) in expanded.items():
        a = anisotropy(docs, files)
        print(f"\n## {name}: {len(docs)} chunks, {len(set(files))} files; mean cosine between files "
              f"{a['mean_cos_other_files']:.3f}, |mean| {a['norm_of_mean']:.3f}, energy along the mean "
              f"{a['energy_along_mean']:.3f}, top PC {a['top1_pc_share']:.3f}, top 5 {a['top5_pc_share']:.3f}, "
              f"10-occurrence skew {a['k10_skew']:.2f}")
        print(f"{'variant':44s} MRR    s@1   s@3   hub3")
        report[name] = {"anisotropy": a, "variants": {}}
        for label, d, qq, penalty in variants(docs, q, ref):
            scores = qq @ d.T - (penalty if penalty is not None else 0)  # per chunk, or per query and chunk
            m = metrics(file_ranking(scores, files), expected)
            report[name]["variants"][label] = m
            print(f"{label:44s} {m['mrr']:.3f}  {m['s1']:.2f}  {m['s3']:.2f}  {m['hub3']:.2f}")
        by_lang(q @ docs.T, files, expected)
    query_cost(next(iter(data.values())), qlangs)
    if args.default_search:
        compare_default(args.library, queries, expected)
    if args.json:
        print(json.dumps(report, indent=1))


def query_cost(space, qlangs, repeats: int = 2000) -> None:
    """What the correction adds to a query: the neutral transform of one query vector with the
    hub correction against the same transform without it (median of ``repeats``)."""
    import time

    from hefsearch.embed.post_transform import LanguageNeutral

    docs, q, _files, _lengths, langs, ref, ref_langs = space
    langs = [x or None for x in langs]
    plain = LanguageNeutral.fit(docs, langs, alpha=0.5, min_chunks=5)
    hubs = LanguageNeutral.fit(docs, langs, alpha=0.5, min_chunks=5, reference=(ref, [x or None for x in ref_langs]))
    out = {}
    for label, ln in (("language move", plain), ("language move + hub correction", hubs)):
        times = []
        for i in range(repeats):
            t = time.perf_counter()
            ln.apply(q[i % len(q)][None], languages=[qlangs[i % len(q)]], passages=False)
            times.append(time.perf_counter() - t)
        out[label] = float(np.median(times)) * 1e6
    print(f"\nquery transform, median of {repeats}: " + ", ".join(f"{k} {v:.1f} us" for k, v in out.items()))


def compare_default(lib_path: Path, queries, expected) -> None:
    """The default search with the library's neutral default space derived without, then with,
    the hub correction (and the time each derivation took)."""
    import time

    from hefsearch.index.library import Library
    from hefsearch.search.searcher import Searcher
    from hefsearch.search.language_neutral import HUB_BETA, NEUTRAL_SUFFIX, derive_neutral_space

    lib = Library.open(lib_path, create=False)
    default = lib.settings().get("default_space")
    if not default or not default.endswith(NEUTRAL_SUFFIX):
        lib.close()
        default_search(lib_path, queries, expected)
        return
    source = default[: -len(NEUTRAL_SUFFIX)]
    try:
        with Searcher(lib) as s:
            enc = s.encoder_for(source)
            for beta in (None, HUB_BETA):
                t = time.perf_counter()
                with lib.write_lock():
                    lib.drop_space(default)
                    derive_neutral_space(lib, source, enc, hub_beta=beta)
                print(f"derived {default} (hub correction beta {beta}) in {time.perf_counter() - t:.1f} s")
                default_search(lib_path, queries, expected, library=lib)
    finally:
        lib.close()


def default_search(lib_path: Path, queries, expected, k: int = 30, library=None) -> dict:
    """``Searcher.search`` with every default (hybrid, the library's default space, its default
    re-rank), k 30: MRR, success@1/@3 by file, and ms per query (median)."""
    import time

    from hefsearch.index.library import Library
    from hefsearch.search.searcher import Searcher
    from hefsearch.search.request import SearchRequest

    lib = library or Library.open(lib_path, create=False)
    ranked, ms = [], []
    try:
        with Searcher(lib) as s:
            s.search(SearchRequest(queries[0], k=k))  # opens the encoder
            for q in queries:
                t = time.perf_counter()
                res = s.search(SearchRequest(q, k=k))
                ms.append((time.perf_counter() - t) * 1000)
                ranked.append([Path(h.path).name for h in res.hits])
            space, transform = res.space, res.space_transform
    finally:
        if library is None:
            lib.close()
    m = metrics(ranked, expected)
    m["ms"] = float(np.median(ms))
    hub = (transform or {}).get("hub_correction")
    print(f"\ndefault search of {lib_path.name} ({space}, hub correction {hub}): MRR {m['mrr']:.3f}, "
          f"s@1 {m['s1']:.2f}, s@3 {m['s3']:.2f}, hub3 {m['hub3']:.2f}; {np.median(ms):.0f} ms a query (median)")
    return m


def by_lang(scores, files, expected) -> None:
    """Which language (a file's name: NAME.LANG.txt) takes the wrong top-1 places (raw cosine),
    and the right copy's MRR per language."""
    ranked = file_ranking(scores, files, k=len(set(files.tolist())))
    lang_of = {f: f.split(".")[-2] if f.count(".") >= 2 else "?" for f in files.tolist()}
    langs = np.array(sorted(set(lang_of.values())))
    wrong = [lang_of[r[0]] for r, e in zip(ranked, expected) if r[0] not in e]
    per = {}
    for lang in sorted(set(langs.tolist())):
        rr = []
        for r, e in zip(ranked, expected):
            mine = {f for f in e if lang_of.get(f) == lang}
            pos = next((i for i, f in enumerate(r) if f in mine), None)
            rr.append(0 if pos is None else 1 / (pos + 1))
        per[lang] = round(float(np.mean(rr)), 3)
    print(f"  wrong top-1 by language: {dict((x, wrong.count(x)) for x in sorted(set(wrong)))}; "
          f"right copy's MRR by language: {per}")


if __name__ == "__main__":
    main()

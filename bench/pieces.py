"""Does a detail drown in the mean over 512 tokens? Chunk vectors against shorter pieces, fused.

    python bench/pieces.py --bundle-view SRC --window 128 --out DIR       # a bundle cutting 128-token chunks
    python bench/pieces.py --set SET --queries FILE --chunks LIB --pieces LIB2 [--cost N]

The first form writes a view of bundle ``SRC`` (links to its files) whose window is ``--window``
tokens; ``hefsearch index SET/docs --library LIB2 --bundle DIR --backend B`` then cuts and embeds
the same documents in pieces of that length (no neutral copy needed: it is made here). The
second form compares, on a set of ``bench/long_parallel.py`` or ``bench/long_parallel_system.py``,
per file (its best chunk), k 30: the library's chunks (``LIB``, the bundle's own window), the
pieces (``LIB2``), and both fused (a file's score the mean of its best chunk's and its best
piece's cosine): each in the plain space and its language-neutral copy (made here, as the
product makes it), with and without the hub correction (beta 0.25); then "in context": each
piece scored as hefsearch scores a passage (the mean of its and its section's vector, the
section here the chunk that holds it; ``embed/in_context.py``). MRR, success@1/@3.
``--cost N`` times encoding N documents of the set as chunks and as pieces (median of 3 each,
in the same run; the peer: the chunks).

Vectors come through ``bench/hubness.py``'s cache (``--cache``), so a second run only computes.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from hefsearch.bench.harness import load, median_time


def bundle_view(src: Path, window: int, out: Path) -> None:
    """A bundle folder at ``out`` linking ``src``'s files, whose manifest says ``window``."""
    out.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name not in ("manifest.json", "build") and not (out / f.name).exists():
            os.symlink(f.resolve(), out / f.name)
    manifest = json.loads((src / "manifest.json").read_text(encoding="utf-8"))
    manifest["seq_len"] = int(window)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def file_scores(scores: np.ndarray, files: np.ndarray, names: list[str]) -> np.ndarray:
    """(queries, files): each file's best chunk score."""
    col = {f: i for i, f in enumerate(names)}
    out = np.full((scores.shape[0], len(names)), -np.inf, dtype=np.float32)
    for j, f in enumerate(files.tolist()):
        c = col[f]
        out[:, c] = np.maximum(out[:, c], scores[:, j])
    return out


def ranked(fs: np.ndarray, names: list[str], k: int = 30) -> list[list[str]]:
    return [[names[j] for j in np.argsort(-row, kind="stable")[:k]] for row in fs]


def spaces(lib: Path, cache: Path, queries, qfile: str, qlangs) -> dict:
    """{"plain": (docs, queries, files, reference), "neutral": the same, moved} of the library's
    one source space (the first that is not a neutral copy)."""
    from hefsearch.bench.hubness import neutral, read_library
    from hefsearch.index.library import Library

    with Library.open(lib, create=False) as opened:
        name = next(i.name for i in opened.spaces() if not i.name.endswith("-neutral"))
    docs, q, files, _lengths, langs, ref, ref_langs = read_library(lib, [name], cache / lib.name, queries,
                                                                   Path(qfile).stem)[name]
    nd, nq, nr = neutral(docs, q, langs, qlangs, ref, ref_langs)
    return {"name": name, "plain": (docs, q, files, ref), "neutral": (nd, nq, files, nr),
            "raw": (docs, q, files, langs, langs, ref, ref_langs)}


def compare(set_dir: Path, qfile: str, chunks: Path, pieces: Path, cache: Path) -> dict:
    from hefsearch.bench.hubness import metrics
    from hefsearch.bench.long_parallel import read_set
    from hefsearch.embed.language import identify_all
    from hefsearch.embed.post_transform import HubCorrection

    rows = read_set(set_dir, qfile)
    queries, expected = [q for q, _ in rows], [e for _, e in rows]
    qlangs = identify_all(queries)
    a, b = spaces(chunks, cache, queries, qfile, qlangs), spaces(pieces, cache, queries, qfile, qlangs)
    names = sorted(set(a["plain"][2].tolist()))
    print(f"{a['name']}: {len(a['plain'][0])} chunks, {len(b['plain'][0])} pieces, {len(names)} files, "
          f"{len(queries)} queries ({qfile})")
    out = {}
    for space in ("plain", "neutral"):
        for beta in (0.0, 0.25):
            fs = {}
            for label, s in (("chunks", a[space]), ("pieces", b[space])):
                docs, q, files, ref = s
                qq = HubCorrection.fit(ref, beta).apply(q) if beta else q
                fs[label] = file_scores(qq @ docs.T, files, names)
            fs["fused"] = (fs["chunks"] + fs["pieces"]) / 2
            for label, f in fs.items():
                m = metrics(ranked(f, names), expected)
                key = f"{space} beta {beta} {label}"
                out[key] = m
                print(f"{key:32s} MRR {m['mrr']:.3f}  s@1 {m['s1']:.2f}  s@3 {m['s3']:.2f}")
    m = out["in context"] = in_context(a, b, chunks, pieces, qlangs, names, expected)
    print(f"{'in context (as the product)':32s} MRR {m['mrr']:.3f}  s@1 {m['s1']:.2f}  s@3 {m['s3']:.2f}")
    return out


def chunk_spans(lib: Path, space: str) -> list[tuple[str, int, int]]:
    """(file name, start, end) of each member of ``space``, in member order."""
    from hefsearch.index.library import Library

    with Library.open(lib, create=False) as opened:
        ids = opened.member_ids(space)
        recs = {r.id: r for r in opened.chunks(ids.tolist())}
    return [(Path(recs[int(i)].path).name, recs[int(i)].start, recs[int(i)].end) for i in ids]


def holders(pieces: list[tuple], chunks: list[tuple]) -> np.ndarray:
    """For each piece, the chunk of its file that holds its middle (else the nearest one)."""
    by_file: dict[str, list] = {}
    for j, (f, s, e) in enumerate(chunks):
        by_file.setdefault(f, []).append((s, e, j))
    out = np.zeros(len(pieces), np.int64)
    for i, (f, s, e) in enumerate(pieces):
        mid = (s + e) / 2
        out[i] = min(by_file[f], key=lambda t: 0 if t[0] <= mid < t[1] else min(abs(mid - t[0]), abs(mid - t[1])))[2]
    return out


def in_context(a: dict, b: dict, chunks: Path, pieces: Path, queries_langs, names, expected) -> dict:
    """Each piece scored as the product scores a passage: the mean of its vector and its
    section's (here the chunk that holds it), moved off its language by a transform fitted on
    those means (the length kept), queries with the hub correction; MRR per file."""
    from hefsearch.bench.hubness import metrics
    from hefsearch.embed.post_transform import LanguageNeutral
    from hefsearch.search.language_neutral import DEFAULT_ALPHA, MIN_CHUNKS

    cd, pd = a["raw"][0], b["raw"][0]
    q, pf, pl, ref, ref_langs = b["raw"][1], b["raw"][2], b["raw"][4], b["raw"][5], b["raw"][6]
    fused = 0.5 * (pd + cd[holders(chunk_spans(pieces, b["name"]), chunk_spans(chunks, a["name"]))])
    langs = [x or None for x in pl]
    ln = LanguageNeutral.fit(fused, langs, alpha=DEFAULT_ALPHA, min_chunks=MIN_CHUNKS,
                             reference=(ref, [x or None for x in ref_langs]), beta=0.25)
    scores = ln.apply(q, languages=queries_langs, passages=False) @ ln.apply(fused, languages=langs).T
    return metrics(ranked(file_scores(scores, pf, names), names), expected)


def encode_cost(set_dir: Path, chunks: Path, pieces: Path, n: int) -> None:
    """Seconds to chunk and embed ``n`` documents at each library's window (median of 3)."""
    from hefsearch.index.chunk import chunk_text
    from hefsearch.readers.extract_base import ExtractedText
    from hefsearch.index.library import Library
    from hefsearch.search.searcher import Searcher

    every = sorted((set_dir / "docs").iterdir())
    texts = [d.read_text(encoding="utf-8") for d in every[:: max(1, len(every) // n)][:n]]
    times = {}
    for label, lib_path in (("chunks", chunks), ("pieces", pieces)):
        with Library.open(lib_path, create=False) as lib, Searcher(lib) as s:
            enc = s.encoder_for(lib.settings().get("default_space") or lib.space_names()[0])
            parts = [c.text for t in texts for c in chunk_text(ExtractedText(t), enc.count_tokens, enc.max_tokens)]
            enc.encode_passages(parts[:1])
            times[label] = (median_time(lambda: enc.encode_passages(parts), 3), len(parts))
    base = times["chunks"][0]
    for label, (sec, count) in times.items():
        print(f"encode {n} documents as {label}: {count} texts, {sec:.2f} s ({sec / base:.2f}x the chunks)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle-view", type=Path, help="write a view of this bundle with --window (first form)")
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--set", type=Path)
    ap.add_argument("--queries", default="queries-detail.tsv")
    ap.add_argument("--chunks", type=Path, help="the set indexed with the bundle's own window")
    ap.add_argument("--pieces", type=Path, help="the set indexed with the shorter window")
    ap.add_argument("--cache", type=Path, default=Path(".bench-cache/hubness"))
    ap.add_argument("--cost", type=int, default=0, metavar="N")
    args = ap.parse_args()
    if args.bundle_view:
        bundle_view(args.bundle_view, args.window, args.out)
        print(f"bundle view with a {args.window}-token window: {args.out}")
        return
    print(f"load {load()}")
    compare(args.set, args.queries, args.chunks, args.pieces, args.cache)
    if args.cost:
        encode_cost(args.set, args.chunks, args.pieces, args.cost)


if __name__ == "__main__":
    main()

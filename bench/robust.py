"""What the 8-bit-robust body (``compile robust``) buys on an all-8-bit build, against FP32.

    python bench/robust.py --bundle BUNDLE [--corpus NAME=DIR[:QUERIES.tsv]]... [--parallel TSV]...
                           [--train STEPS] [--json out.json]

The bundle needs a calibration set (``compile calib``) and, for the robust rows, a robust body
(``compile robust``; ``--train STEPS`` runs it first, in a child process, and prints its wall
time and peak memory). The script builds the 8-bit simulations it measures (skipping any the
bundle already has), mask inside softmax as the hailo10h default build does, for each body:

- ``a8``: min/max ranges over 512 rows of the calibration set, per-channel weights: the
  simulation's default;
- three quantisers training never used as such: ``pct``: ranges clipped at the 99.99th
  percentile; ``wtensor``: per-tensor weights; ``calib32``: ranges from another, 32-row
  calibration subset.

It measures every space against the original FP32 body (the reference) with the metrics of
``bench quality`` (:mod:`hefsearch.evaluate.quality`): per corpus MRR against FP32's ranking,
found@1 where the expected document is known (a queries TSV with ``expected``, else
pseudo-queries cut from random chunks and their source chunk), the mean doc-doc cosine, and
the FP32 query against the 8-bit documents (the bases match in a simulation); per parallel set
top-1 translation retrieval and similarity-matrix correlation. The robust body's own FP32
vectors are measured the same way (they must not lose the original's quality).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

VARIANTS = {  # name suffix -> SimOptions fields
    "": {},
    "-pct": {"ranges": "percentile:99.99"},
    "-wtensor": {"weights": "per-tensor"},
    "-calib32": {"calib_limit": 32},
}
_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]?")


def ensure_sims(bundle, bodies: list[str], say) -> dict[str, str]:
    """{space label: simulation name}, building the missing ones."""
    from hefsearch.compile.body_choice import resolve_body, stale_builds
    from hefsearch.compile.sim.build import SimOptions, build_sim
    from hefsearch.embed.bundle import Bundle

    out = {}
    for body in bodies:
        b = Bundle.open(bundle)
        have = {e.extra.get("name") for e in b.encoder_entries("npu-sim")}
        stale = set(stale_builds(b, resolve_body(b, body)))
        for suffix, kw in VARIANTS.items():
            name = "a8" + suffix + ("" if body == "original" else "-" + body)
            if name not in have or name in stale:
                say(f"building simulation {name}" + (" (its body was trained again)" if name in stale else ""))
                build_sim(bundle, "a8", SimOptions(mask="inside", body=body, name=name, **kw))
            out[f"a8{suffix} {body}"] = name
    return out


def open_encoders(bundle, sims: dict[str, str], robust: bool) -> dict:
    from hefsearch.compile.body_choice import resolve_body
    from hefsearch.embed.backends.onnx_body import OnnxBodyBackend
    from hefsearch.embed.bundle import Bundle
    from hefsearch.embed.encoder import Encoder

    b = Bundle.open(bundle)
    encs = {"FP32 original": Encoder.open(b, backend="cpu")}
    if robust:
        body = resolve_body(b, "robust")

        class RobustFp32(OnnxBodyBackend):  # the robust body in FP32: measured, never a product space
            name, label, space_kind = "robust-fp32", "robust body, FP32", "robust-fp32"

            def fingerprint_parts(self):
                return {"encoder": "robust-fp32", "file_sha256": self.file_sha256}

        entry = next(e for e in b.encoders if e.file == body.file)
        encs["FP32 robust"] = Encoder(b, RobustFp32(b, entry))
    for label, name in sims.items():
        encs[label] = Encoder.open(b, backend="npu-sim", profile=name)
    return encs


def load_corpus(spec: str, enc, n_pseudo: int, seed: int):
    """NAME=DIR[:QUERIES] -> (name, chunk texts, chunk doc names, queries, sources)."""
    from hefsearch.index.chunk import chunk_text
    from hefsearch.readers.extract import extract

    name, _, rest = spec.partition("=")
    folder, _, qfile = rest.partition(":")
    texts, docs = [], []
    for p in sorted(Path(folder).rglob("*")):
        if not p.is_file() or p.name == Path(qfile).name:
            continue
        try:
            doc = extract(p)
        except Exception:
            continue
        for c in chunk_text(doc, lambda t: enc.count_tokens(t), enc.max_tokens):
            texts.append(c.text)
            docs.append(p.name)
    rng = random.Random(seed)
    if qfile:
        from hefsearch.evaluate.query_sets import read_queries

        qs = read_queries(qfile)
        queries = qs.texts
        sources = [{i for i, d in enumerate(docs) if d in set((e or "").split("|"))} for e in (qs.expected or [])]
        sources = sources or None
    else:
        pick = rng.sample(range(len(texts)), min(n_pseudo, len(texts)))
        queries, sources = [], []
        for i in pick:
            sents = [s.strip() for s in _SENTENCE.findall(texts[i]) if 4 <= len(s.split()) <= 30]
            q = rng.choice(sents) if sents else " ".join(texts[i].split()[:12])
            queries.append(q)
            sources.append({i})
    return name, texts, docs, queries, sources


class VectorCache:
    """Vectors by (encoder fingerprint, texts), so a re-run after training measures only the new
    spaces (None: no cache)."""

    def __init__(self, folder: str | None):
        self.folder = Path(folder) if folder else None
        if self.folder:
            self.folder.mkdir(parents=True, exist_ok=True)

    def encode(self, enc, texts: list[str], passages: bool) -> np.ndarray:
        import hashlib

        if self.folder is None:
            return enc.encode_passages(texts) if passages else enc.encode_queries(texts)
        key = hashlib.sha256(json.dumps([enc.fingerprint, passages, texts]).encode()).hexdigest()[:24]
        f = self.folder / f"{key}.npy"
        if f.is_file():
            return np.load(f)
        v = enc.encode_passages(texts) if passages else enc.encode_queries(texts)
        np.save(f, v)
        return v


@dataclass
class TextSets:
    """What the spaces are measured on: ``--corpus NAME=DIR[:QUERIES.tsv]`` specs (a corpus
    without queries gets ``n_pseudo`` pseudo-queries drawn with ``seed``) and ``--parallel`` TSVs
    besides the bundled parallel set."""

    corpora: list[str]
    parallels: list[str] = field(default_factory=list)
    n_pseudo: int = 100
    seed: int = 0


def measure(bundle, sets: TextSets, robust: bool, say, cache: VectorCache | None = None):
    from hefsearch.evaluate.parallel import load_parallel
    from hefsearch.evaluate.quality import QueryDocs, evaluate_library_space, evaluate_parallel

    bodies = ["original"] + (["robust"] if robust else [])
    sims = ensure_sims(bundle, bodies, say)
    encs = open_encoders(bundle, sims, robust)
    ref = encs["FP32 original"]
    cache = cache or VectorCache(None)
    rows = {label: {} for label in encs}
    for spec in sets.corpora:
        name, texts, docs, queries, sources = load_corpus(spec, ref, sets.n_pseudo, sets.seed)
        say(f"{name}: {len(set(docs))} documents, {len(texts)} chunks, {len(queries)} queries")
        ids = np.arange(len(texts), dtype=np.int64)
        d_ref, q_ref = cache.encode(ref, texts, True), cache.encode(ref, queries, False)
        for label, enc in encs.items():
            t0 = time.perf_counter()
            d = d_ref if enc is ref else cache.encode(enc, texts, True)
            q = q_ref if enc is ref else cache.encode(enc, queries, False)
            ms = (time.perf_counter() - t0) * 1000 / max(1, len(texts) + len(queries))
            reference = QueryDocs(q_ref, d_ref)
            r = evaluate_library_space(QueryDocs(q, d), reference, ids, sources=sources, depth=30, ms_per_query=ms)
            cross = evaluate_library_space(QueryDocs(q_ref, d), reference, ids, sources=sources, depth=0,
                                           ms_per_query=0)
            rows[label][name] = {
                "mrr": r.mrr, "r1": r.recall["1"],
                "found1": r.source_found["1"] if r.source_found else None,
                "doc_cos": r.doc_cosine,
                "rerank_mrr": r.reranked["mrr"] if r.reranked else None,
                "fp32q_mrr": cross.mrr,
                "fp32q_found1": cross.source_found["1"] if cross.source_found else None,
            }
            say(f"  {label}: MRR {r.mrr:.3f}, found@1 {rows[label][name]['found1']}, doc-cos {r.doc_cosine:.3f}")
    for path in [None, *sets.parallels]:
        pairs = load_parallel(path)
        pname = "parallel" if path is None else Path(path).stem
        def both(enc):
            v = cache.encode(enc, [p.text_a for p in pairs] + [p.text_b for p in pairs], False)
            return v[: len(pairs)], v[len(pairs):], 0.0

        a0, b0, _ = both(ref)
        for label, enc in encs.items():
            a, b, ms = (a0, b0, 0.0) if enc is ref else both(enc)
            p = evaluate_parallel(a, b, pairs, ms, None if enc is ref else (a0, b0))
            rows[label][pname] = {"top1": p.top1, "sim_corr": p.similarity_pearson if enc is not ref else 1.0,
                                  "pair_cos": p.mean_pairwise_cosine}
            say(f"  {pname} {label}: top-1 {p.top1:.3f}")
    for e in encs.values():
        e.close()
    return rows


def render(rows: dict) -> str:
    labels = list(rows)
    cols = list(rows[labels[0]])
    out = []
    for c in cols:
        sample = rows[labels[0]][c]
        if "mrr" in sample:
            out.append(f"\n{c}: MRR vs FP32 / found@1 / doc-doc cos / FP32-query MRR / +rerank30 MRR")
            for lab in labels:
                r = rows[lab][c]
                f1 = "-" if r["found1"] is None else f"{r['found1']:.3f}"
                out.append(f"  {lab:22s} {r['mrr']:.3f} / {f1} / {r['doc_cos']:.3f} / {r['fp32q_mrr']:.3f} / "
                           f"{r['rerank_mrr']:.3f}")
        else:
            out.append(f"\n{c}: top-1 / sim-corr / mean pair cos")
            for lab in labels:
                r = rows[lab][c]
                out.append(f"  {lab:22s} {r['top1']:.3f} / {r['sim_corr']:.3f} / {r['pair_cos']:.3f}")
    return "\n".join(out)


def train(bundle: str, steps: int, threads: int, say) -> dict:
    """``hefsearch compile robust`` in a child process (fresh start): wall time, peak RSS and
    what it recorded."""
    from hefsearch.compile.body_choice import ROBUST_KIND
    from hefsearch.embed.bundle import Bundle

    cmd = [sys.executable, "-m", "hefsearch", "compile", "robust", bundle, "--steps", str(steps),
           "--threads", str(threads), "--restart"]
    say("training: " + " ".join(cmd[2:]))
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    seconds = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    entry = Bundle.open(bundle).encoder_entries(ROBUST_KIND)[0].extra
    out = {"steps": steps, "seconds": round(seconds, 1), "s_per_step": round(seconds / max(1, steps), 2),
           "peak_rss_mb": round(peak_mb), "threads": threads, "load": [round(x, 2) for x in os.getloadavg()],
           "holdout_cos": entry.get("holdout_cos"), "fp32_check": entry.get("fp32_check"),
           "damped": len((entry.get("damping") or {}).get("neurons", []))}
    say(f"trained in {seconds / 60:.1f} min ({out['s_per_step']} s/step incl. setup), peak RSS {out['peak_rss_mb']} MB, "
        f"load {out['load']}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--corpus", action="append", default=[], help="NAME=DIR[:QUERIES.tsv]")
    ap.add_argument("--parallel", action="append", default=[], help="a held-out parallel TSV (lang_a, lang_b, text_a, text_b, group)")
    ap.add_argument("--pseudo-queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-robust", action="store_true", help="measure the original body only")
    ap.add_argument("--json", default=None)
    ap.add_argument("--cache", default=None, help="a folder for encoded vectors (re-runs measure only new spaces)")
    ap.add_argument("--calib-limit", type=int, default=512, help="calibration rows of the default simulations")
    ap.add_argument("--variant-calib-limit", type=int, default=None,
                    help="calibration rows of the pct and wtensor simulations (default: --calib-limit)")
    ap.add_argument("--variants", default="a8,pct,wtensor,calib32",
                    help="which simulations to measure (comma-separated; a8 is the default quantiser)")
    ap.add_argument("--train", type=int, default=None, metavar="STEPS",
                    help="run 'hefsearch compile robust --steps STEPS --restart' first and report its time and memory")
    ap.add_argument("--threads", type=int, default=2, help="torch threads for --train")
    args = ap.parse_args(argv)
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    say(f"load average at start: {[round(x, 2) for x in os.getloadavg()]}")
    trained = train(args.bundle, args.train, args.threads, say) if args.train else None
    VARIANTS[""] = {"calib_limit": args.calib_limit}
    vlimit = args.variant_calib_limit or args.calib_limit
    VARIANTS["-pct"] = {"ranges": "percentile:99.99", "calib_limit": vlimit}
    VARIANTS["-wtensor"] = {"weights": "per-tensor", "calib_limit": vlimit}
    wanted = {"a8": "", "pct": "-pct", "wtensor": "-wtensor", "calib32": "-calib32"}
    keep = {wanted[v.strip()] for v in args.variants.split(",") if v.strip()}
    for k in [k for k in VARIANTS if k not in keep]:
        del VARIANTS[k]
    sets = TextSets(args.corpus, args.parallel, args.pseudo_queries, args.seed)
    rows = measure(args.bundle, sets, not args.no_robust, say, VectorCache(args.cache))
    print(render(rows))
    if trained:
        print(f"\ntraining: {json.dumps(trained)}")
    print(f"load average at the end: {[round(x, 2) for x in os.getloadavg()]}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "training": trained}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

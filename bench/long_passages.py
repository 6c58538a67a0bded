"""Passages in context against chunks that fill the window, through the product, on long passages.

    python bench/long_passages.py --set DIR --bundle BUNDLE [--backend cpu|npu-sim] [--out DIR]

``DIR``: a set of ``bench/long_parallel.py`` or ``bench/long_parallel_system.py`` (``docs/`` and
one or more ``queries*.tsv``). Indexes ``DIR/docs`` twice with ``hefsearch index`` into new
libraries under ``--out`` (kept: a second run only searches): ``--no-passages`` (the peer: chunks
that fill the bundle's window, as libraries were made before) and ``--passages`` (128-token
passages, each scored with its section), then searches every query file as a user does (every
default: hybrid, the default space, k 30, one hit per file). Prints per library and query file
MRR, success@1/@3, milliseconds a query (median), and the cost of the index run (seconds, chunks)
with its ratio to the peer's, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from hefsearch.bench.harness import load


def index(set_dir: Path, lib: Path, bundle: Path, backend: str, passages: bool) -> float | None:
    """Index the set into ``lib`` (skipped when it is there); the seconds it took, or None."""
    if (lib / "library.db").exists():
        return None
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "hefsearch", "index", str(set_dir / "docs"), "--library", str(lib),
                    "--bundle", str(bundle), "--backend", backend, "--passages" if passages else "--no-passages",
                    "--json"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def chunk_count(lib: Path) -> int:
    from hefsearch.index.library import Library

    with Library.open(lib, create=False) as opened:
        return len(opened.chunk_ids())


def main() -> None:
    from hefsearch.bench.hubness import default_search
    from hefsearch.bench.long_parallel import read_set

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", type=Path, required=True)
    ap.add_argument("--bundle", type=Path, required=True)
    ap.add_argument("--backend", default="cpu", help="cpu (FP32) or npu-sim (the 8-bit simulation)")
    ap.add_argument("--out", type=Path, default=Path(".bench-cache/long-passages"))
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    print(f"load {load()}")
    tag = f"{args.set.name}-{args.bundle.name}-{args.backend}"
    out: dict = {}
    for label, on in (("chunks", False), ("passages", True)):
        lib = args.out / f"{tag}-{label}"
        seconds = index(args.set, lib, args.bundle, args.backend, on)
        out[label] = {"index_seconds": seconds, "chunks": chunk_count(lib)}
        for qfile in sorted(p.name for p in args.set.glob("queries*.tsv")):
            rows = read_set(args.set, qfile)
            out[label][qfile] = default_search(lib, [q for q, _ in rows], [e for _, e in rows])
    print(f"\n{tag}: default search, k 30 (peer: chunks that fill the window)")
    for qfile in sorted(k for k in out["chunks"] if k.startswith("queries")):
        a, b = out["chunks"][qfile], out["passages"][qfile]
        print(f"  {qfile}: MRR {a['mrr']:.3f} -> {b['mrr']:.3f}, s@1 {a['s1']:.2f} -> {b['s1']:.2f}, "
              f"s@3 {a['s3']:.2f} -> {b['s3']:.2f}, {a['ms']:.0f} -> {b['ms']:.0f} ms a query")
    a, b = out["chunks"], out["passages"]
    ratio = f" ({b['index_seconds'] / a['index_seconds']:.2f}x)" if a["index_seconds"] and b["index_seconds"] else ""
    secs = [f"{x['index_seconds']:.0f} s" if x["index_seconds"] else "kept" for x in (a, b)]
    print(f"  index: {a['chunks']} chunks in {secs[0]} -> {b['chunks']} passages in {secs[1]}{ratio}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()

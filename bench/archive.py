"""Speed and size of ``hefsearch export`` / ``import`` against a plain copy of the library folder.

    python bench/archive.py [--chunks 100000] [--repeats 3] [--keep DIR] [--gzip]

1. Builds a library of ``--chunks`` synthetic chunks (``query_latency.build_library``: Zipf
   texts of about 700 characters, random unit vectors of dim 384 added through ``Space.add``;
   no encoder runs). ``--keep DIR`` builds it once and reuses it.
2. Times, in turns per repeat (so a busy machine slows them alike): ``shutil.copytree`` of
   the library folder (the peer: a copy taken while nothing writes; it has no checksums and
   is not consistent under a writer), ``export`` to a ``.tar`` (optionally ``.tar.gz``),
   and ``import`` of that archive (verify every checksum, extract, open: FAISS index loaded or
   built). Prints medians, sizes on disk, and each against the copy.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from hefsearch.bench.harness import load
from hefsearch.bench.query_latency import build_library, vocabulary


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="build the library here once and reuse it")
    ap.add_argument("--gzip", action="store_true", help="also time a .tar.gz export")
    args = ap.parse_args()

    from hefsearch.index.export import export_library
    from hefsearch.index.restore import import_library

    work = Path(tempfile.mkdtemp(prefix="hefsearch-bench-archive-"))
    lib = (args.keep or work) / f"library-{args.chunks}"
    try:
        if not (lib / "library.db").exists():
            seconds = build_library(lib, args.chunks, vocabulary())
            print(f"built {args.chunks:,} synthetic chunks in {seconds:.0f} s")
        kinds = ["tar", "tar.gz"] if args.gzip else ["tar"]
        times: dict[str, list[float]] = {"copytree": [], **{f"export {k}": [] for k in kinds},
                                         **{f"import {k}": [] for k in kinds}}
        sizes = {"copytree": folder_bytes(lib)}
        for r in range(args.repeats):
            copy = work / f"copy-{r}"
            times["copytree"].append(timed(lambda: shutil.copytree(lib, copy)))
            shutil.rmtree(copy)
            for kind in kinds:
                out = work / f"a-{r}.{kind}"
                times[f"export {kind}"].append(timed(lambda: export_library(lib, out)))
                sizes[f"export {kind}"] = out.stat().st_size
                target = work / f"imported-{r}-{kind.replace('.', '')}"
                times[f"import {kind}"].append(timed(lambda: import_library(out, target)))
                sizes[f"import {kind}"] = folder_bytes(target)
                out.unlink()
                shutil.rmtree(target)
        peer = statistics.median(times["copytree"])
        print(f"\n{args.chunks:,} chunks, {args.repeats} repeats, medians (load {load()})")
        print(f"{'':16}{'seconds':>9}{'vs copy':>9}{'MB':>9}{'vs copy':>9}")
        for name, values in times.items():
            sec = statistics.median(values)
            size = sizes[name] / 1e6
            print(f"{name:16}{sec:9.2f}{sec / peer:8.2f}x{size:9.1f}{size * 1e6 / sizes['copytree']:8.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

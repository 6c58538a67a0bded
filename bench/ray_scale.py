"""``index --ray`` throughput against the number of actors, and the driver's own limit.

    python bench/ray_scale.py [--bundle BUNDLE] [--files 400] [--fps 100] [--actors 1 2 4 8 16]
                              [--repeats 3] [--batch 64] [--address ADDRESS]

A local Ray cluster (``ray.init``: a head and its worker processes on this machine, or an
existing cluster with ``--address``) runs actors that simulate an NPU: each opens the real
encoder (so identity, fingerprint and chunking are real) but answers a batch by sleeping
``frames / --fps`` and returning fixed unit vectors, so actors cost the driver's machine no
CPU and their throughput is known. For each actor count the same folder is indexed into a
new library with ``sync`` (the code ``hefsearch index --ray`` runs); the figure is chunks
embedded / seconds of the sync (medians of ``--repeats``).

The peer, measured in the same run: the driver alone, the same sync with an instant encoder in
the driver's process (crawl + hash + extract + chunk + SQLite/FAISS commit, nothing else). Ray
throughput is printed against that limit and against the ideal ``actors x fps``; scaling stops
where the first ratio approaches 1.

Measured 2026-12-01 on the 2-core development VM while other jobs loaded it (noisy), Ray 2.60,
MiniLM bundle, ``--files 600 --batch 32 --fps 100 --repeats 3`` (2117 chunks), medians:

    actors  chunks/s  of ideal (n x 100)  of the driver alone (same run)
         1      98        0.98                 0.17
         2     190        0.95                 0.30
         4     359        0.90                 0.69
         8     688        0.86                 0.83
        16     867        0.54                 1.01
    16 instant 917          -                  1.09

Throughput grows with the actors until it meets the driver: about 850-920 chunks/s here
(driver alone over the run: median 742, 479-892 as the load drifted), spent mostly in the
SQLite commit (chunks + FTS5) and the segment fsyncs, then in extraction and the chunker's
token counting. Beyond that, more actors only wait.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np


class SimulatedNpu:
    """An encoder with a real identity whose passages take ``frames / fps`` seconds (0: none)."""

    def __init__(self, encoder, fps: float):
        self._encoder = encoder
        self._fps = fps

    def __getattr__(self, name):
        return getattr(self._encoder, name)

    def encode_passages(self, texts) -> np.ndarray:
        texts = list(texts)
        if self._fps:
            time.sleep(len(texts) / self._fps)
        out = np.empty((len(texts), self._encoder.dim), np.float32)
        for i, t in enumerate(texts):
            v = np.random.default_rng(zlib.crc32(t.encode())).standard_normal(self._encoder.dim)
            out[i] = v / np.linalg.norm(v)
        return out


def simulated_opener(fps: float):
    """What each actor runs to open its encoder (pickled by value into the actors)."""

    def open_encoder(bundle, backend, opts, actor_index):
        from hefsearch.index.ray_worker import open_bundle_encoder

        return SimulatedNpu(open_bundle_encoder(bundle, backend, {**opts, "threads": 1}, actor_index), fps)

    return open_encoder


def timed_sync(lib_path: Path, folder: Path, encoder, batch: int) -> tuple[float, int]:
    from hefsearch.index.library import Library
    from hefsearch.index.sync import SyncOptions, sync

    lib = Library.open(lib_path)
    try:
        t = time.perf_counter()
        report = sync(lib, [folder], [encoder], SyncOptions(batch_chunks=batch))
        return time.perf_counter() - t, report.chunks_embedded
    finally:
        lib.close()
        shutil.rmtree(lib_path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", type=Path, help="model bundle (default: MiniLM exported to a temp folder)")
    ap.add_argument("--files", type=int, default=400)
    ap.add_argument("--fps", type=float, default=100.0, help="frames/s of one simulated NPU actor")
    ap.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64, help="chunks per commit (index --batch)")
    ap.add_argument("--address", default="local", help="Ray address (default: start Ray on this machine)")
    args = ap.parse_args()

    import ray

    from hefsearch.bench.index import write_folder
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.ray_pool import RayEncoder, RayPoolOptions

    tmp = Path(tempfile.mkdtemp(prefix="hefsearch-ray-bench-"))
    os.environ["HEFSEARCH_HOME"] = str(tmp / "home")  # the actors' bundle cache stays in tmp
    try:
        if args.bundle is None:
            from hefsearch.bench.harness import export_temp_bundle

            args.bundle = export_temp_bundle(tmp=tmp)
        folder = tmp / "docs"
        write_folder(folder, args.files)

        if args.address == "local":
            ray.init(include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=args.address, log_to_driver=False)
        enc = Encoder.open(args.bundle, backend="cpu", threads=1)
        instant = SimulatedNpu(enc, 0.0)
        chunks = timed_sync(tmp / "warm", folder, instant, args.batch)[1]
        alone: list[float] = []  # the peer, measured before every Ray run (the machine's load drifts)
        print(f"{args.files} files, {chunks} chunks, batches of {args.batch}, median of {args.repeats}; "
              f"'driver' = the same sync with an instant encoder in the driver, measured between the Ray runs")
        print(f"{'actors':>6} {'fps/actor':>9} {'chunks/s':>9} {'ideal':>8} {'/ideal':>7} {'driver':>8} "
              f"{'/driver':>8} {'actor frames/s':>15}")
        for n, fps in [(n, args.fps) for n in args.actors] + [(max(args.actors), 0.0)]:
            lib_for_identity = Library.open(tmp / "identity")
            pool = RayEncoder.start(lib_for_identity, args.bundle, RayPoolOptions(
                address="auto", backend="cpu", actors=n, actor_cpus=0, open_encoder=simulated_opener(fps)))
            lib_for_identity.close()
            try:
                rates, peer = [], []
                for r in range(args.repeats):
                    seconds, got = timed_sync(tmp / f"alone{n}-{r}", folder, instant, args.batch)
                    peer.append(got / seconds)
                    seconds, got = timed_sync(tmp / f"ray{n}-{r}", folder, pool, args.batch)
                    assert got == chunks, (got, chunks)
                    rates.append(got / seconds)
                per_actor = statistics.median(a.frames_per_s for a in pool.live)
            finally:
                pool.close()
            alone += peer
            rate, driver = statistics.median(rates), statistics.median(peer)
            ideal = f"{n * fps:8.0f} {rate / (n * fps):7.2f}" if fps else f"{'inf':>8} {'-':>7}"
            print(f"{n:6d} {fps or 'instant':>9} {rate:9.1f} {ideal} {driver:8.1f} {rate / driver:8.2f} "
                  f"{per_actor:15.1f}")
        enc.close()
        ray.shutdown()
        print(f"driver alone over the whole run: median {statistics.median(alone):.1f} chunks/s "
              f"(min {min(alone):.1f}, max {max(alone):.1f})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Indexing a library that has a language-neutral space: derived vectors against a second model run.

    python bench/neutral_sync.py --bundle BUNDLE --docs FOLDER

Half of ``--docs`` is indexed into a new library (CPU FP32) and its language-neutral space is
derived; then the other half is added by ``sync`` with every space's encoder, as
``hefsearch index`` does. The named peer, in the same run: the same sync with the neutral
space embedded by its own encoder (the model run a second time on the same texts, as before
``sync`` derived it from the batch's FP32 vectors). Prints both times and the ratio.

Measured (multilingual-e5-small, the Rust nomicon's 66 HTML pages, 248 chunks, 2 shared
cores): derived 32.3 s, encoded twice 61.0 s: 0.53x (an earlier run, before this script:
30.4 vs 60.8 s, 0.50x; one run with other jobs on the machine: 32.3 vs 121.5 s).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path


def run(docs: Path, bundle: str, work: Path, derive: bool) -> tuple[float, int]:
    import hefsearch.index.sync as sync_module
    import hefsearch.index.sync_batches as sync_batches  # the batch stage: flush derives vectors there
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.encoders import open_sync_encoders
    from hefsearch.index.library import Library
    from hefsearch.search.language_neutral import derive_neutral_space

    files = sorted(p for p in docs.rglob("*") if p.is_file())
    folder = work / "docs"
    folder.mkdir(parents=True)
    for p in files[: len(files) // 2]:
        shutil.copy(p, folder / p.name)
    with Library.open(work / "lib") as lib:
        with Encoder.open(bundle, "cpu") as enc:
            sync_module.sync(lib, [folder], [enc])
            derive_neutral_space(lib, "cpu-fp32", enc, alpha=0.5, min_chunks=1)
        for p in files[len(files) // 2 :]:
            shutil.copy(p, folder / p.name)
        real = sync_batches.derived_vectors
        if not derive:  # the peer: every space runs its own encoder
            sync_batches.derived_vectors = lambda *a: None
        choice = open_sync_encoders(lib, backend="cpu")
        try:
            t = time.perf_counter()
            report = sync_module.sync(lib, [folder], choice.encoders)
            return time.perf_counter() - t, report.chunks_embedded
        finally:
            sync_batches.derived_vectors = real
            choice.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", required=True, help="a model bundle (a multilingual one is the real case)")
    ap.add_argument("--docs", type=Path, required=True, help="a folder of documents")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="hefsearch-neutral-"))
    try:
        derived, chunks = run(a.docs, a.bundle, work / "derived", derive=True)
        twice, _ = run(a.docs, a.bundle, work / "twice", derive=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{chunks} chunks into cpu-fp32 and cpu-fp32-neutral: derived {derived:.1f} s, "
          f"encoded twice (peer) {twice:.1f} s, ratio {derived / twice:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

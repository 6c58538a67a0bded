"""An mbox re-indexed incrementally: the first run over N messages against the run after one
message was appended (only that message is embedded) and a run with nothing changed.

    python bench/mbox_incremental.py [--messages 20000] [--bundle BUNDLE]

The peer is the first run (every message read and embedded); the ratio says what the
incremental read saves. Every run streams the whole mbox (a changed file is read again: each
message hashed, only new and changed ones parsed and embedded). Default bundle: MiniLM
(``bench/harness.py``); the load average is printed beside the times.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from hefsearch.bench.harness import tests_importable


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--bundle", help="bundle to embed with (default: MiniLM exported to a temp folder)")
    args = ap.parse_args()
    from hefsearch.bench.harness import export_temp_bundle
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    tests_importable()
    from tests.support.container_builders import make_eml, make_mbox

    tmp = Path(tempfile.mkdtemp(prefix="hefsearch-mbox-"))
    bundle = args.bundle or export_temp_bundle(tmp=tmp)
    docs = tmp / "docs"
    docs.mkdir()
    box = docs / "inbox.mbox"
    box.write_bytes(make_mbox([make_eml(f"Message {i}", f"Body {i} about topic {i % 97}.", message_id=f"<m{i}@x>")
                               for i in range(args.messages)]))
    lib = Library.open(tmp / "lib")
    rows = []
    with Encoder.open(bundle, backend="cpu") as enc:
        for label in ("first run", "one appended", "unchanged"):
            if label == "one appended":
                with open(box, "ab") as f:
                    f.write(make_mbox([make_eml("New", "An appended message.", message_id="<new@x>")]))
            t = time.perf_counter()
            report = sync(lib, [docs], [enc])
            rows.append((label, time.perf_counter() - t, report.chunks_embedded))
    lib.close()
    load = os.getloadavg()
    print(f"{args.messages} messages, {box.stat().st_size / 2**20:.1f} MB mbox; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    first = rows[0][1]
    for label, seconds, chunks in rows:
        print(f"{label:<14} {seconds:8.2f} s   {chunks:7d} chunks embedded   first run / this: {first / seconds:7.1f}x")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()

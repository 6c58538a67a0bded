"""Peak memory and time of a whole index run over each hostile document of the per-document
budget: one file per run, each in a fresh child process.

    python bench/hostile_budget.py [--scale 1.0] [--limit-s 600] [--only NAME] [--keep DIR]

Each case is the hostile round's file at ``--scale 1`` (smaller scales shrink it: the tests use
the same builders at a few per cent): an XLSX of 10 million one-character shared strings
(19 MB; the sheet uses the first, and in ``shared-last`` the last, so every entry is read), an
EPUB of 5,000 empty chapters, a PDF of 5,000 pages without a text layer sharing one scanned
image (read by OCR), a 10,000 x 10,000 RGBA PNG (exactly the 100-megapixel limit, 400 KB)
and the same PNG with a line of text to read. The child indexes a
folder holding only that file with a tiny 2-layer BERT bundle (built once, so the model's own
memory is a few MB and the figures are the reader's), and the parent reads the child's peak RSS
(its ``VmHWM``, polled and read by the child at its end; Tesseract, a process of its own with
its own budget, is not included) and
wall time; past ``--limit-s`` the child is killed and the row says so. The peer is the same index run
over an empty folder (interpreter, model, parsers), measured first: ``x empty`` is each peak
against it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hefsearch.bench.harness import tests_importable


def build_cases(folder: Path, scale: float) -> dict[str, Path]:
    tests_importable()
    from tests.support.container_builders import big_png, epub_empty_chapters, pdf_sharing_one_image, xlsx_shared_strings_bomb

    n = lambda k: max(1, int(k * scale))  # noqa: E731
    side = max(100, int(10_000 * scale ** 0.5))
    cases = {
        "empty folder": None,
        "shared-strings.xlsx": lambda: xlsx_shared_strings_bomb(n(10_000_000)),
        "shared-last.xlsx": lambda: xlsx_shared_strings_bomb(n(10_000_000), use_last=True),
        "empty-chapters.epub": lambda: epub_empty_chapters(n(5_000)),
        "one-image-pages.pdf": lambda: pdf_sharing_one_image(n(5_000)),
        "100mp-rgba.png": lambda: big_png(side, "RGBA"),
        "100mp-rgba-text.png": lambda: big_png(side, "RGBA", "A LINE OF PRINTED TEXT"),
    }
    out = {}
    for name, make in cases.items():
        sub = folder / name.replace(" ", "-")
        sub.mkdir(exist_ok=True)
        if make is not None and not (sub / name).exists():
            (sub / name).write_bytes(make())
        out[name] = sub
    return out


def tiny_bundle(folder: Path) -> Path:
    tests_importable()
    from hefsearch.compile.export.bundle import ExportOptions, export_bundle
    from tests.support.models import make_tiny_bert

    bundle = folder / "bundle"
    if not (bundle / "manifest.json").exists():
        export_bundle(str(make_tiny_bert(folder / "model")), bundle, ExportOptions())
    return bundle


def child(docs: str, bundle: str, lib: str) -> None:
    """In a fresh process: index ``docs`` into a new library; print what came of it (JSON)."""
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync

    with Encoder.open(bundle, backend="cpu", threads=1) as enc:
        report = sync(Library.open(Path(lib)), [Path(docs)], [enc])
    print(json.dumps({"chunks": report.chunks_embedded, "ocr_pages": report.ocr_pages,
                      "failed": [f"{p}: {why}"[:160] for p, why in report.failed][:3],
                      "notes": [f"{why}"[:160] for _, why in report.notes][:3], "peak_kb": _hwm_kb(os.getpid())}))


def measure(docs: Path, bundle: Path, limit_s: float) -> dict:
    lib = tempfile.mkdtemp(prefix="hefsearch-budget-lib-")
    err_file = tempfile.TemporaryFile("w+")  # a pipe could fill and block the child
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", str(docs), str(bundle), lib],
                            stdout=subprocess.PIPE, stderr=err_file, text=True, start_new_session=True)
    killed, done, status, peak_kb = False, False, 0, 0
    while not done:
        peak_kb = max(peak_kb, _hwm_kb(proc.pid))  # its own peak (ru_maxrss would count ours at fork)
        pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            done = True
        elif time.perf_counter() - t0 > limit_s and not killed:
            os.killpg(proc.pid, signal.SIGKILL)
            killed = True
        else:
            time.sleep(0.1)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - t0
    out = proc.stdout.read()
    err_file.seek(0)
    err = err_file.read()
    if killed:
        outcome = f"killed after {limit_s:.0f} s"
    elif proc.returncode:
        outcome = f"exit {proc.returncode}: {err.strip().splitlines()[-1][:100] if err.strip() else ''}"
    else:
        outcome = out.strip().splitlines()[-1] if out.strip() else "?"
        if outcome.startswith("{"):
            peak_kb = max(peak_kb, json.loads(outcome).pop("peak_kb", 0))
            outcome = json.dumps({k: v for k, v in json.loads(outcome).items() if k != "peak_kb"})
    return {"peak_mb": peak_kb / 1024, "seconds": seconds, "outcome": outcome}


def _hwm_kb(pid: int) -> int:
    """A live process's peak resident size (Linux ``VmHWM``, reset at exec), in KB; 0 when gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="size factor (1: the hostile round's files)")
    ap.add_argument("--limit-s", type=float, default=600.0, help="kill an index run after this many seconds")
    ap.add_argument("--only", action="append", help="run only this case (repeatable)")
    ap.add_argument("--keep", type=Path, help="build the files and the bundle in this folder and keep them")
    args = ap.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="hefsearch-budget-"))
    folder.mkdir(parents=True, exist_ok=True)
    bundle = tiny_bundle(folder)
    cases = build_cases(folder, args.scale)
    print(f"{'case':<22} {'MB file':>8} {'peak MB':>8} {'x empty':>8} {'s':>8}   outcome", flush=True)
    peer = None  # the empty folder's peak, measured first
    for name, docs in cases.items():
        if args.only and name not in args.only and name != "empty folder":
            continue
        size = sum(p.stat().st_size for p in docs.iterdir()) / 2**20
        r = measure(docs, bundle, args.limit_s)
        peer = peer or r["peak_mb"]
        print(f"{name:<22} {size:8.1f} {r['peak_mb']:8.0f} {r['peak_mb'] / peer:8.2f} {r['seconds']:8.1f}   "
              f"{r['outcome']}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
    else:
        main()

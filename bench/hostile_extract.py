"""Peak memory and time of text extraction on a hostile corpus, against the file sizes.

    python bench/hostile_extract.py [--scale 1.0] [--repeats 3] [--keep DIR]

Each file is extracted by ``hefsearch.readers.extract.extract`` (with the crawler's 20 MB
``--max-size`` cap on the text a compressed format may unpack to) in a fresh child process,
``--repeats`` times; the table shows the medians: the child's peak RSS above what it held just
before reading the file (interpreter and imports; Linux ``VmHWM``, reset through
``/proc/self/clear_refs`` just before), so the file's own bytes count, that
peak as a multiple of the file's size and of the text it yields (bytes per character), and the
time. The named peer, measured in the same run
on the same HTML files, is a BeautifulSoup tree of the page (``BeautifulSoup(data, "lxml")``
and its ``get_text()``), which is what ``html_to_text`` built before it streamed.

The corpus (sizes at ``--scale 1``): 1M nested ``<div>`` (11 MB, the hostile round's file),
500k nested ``<span>`` with a newline each, a table of 500k cells, a 20 MB single-line text
file and the same line as one HTML paragraph, a DOCX zip bomb (a 250 KB file whose body
unpacks to 200 MB of XML: stops at the text cap), a PDF of 10,000 pages, and the containers
read since: an XLSX zip bomb (64 MB of sheet XML packed 340x), a big real-looking sheet (30 MB
of XML, 5M characters of text), an ODT "billion laughs", a message of 5,000 nested MIME
parts, an EPUB whose spine points outside the archive and a 100,000 x 100,000 pixel PNG of a
few hundred bytes. (The 500 MB mail attachment is streamed past without being held:
``tests/readers/test_extract.py``.)
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hefsearch.bench.harness import tests_importable


MAX_BYTES = 20 * 1024 * 1024  # the crawler's default --max-size


def build_corpus(folder: Path, scale: float) -> dict[str, Path]:
    import random

    tests_importable()
    from tests.support.container_builders import billion_laughs_odt, make_epub, nested_mime, png_bomb, xlsx_zip_bomb
    from tests.support.document_builders import docx_with_body, make_pdf

    rng = random.Random(0)
    words = tuple("".join(rng.choice("abcdefghij") for _ in range(8)).encode() for _ in range(5000))

    n = lambda k: max(1, int(k * scale))  # noqa: E731
    files = {
        "nested-div.html": ("<div>" * n(1_000_000) + "deep <b>text</b>" + "</div>" * n(1_000_000)).encode(),
        "nested-span-newlines.html": ("<span>\n" * n(500_000) + "deep" + "</span>" * n(500_000)).encode(),
        "wide-table.html": ("<table><tr>" + "<td>cell</td>" * n(500_000) + "</tr></table>").encode(),
        "one-line.txt": ("lorem ipsum dolor sit amet " * n(770_000)).encode(),
        "one-line.html": ("<p>" + "lorem ipsum dolor sit amet " * n(770_000) + "</p>").encode(),
        "zip-bomb.docx": docx_with_body("<w:p><w:r><w:t>lorem ipsum dolor sit amet </w:t></w:r></w:p>", n(3_500_000)),
        "10000-pages.pdf": make_pdf([f"Page {i} of a very long report." for i in range(n(10_000))]),
        # the containers read since: refused from their headers, or streamed
        "zip-bomb.xlsx": xlsx_zip_bomb(n(64)),
        "big-sheet.xlsx": xlsx_zip_bomb(n(30), words),
        "billion-laughs.odt": billion_laughs_odt(10),
        "nested-mime-5000.eml": nested_mime(n(5_000)),
        "spine-outside.epub": make_epub([("One", "text")], hrefs=["../../etc/passwd"]),
        "100k-x-100k.png": png_bomb(100_000),
    }
    out = {}
    for name, data in files.items():
        (folder / name).write_bytes(data)
        out[name] = folder / name
    return out


def reset_peak_kb() -> int:
    """Linux: reset this process's peak RSS to its current RSS (``/proc/self/clear_refs``) and
    return it, in KB; elsewhere the peak so far (then imports may hide a small extraction)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return _status_kb("VmHWM")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak_kb() -> int:
    try:
        return _status_kb("VmHWM")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(field)


def child(path: str, how: str) -> None:
    """In a fresh process: import every parser, note the resident size, read and extract the
    file, print the peak above that size (JSON)."""
    import bs4  # noqa: F401 - imports are not the extraction's memory
    import docx  # noqa: F401
    import lxml.etree  # noqa: F401
    import pypdf  # noqa: F401
    import email.policy  # noqa: F401
    import PIL.PngImagePlugin  # noqa: F401
    from bs4 import BeautifulSoup

    from hefsearch.readers.extract import ExtractionError, extract

    extract(Path(__file__).with_name("hostile_extract.py"), kind="text")  # first-use allocations
    before = reset_peak_kb()
    t0 = time.perf_counter()
    try:
        if how == "peer":
            text = BeautifulSoup(Path(path).read_bytes(), "lxml").get_text()
        else:
            text = extract(Path(path), max_bytes=MAX_BYTES).text
        chars, outcome = len(text), f"{len(text):,} chars"
    except ExtractionError as e:
        chars, outcome = 0, f"refused: {e.message[:60]}"
    seconds = time.perf_counter() - t0
    peak = peak_kb()
    print(json.dumps({"kb": max(0, peak - before), "seconds": seconds, "outcome": outcome, "chars": chars}))


def measure(path: Path, how: str, repeats: int) -> dict:
    runs = []
    for _ in range(repeats):
        done = subprocess.run([sys.executable, __file__, "--child", str(path), how], capture_output=True, text=True)
        if done.returncode != 0:
            return {"kb": float("nan"), "seconds": float("nan"), "outcome": f"crashed ({done.returncode})", "chars": 0}
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {"kb": statistics.median(r["kb"] for r in runs), "seconds": statistics.median(r["seconds"] for r in runs),
            "outcome": runs[-1]["outcome"], "chars": runs[-1]["chars"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="corpus size factor (1: the sizes in the docstring)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="build the corpus in this folder and keep it")
    args = ap.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="hostile-"))
    folder.mkdir(parents=True, exist_ok=True)
    corpus = build_corpus(folder, args.scale)
    print(f"{'file':<26} {'size MB':>8} {'peak MB':>8} {'x size':>7} {'x text':>7} {'s':>6}   "
          f"{'bs4 tree MB':>11} {'s':>6} {'bs4/ours':>9}   outcome")
    for name, path in corpus.items():
        size = path.stat().st_size
        ours = measure(path, "ours", args.repeats)
        peer = measure(path, "peer", args.repeats) if name.endswith(".html") else None
        mb = ours["kb"] / 1024
        per_text = f"{ours['kb'] * 1024 / ours['chars']:7.2f}" if ours["chars"] > 1000 else f"{'–':>7}"
        line = (f"{name:<26} {size / 2**20:8.1f} {mb:8.1f} {ours['kb'] * 1024 / size:7.2f} {per_text} "
                f"{ours['seconds']:6.2f}   ")
        if peer:
            line += f"{peer['kb'] / 1024:11.1f} {peer['seconds']:6.2f} {peer['kb'] / max(ours['kb'], 1):8.1f}x"
        else:
            line += f"{'':>11} {'':>6} {'':>9}"
        print(line + f"   {ours['outcome']}", flush=True)
    if not args.keep:
        for p in corpus.values():
            p.unlink()
        folder.rmdir()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main()

"""The web page of ``hefsearch serve``: its weight, and the time from opening a search URL to
its first result in a headless Chromium, against the same search over the JSON API alone.

    python bench/web_page.py [--queries 10] [--keep DIR] [--bundle B] [--with-sim] [--screenshot PNG
    [--screenshot-query Q]]

1. Page weight: every file the page loads (``/`` and the static files it names, the modules
   they import), as served (the server does not compress) and as gzip -9 would make them.
2. Time to first result: for each query of the sample corpus's ``queries.tsv``, a fresh
   navigation to ``/?q=QUERY`` (the static files revalidated: 304), until the page has drawn
   the hits (its ``hefsearch:first-result`` performance mark, from navigation start), and its
   first contentful paint; the peer is ``GET /search`` for the same query over one keep-alive
   connection (what the page's own request costs). Medians, and the ratio page / API.

The library is the sample corpus indexed in FP32 with all-MiniLM-L6-v2 (``--bundle`` to use
another; ``--with-sim`` adds its 8-bit NPU simulation beside it, for the compare view);
``--keep DIR`` builds it once and reuses it. ``--screenshot PNG`` saves the page (the one in
docs/server.md). Needs chromium and chromedriver (Debian packages) and selenium. The machine's
load average is printed first: compare figures of one run.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from hefsearch.bench.harness import tests_importable
from urllib.parse import quote_plus


from hefsearch.bench.serve import HEFSEARCH, start_server, stop

CORPUS = Path(__file__).resolve().parent.parent / "data" / "sample-corpus"


def build(base: Path, bundle: Path | None, with_sim: bool) -> Path:
    library = base / "lib"
    if library.exists():
        return library
    if bundle is None:
        bundle = base / "bundle"
        if not (bundle / "manifest.json").exists():
            from hefsearch.bench.harness import export_temp_bundle

            bundle = export_temp_bundle(tmp=base)
    docs = base / "Documents"  # a copy: the page shows this folder, not the checkout's
    if not docs.exists():
        shutil.copytree(CORPUS, docs, ignore=shutil.ignore_patterns("queries.tsv", "README*"))
    run = lambda *a: subprocess.run([*HEFSEARCH, *a], check=True, stdout=subprocess.DEVNULL)  # noqa: E731
    if with_sim:
        run("compile", "calib", str(bundle), "--from", str(docs), "--n", "256", "--seed", "0")
        run("compile", "sim", str(bundle), "--precision", "a8")
        run("index", str(docs), "--library", str(library), "--bundle", str(bundle), "--backend", "npu-sim",
            "--also-fp32")
    else:
        run("index", str(docs), "--library", str(library), "--bundle", str(bundle))
    return library


def page_files(client, url: str) -> dict[str, bytes]:
    """Path -> bytes of the page and everything it loads (link/script tags, module imports)."""
    files, todo = {}, ["/"]
    while todo:
        path = todo.pop()
        if path in files:
            continue
        r = client.get(url + path)
        r.raise_for_status()
        files[path] = r.content
        text = r.text
        todo += re.findall(r'(?:src|href)="(/static/[^"]+)"', text)
        todo += ["/static/" + m for m in re.findall(r'from "\./([\w.-]+\.js)"', text)]
    return files


def weight(files: dict[str, bytes]) -> None:
    print("page weight (as served / gzip -9):")
    for path, data in sorted(files.items()):
        print(f"  {path:<22} {len(data):>7,} B  {len(gzip.compress(data, 9)):>6,} B")
    total = sum(len(d) for d in files.values())
    packed = sum(len(gzip.compress(d, 9)) for d in files.values())
    print(f"  {'total':<22} {total:>7,} B  {packed:>6,} B  ({len(files)} requests)")


def first_results(driver, client, url: str, queries: list[str]) -> None:
    page, paint, api = [], [], []
    for q in queries:
        t = time.perf_counter()
        client.get(f"{url}/search", params={"query": q, "k": 20}).raise_for_status()
        api.append((time.perf_counter() - t) * 1000)
        driver.get("about:blank")
        driver.get(f"{url}/?q={quote_plus(q)}")
        mark = None
        deadline = time.monotonic() + 30
        while mark is None and time.monotonic() < deadline:
            mark = driver.execute_script(
                "const m = performance.getEntriesByName('hefsearch:first-result'); return m.length ? m[0].startTime : null")
            time.sleep(0.005)
        if mark is None:
            raise SystemExit(f"no result shown for {q!r}")
        page.append(mark)
        paint.append(driver.execute_script(
            "const p = performance.getEntriesByName('first-contentful-paint'); return p.length ? p[0].startTime : null")
            or float("nan"))
    med = statistics.median
    print(f"time to first result, median of {len(queries)} queries (ms):")
    print(f"  GET /search alone (the peer)         {med(api):7.1f}")
    print(f"  page: first contentful paint         {med(paint):7.1f}")
    print(f"  page: /?q=... to hits drawn          {med(page):7.1f}   ratio to the API alone: "
          f"{med(page) / med(api):.1f}x")


def save_screenshot(driver, url: str, out: Path) -> None:
    """The page at ``url``, 1200x760, in 64 colours (small enough for the docs)."""
    from PIL import Image

    driver.set_window_size(1200, 760)
    driver.get(url)
    time.sleep(1.5)
    png = out.with_suffix(".full.png")
    driver.save_screenshot(str(png))
    Image.open(png).convert("RGB").quantize(64).save(out, optimize=True)
    png.unlink()
    print(f"screenshot: {out} ({out.stat().st_size:,} bytes)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--keep", type=Path, default=None)
    ap.add_argument("--bundle", type=Path, default=None)
    ap.add_argument("--with-sim", action="store_true")
    ap.add_argument("--screenshot", type=Path, default=None)
    ap.add_argument("--screenshot-query", default="Wie lange dauert die Zugfahrt von London nach Edinburgh?")
    args = ap.parse_args()

    import httpx

    tests_importable()
    from tests.support.browser import missing, open_browser

    if missing():
        raise SystemExit(missing())
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    base = args.keep or Path(tempfile.mkdtemp(prefix="hefsearch-web-"))
    base.mkdir(parents=True, exist_ok=True)
    library = build(base, args.bundle, args.with_sim)
    with open(CORPUS / "queries.tsv", encoding="utf-8") as f:
        queries = [row["query"] for row in csv.DictReader(f, delimiter="\t")][: args.queries]
    proc, url = start_server(library, "--no-mcp")
    driver = open_browser(1280, 860)
    try:
        with httpx.Client(timeout=60) as client:
            weight(page_files(client, url))
            client.get(f"{url}/search", params={"query": "warm up"})
            first_results(driver, client, url, queries)
        if args.screenshot:
            save_screenshot(driver, f"{url}/?q={quote_plus(args.screenshot_query)}", args.screenshot)
    finally:
        driver.quit()
        stop(proc)


if __name__ == "__main__":
    main()

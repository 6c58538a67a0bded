"""One warm process against one process per query, and how fast a saved file is found (issue 19).

    python bench/serve.py [--chunks 10000 100000] [--queries 100] [--keep DIR] [--bundle B]

For each library size (synthetic chunks from bench/query_latency.py, random vectors in the
real encoder's space, so the server opens and checks the real encoder):

1. the library part of a vector query plus the query's encoding (encode + search + fetch +
   snippet, quick snippets), as the server times it in its own process: the floor;
2. ``hefsearch serve`` on 127.0.0.1, warm: GET /search (vector, quick snippets) over one
   keep-alive connection, and the MCP ``search`` tool over streamable HTTP at /mcp, wall-clock
   in the client: p50/p95, and their ratio to (1) (goal: warm p50 within 2x);
3. one ``hefsearch search`` process per query (what a script did before): p50, and the ratio;
4. throughput: 8 concurrent HTTP clients against 1, queries/s.

Then on a real folder (the sample corpus) under ``hefsearch serve --watch``: the time from
saving a new file to its first hit through /search (goal: 3 s plus the file's encoding time,
measured apart with the same encoder). Medians of the given runs; the load average is printed
first: the machine is shared, compare figures of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from hefsearch.bench.index import vocabulary
from hefsearch.bench.query_latency import build_library, make_queries, percentile

HEFSEARCH = [sys.executable, "-m", "hefsearch"]
CLIENTS = 8


def start_server(library: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([*HEFSEARCH, "serve", "--library", str(library), "--port", "0", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if "hefsearch serve: http://" in line:
            url = line.split("hefsearch serve: ", 1)[1].split()[0]
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # drain
            return proc, url
    raise SystemExit(f"hefsearch serve did not start (exit {proc.wait()})")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def p50_p95(values: list[float]) -> str:
    return f"p50 {statistics.median(values):7.1f} ms  p95 {percentile(values, 0.95):7.1f} ms"


def warm_latencies(url: str, queries: list[str]) -> dict[str, list[float]]:
    """Per query, HTTP and MCP taking turns (a burst of load on the machine hits both alike):
    ``http`` GET /search over one keep-alive connection and ``mcp`` the MCP search tool over
    /mcp, wall-clock in this client; ``floor_http`` / ``floor_mcp`` the same queries' library
    part plus encoding (encode + search + fetch + snippet) as the server measured them inside
    its process. The floor comes from the server itself: a second encoder in this process
    would compete with it for the 2 cores (ONNX Runtime's threads spin after each run)."""
    import anyio
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    args = {"mode": "vector", "k": 10, "snippets": "quick"}
    stages = ("encode", "search", "fetch", "snippet")

    async def run():
        out: dict[str, list[float]] = {"http": [], "mcp": [], "floor_http": [], "floor_mcp": []}
        with httpx.Client(timeout=60) as client:
            async with streamable_http_client(f"{url}/mcp") as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    for i, q in enumerate([*queries[:10], *queries]):  # the first 10 warm up
                        t = time.perf_counter()
                        r = client.get(f"{url}/search", params={**args, "query": q})
                        t_http = (time.perf_counter() - t) * 1000
                        r.raise_for_status()
                        t = time.perf_counter()
                        result = await session.call_tool("search", {**args, "query": q})
                        t_mcp = (time.perf_counter() - t) * 1000
                        assert not result.is_error, result.content
                        if i >= 10:
                            out["http"].append(t_http)
                            out["mcp"].append(t_mcp)
                            for key, answer in (("floor_http", r.json()), ("floor_mcp", json.loads(result.content[0].text))):
                                out[key].append(sum(answer["timings_ms"].get(s, 0.0) for s in stages))
        return out

    return anyio.run(run)


def process_per_query(library: Path, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        t = time.perf_counter()
        subprocess.run([*HEFSEARCH, "search", q, "--mode", "vector", "--quick-snippets", "--json",
                        "--library", str(library)], capture_output=True, check=True)
        out.append((time.perf_counter() - t) * 1000)
    return out


def throughput(url: str, queries: list[str], clients: int) -> float:
    """Queries per second with ``clients`` threads, each on its own keep-alive connection."""
    import httpx

    params = {"mode": "vector", "k": 10, "snippets": "quick"}
    share = [queries[i::clients] for i in range(clients)]
    errors: list[str] = []

    def client(mine):
        with httpx.Client(timeout=120) as c:
            for q in mine:
                r = c.get(f"{url}/search", params={**params, "query": q})
                if r.status_code != 200:
                    errors.append(r.text[:200])

    threads = [threading.Thread(target=client, args=(m,)) for m in share]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        print(f"   {len(errors)} requests refused, e.g. {errors[0]}")
    return len(queries) / (time.perf_counter() - t)


def bench_size(n: int, bundle: Path, base: Path, queries: list[str], per_process: int) -> None:
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library

    path = base / f"serve-library-{n}"
    if not (path / "library.db").exists():
        with Encoder.open(bundle, backend="cpu") as enc:
            seconds = build_library(path, n, vocabulary(), space_of=enc)
        with Library.open(path) as lib:
            lib.set_settings(bundle=str(bundle), default_space="cpu-fp32", roots=["/synthetic"])
        print(f"\n   built {n:,} synthetic chunks in {seconds:.0f} s")
    print(f"\n{n:,} chunks, vector queries, k=10, quick snippets, all-MiniLM-L6-v2 on the CPU")
    proc, url = start_server(path)
    try:
        warm = warm_latencies(url, queries)
        http, mcp = warm["http"], warm["mcp"]
        print(f"   1. in the server: library part + encoding  {p50_p95(warm['floor_http'])}")
        for label, wall, floor in (("HTTP /search    ", http, warm["floor_http"]),
                                   ("MCP search tool", mcp, warm["floor_mcp"])):
            print(f"   2. {label} wall-clock        {p50_p95(wall)}   "
                  f"{statistics.median(wall) / statistics.median(floor):.2f}x the library part + encoding (goal <= 2x)")
        single = throughput(url, queries, 1)
        many = throughput(url, queries, CLIENTS)
        print(f"   4. throughput: 1 client {single:.1f} q/s, {CLIENTS} concurrent clients {many:.1f} q/s "
              f"({many / single:.2f}x; one encoder answers one query at a time)")
    finally:
        stop(proc)
    cold = process_per_query(path, queries[:per_process])
    print(f"   3. one 'hefsearch search' process per query ({len(cold)} queries): {p50_p95(cold)}   "
          f"warm HTTP is {statistics.median(cold) / statistics.median(http):.0f}x faster")


def bench_watch(bundle: Path, base: Path, repeats: int) -> None:
    """Saving a file under serve --watch until /search finds it."""
    import httpx

    from hefsearch.embed import Encoder

    docs = base / "watched-docs"
    if docs.exists():
        shutil.rmtree(docs)
    shutil.copytree(Path(__file__).resolve().parent.parent / "data" / "sample-corpus", docs)
    lib = base / "watched-library"
    shutil.rmtree(lib, ignore_errors=True)
    subprocess.run([*HEFSEARCH, "index", str(docs), "--library", str(lib), "--bundle", str(bundle),
                    "--backend", "cpu"], capture_output=True, check=True)
    proc, url = start_server(lib, "--watch", "--debounce", "1000")
    texts = [f"Meeting notes {i}: the quarterly budget review moves the word zyx{i}q to Thursday. "
             "Everyone brings the revised figures and the travel plan for the spring conference." for i in range(repeats)]
    with Encoder.open(bundle, backend="cpu") as enc:
        enc.encode_passages(texts[:1])
        t = time.perf_counter()
        for text in texts:
            enc.encode_passages([text])
        encoding = (time.perf_counter() - t) * 1000 / len(texts)
    found = []
    try:
        with httpx.Client(timeout=30) as client:
            for _ in range(60):  # the watcher's catch-up first
                if client.get(f"{url}/status").json()["freshness"]["watched"]:
                    break
                time.sleep(0.5)
            time.sleep(2)
            for i, text in enumerate(texts):
                (docs / f"saved-{i}.md").write_text(text, encoding="utf-8")
                t = time.perf_counter()
                while time.perf_counter() - t < 60:
                    hits = client.get(f"{url}/search", params={"query": f"zyx{i}q", "mode": "keyword"}).json()["hits"]
                    if hits:
                        found.append((time.perf_counter() - t) * 1000)
                        break
                    time.sleep(0.05)
    finally:
        stop(proc)
    print(f"\nserve --watch on the sample corpus (--debounce 1000 ms): saved file -> first hit over HTTP, "
          f"{len(found)}/{repeats} found: {p50_p95(found)}; its encoding alone {encoding:.0f} ms "
          f"(goal: 3000 ms + encoding = {3000 + encoding:.0f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--per-process", type=int, default=10, help="queries run as one process each")
    ap.add_argument("--watch-repeats", type=int, default=5)
    ap.add_argument("--keep", type=Path, default=None, help="build the libraries under DIR once and reuse them")
    ap.add_argument("--bundle", type=Path, default=None)
    args = ap.parse_args()
    load = os.getloadavg()
    print(f"cores: {os.cpu_count()}, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (shared machine: "
          "compare figures of one run)")
    with tempfile.TemporaryDirectory() as t:
        base = args.keep or Path(t)
        base.mkdir(parents=True, exist_ok=True)
        if args.bundle:
            bundle = args.bundle
        elif (base / "bundle" / "manifest.json").exists():
            bundle = base / "bundle"
        else:
            from hefsearch.bench.harness import export_temp_bundle

            bundle = export_temp_bundle(tmp=base)
        queries = make_queries(vocabulary(), args.queries)
        for n in sorted(args.chunks):
            bench_size(n, bundle, base, queries, args.per_process)
        bench_watch(bundle, base, args.watch_repeats)
    print(json.dumps({"load_average": load}))


if __name__ == "__main__":
    main()

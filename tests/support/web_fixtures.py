"""Fixtures of the web page's tests: a library with an NPU-simulation space beside FP32 over a
small folder that holds hostile file names and documents, ``hefsearch serve`` on it
(127.0.0.1, an ephemeral port), and one headless Chromium per test module (tests/support/browser.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.process_helpers import Proc
from tests.support.tui_support import CORPUS

HOSTILE_NAME = "<img src=x onerror=window.__pwned=1>.txt"
#: the tests assert that window.__pwned is never set: each of these would set it if run
WEB_DOCS = {
    **CORPUS,
    HOSTILE_NAME: "A hostile name over the zanzibar ferry timetable.\n",
    "notes/evil.md": "# Evil\n\n<script>window.__pwned=2</script> The zanzibar notes. "
                     "<img src=x onerror=window.__pwned=3>\n",
    "web/evil.html": "<html><head><script>window.__pwned=4</script></head><body><p>&lt;script&gt;"
                     "window.__pwned=5&lt;/script&gt; The zanzibar harbour page.</p>"
                     "<p onclick=\"window.__pwned=6\">ferry</p></body></html>",
    # long: the reader must scroll to the passage (line 160 of 200)
    "notes/long-log.txt": "\n".join(f"Log entry {i}: the pumps ran and the tank level was normal."
                                     + (" A quetzal was seen at the fence." if i == 160 else "")
                                     for i in range(1, 201)),
    "work/birds.txt": "The quetzal is a bird of the cloud forests of Central America.\n",
    "travel/guatemala.md": "# Guatemala\n\nWe hoped to see a quetzal near the lake.\n",
}
#: modified in 2020 (the others: now), for the date filters
OLD_FILE, OLD_MTIME = "travel/diary.txt", 1_600_000_000


@dataclass
class WebServer:
    url: str
    library: Path
    docs: Path
    env: dict
    proc: Proc


def build_web_library(base: Path, sim_bundle: Path) -> tuple[Path, Path]:
    """(library, docs): WEB_DOCS indexed in the bundle's ``a8`` NPU simulation and in FP32."""
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from tests.support.tui_support import write_corpus

    docs = write_corpus(base / "docs", WEB_DOCS)
    os.utime(docs / OLD_FILE, (OLD_MTIME, OLD_MTIME))
    with Library.open(base / "lib") as lib, \
            Encoder.open(sim_bundle, backend="npu-sim", profile="a8", threads=1) as npu, \
            Encoder.open(sim_bundle, backend="cpu", threads=1) as cpu:
        lib.set_settings(bundle=str(sim_bundle))
        sync(lib, [docs], [npu, cpu])
    return base / "lib", docs


def start_server(library: Path, env: dict, *extra: str) -> tuple[Proc, str]:
    proc = Proc(["serve", "--library", str(library), "--port", "0", "--no-mcp", *extra], env)
    try:
        return proc, proc.wait_for(r"hefsearch serve: (http://127\.0\.0\.1:\d+)", timeout=90).group(1)
    except BaseException:
        proc.stop()
        raise


@pytest.fixture(scope="module")
def web_server(sim_bundle, tmp_path_factory) -> WebServer:
    base = tmp_path_factory.mktemp("web")
    library, docs = build_web_library(base, sim_bundle)
    env = {"HEFSEARCH_HOME": str(base / "home")}
    proc, url = start_server(library, env)
    try:
        yield WebServer(url, library, docs, env, proc)
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def browser():
    from tests.support.browser import need_browser, open_browser

    need_browser()
    driver = open_browser()
    try:
        yield driver
    finally:
        driver.quit()

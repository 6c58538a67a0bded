"""Extraction memory follows the text, not the markup: HTML is parsed as a stream (no tree).

Measured in a child process (Linux peak RSS, ``VmHWM``, reset just before extracting; the
file's bytes, read by the extractor, count), so the test process's own memory does not.
Before, the hostile round's 11 MB file of a million nested ``<div>`` took ~670 MB (a
BeautifulSoup tree: ~60 bytes of memory per byte of file); the bound here is 3 bytes per byte
of file, measured at 2.0 (``bench/hostile_extract.py`` prints the whole hostile corpus)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hefsearch.index.extract import html_to_text

pytestmark = pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux peak-RSS reset")

#: peak memory of an extraction, in bytes per byte of the file
BYTES_PER_FILE_BYTE = 3

CHILD = """
import json, sys, time
from pathlib import Path
from hefsearch.index.extract import extract
import bs4, lxml.etree  # imported before measuring: not the extraction's memory

def hwm():
    return next(int(l.split()[1]) for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM:"))

path = Path(sys.argv[1])
extract(Path(sys.argv[2]))  # warm: first-use allocations of the parsers
data = path.read_bytes()
Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
before = hwm()
text = extract(path).text
print(json.dumps({"kb": hwm() - before, "text": text[:100], "chars": len(text)}))
"""


def peak_extraction(path: Path, tmp_path: Path) -> dict:
    small = tmp_path / "small.html"
    small.write_text("<p>warm <b>up</b></p>")
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(small)], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name, markup, text", [
    # the hostile round's file: 11 MB
    ("nested-div.html", "<div>" * 1_000_000 + "deep <b>text</b>" + "</div>" * 1_000_000, "deep text"),
    # inline nesting with whitespace between the tags: a million strings a tree would keep
    ("nested-span.html", "<span>\n" * 300_000 + "deep" + "</span>" * 300_000, "deep"),
])
def test_nested_html_extracts_in_memory_bounded_by_the_file(tmp_path, name, markup, text):
    path = tmp_path / name
    path.write_text(markup)
    size = path.stat().st_size
    got = peak_extraction(path, tmp_path)
    assert got["text"] == text
    assert got["kb"] * 1024 <= BYTES_PER_FILE_BYTE * size, f"{got['kb'] / 1024:.0f} MB for a {size / 2**20:.0f} MB file"


def test_a_long_text_in_one_line_costs_a_few_times_its_size(tmp_path):
    """One 8 MB paragraph: the whitespace is collapsed piece by piece (one re.sub over the whole
    text lists every match: ~20 bytes per byte of text). The file, a copy the binary check
    makes, the line's pieces and the line: 6 bytes per byte at most (measured 4.9)."""
    path = tmp_path / "one-line.html"
    path.write_text("<p>" + "lorem ipsum dolor sit amet " * 300_000 + "</p>")
    got = peak_extraction(path, tmp_path)
    assert got["chars"] == len(("lorem ipsum dolor sit amet " * 300_000).strip())
    assert got["kb"] * 1024 <= 6 * path.stat().st_size


@pytest.mark.parametrize("parser", ["lxml", "html.parser"])
def test_streaming_keeps_the_text_a_tree_gave(parser):
    """Structure, whitespace, pre, cells, title, entities: the same text as the tree walk it
    replaced (compared on 600 real pages and 1500 random ones while writing it)."""
    html = (b"<html><head><title> Tr\xc3\xa4in &amp; travel </title><style>p{}</style></head><body>"
            b"<p>one  <i>two</i>\n three</p>\n  \n<div><div>deep</div></div>"
            b"<pre>a\n  b\n\nc</pre><table><tr><td>x</td><td></td><td>y</td></tr><tr><th>h</th></tr></table>"
            b"<ul><li>i1<li>i2</ul>x<br><br>y&nbsp;&nbsp;z<template><title>no</title>t</template>"
            b"<script>var s = '<p>no</p>';</script><!-- c --> end</body></html>")
    assert html_to_text(html, parser) == (
        "Träin & travel\n\none two three\n\ndeep\n\na\nb\n\nc\n\nx |  | y\nh\n\ni1\ni2\n\nx\n\ny z end")


def test_a_big_sheet_streams_in_memory_bounded_by_its_text(tmp_path):
    """A 30 MB sheet (a 3 MB XLSX) is read row by row: its peak stays a few bytes per character
    of text and below the size of its XML (a tree of it takes ~10x that)."""
    import random

    from tests.container_builders import xlsx_zip_bomb

    rng = random.Random(0)
    words = tuple("".join(rng.choice("abcdefghij") for _ in range(8)).encode() for _ in range(5000))
    path = tmp_path / "big.xlsx"
    path.write_bytes(xlsx_zip_bomb(30, words))  # packs ~10x, under the bomb ratio
    got = peak_extraction(path, tmp_path)
    assert got["chars"] > 5_000_000 and got["text"].startswith("Sheet: S")
    assert got["kb"] * 1024 < 8 * got["chars"] and got["kb"] * 1024 < 30 * 2**20

"""A regular (non-editable) build maps the top-level folders to hefsearch.* with their data."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_holds_every_package_and_its_data(tmp_path):
    pytest.importorskip("setuptools", minversion="77")  # the PEP 639 license string
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = tmp_path.glob("hefsearch-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for pkg in ("embed", "embed/backends", "compile", "compile/export", "compile/hef", "compile/sim",
                "compile/robust", "index", "search", "evaluate", "diagnose", "cli", "tui",
                "tui/widgets", "tui/screens"):
        assert f"hefsearch/{pkg}/__init__.py" in names, pkg
    assert "hefsearch/__main__.py" in names  # python -m hefsearch
    assert "hefsearch/evaluate/data/parallel.tsv" in names
    assert "hefsearch/tui/app.tcss" in names
    for page_file in ("index.html", "app.js", "api.js", "dom.js", "views.js", "style.css"):  # the web page
        assert f"hefsearch/serve/static/{page_file}" in names, page_file
    assert not any(n.startswith(("tests/", "embed/", "index/")) for n in names), "a top-level folder leaked"
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "hefsearch = hefsearch.cli.entry:run" in zipfile.ZipFile(wheel).read(entry).decode()


def test_python_m_hefsearch_runs_the_cli():
    r = subprocess.run([sys.executable, "-m", "hefsearch", "--version"], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("hefsearch, version ")

"""bench/: one shared harness instead of sys.path edits, an index that names every script, and
scripts that run as ``python bench/<script>.py`` from any folder."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from hefsearch.bench.harness import median_time, paired_ratios, spread

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
#: sys.path edits that are not about importing bench modules, and why
OTHER_PATHS = {"bench/harness.py": "tests_importable(): the test suite's builders",
               "bench/host_overhead.py": "the HailoRT fake must shadow hailo_platform",
               "bench/ocr.py": "RapidOCR from a folder the user names (--rapidocr-path)"}


def test_the_readme_indexes_every_script_and_shared_module():
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(\w+)\.py` \|", readme, re.MULTILINE))
    on_disk = {p.stem for p in BENCH.glob("*.py")} - {"__init__"}
    assert on_disk - rows == set(), "add a row to bench/README.md for these"
    assert rows - on_disk == set(), "bench/README.md names scripts that do not exist"


def test_scripts_share_the_harness_instead_of_editing_sys_path():
    edits = []
    for path in sorted(BENCH.glob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"sys\.path\.(insert|append)", line) and rel not in OTHER_PATHS:
                edits.append(f"{rel}:{n}: {line.strip()}")
            if re.search(r"^\s*from (bench\.|_models|bench import)", line):
                edits.append(f"{rel}:{n}: {line.strip()}")
    assert not edits, "import hefsearch.bench.<module> instead:\n" + "\n".join(edits)


@pytest.mark.parametrize("script", ["encode", "robust", "crosslingual"])
def test_a_script_runs_from_another_folder(script, tmp_path):
    r = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), "--help"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "usage:" in r.stdout


def test_the_harness_figures():
    assert paired_ratios([2.0, 3.0], [1.0, 2.0]) == [2.0, 1.5]
    text = spread([1.0, 2.0, 3.0, 4.0], "x")
    assert text.startswith("median of 4 slices, min-max 1.00-4.00x")
    calls = []
    assert median_time(lambda: calls.append(1), 3) >= 0 and len(calls) == 3

"""The wheel holds every folder of the product: each sub-folder of a mapped package that holds
files is listed in pyproject's ``packages`` (setuptools warns about one that is not, and says a
later release will leave it out: the web page's files would be missing from an install)."""

from __future__ import annotations

import pytest

from tests.project.test_layers import REPO


def test_every_folder_with_files_is_a_listed_package():
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(config["packages"])
    missing = []
    for name, folder in config["package-dir"].items():
        for sub in sorted((REPO / folder).rglob("*")):
            if not sub.is_dir() or "__pycache__" in sub.parts or sub.name.endswith(".egg-info"):
                continue
            if any(f.is_file() for f in sub.iterdir()):
                dotted = ".".join([name, *sub.relative_to(REPO / folder).parts])
                if dotted not in listed:
                    missing.append(f"{dotted} ({sub.relative_to(REPO)})")
    assert not missing, "add to [tool.setuptools] packages: " + ", ".join(missing)

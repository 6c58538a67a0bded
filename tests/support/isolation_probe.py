"""Run only by tests/project/test_isolation.py in a child pytest (not collected by the suite: no test_
prefix). A module-scoped fixture writes where hefsearch and the platform put a user's data, cache
and config, as an indexing fixture would; with HEFSEARCH_PROBE_LEAK set it also writes straight
into that path, which the session's guard must catch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def written():
    import platformdirs

    from hefsearch.base.locations import cache_dir, data_dir

    folders = [data_dir(), cache_dir(), Path(platformdirs.user_config_dir("hefsearch", appauthor=False))]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "probe.txt").write_text("written by a module-scoped fixture")
    leak = os.environ.get("HEFSEARCH_PROBE_LEAK")
    if leak:
        Path(leak).write_text("written past the isolation")
    return folders


def test_fixture_wrote(written):
    assert all((f / "probe.txt").is_file() for f in written)

"""The suite never reads or writes the user's own data, cache or config folders: the isolation
is in place before any fixture runs (session- and module-scoped ones included), and the session
fails when something is written there anyway."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import conftest
from tests.support import isolation

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def seen_by_module_fixture():
    from hefsearch.base.locations import cache_dir, data_dir

    return {"data": data_dir(), "cache": cache_dir(),
            **{v: Path(os.environ[v]) for v in isolation.XDG_VARS}}


def test_module_fixtures_already_see_isolated_folders(seen_by_module_fixture):
    guarded = isolation.guarded_folders()
    assert guarded, "the first pytest process recorded no folders to guard"
    for name, folder in seen_by_module_fixture.items():
        for real in guarded:
            assert not folder.is_relative_to(real), (name, folder, real)
    # the module's own home (tests/conftest.py), not one shared by every module of the session
    assert seen_by_module_fixture["data"].name.startswith("module-home")
    for var in isolation.XDG_VARS:
        assert seen_by_module_fixture[var].is_relative_to(conftest.ISOLATED_ROOT)


def _probe(sentinel: Path, **env) -> subprocess.CompletedProcess:
    child = {k: v for k, v in os.environ.items()
             if k not in (isolation.HOME_VAR, isolation.ISOLATED_MARK, *isolation.XDG_VARS)}
    child.update({v: str(sentinel) for v in isolation.XDG_VARS}, **env)
    return subprocess.run([sys.executable, "-m", "pytest", "tests/support/isolation_probe.py", "-n", "0", "-q",
                           "-p", "no:cacheprovider"],
                          cwd=REPO, env=child, capture_output=True, text=True, timeout=240)


def test_a_run_pointed_at_an_empty_sentinel_leaves_it_empty(tmp_path):
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    run = _probe(sentinel)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    assert list(sentinel.iterdir()) == []


def test_the_session_fails_when_something_writes_into_the_sentinel(tmp_path):
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    run = _probe(sentinel, HEFSEARCH_PROBE_LEAK=str(sentinel / "leak.txt"))
    assert run.returncode != 0
    assert "wrote into the user's own folders" in run.stdout
    assert "leak.txt" in run.stdout

"""base/locations.py decides the data, cache and config folders, for every env combination,
and the modules that keep files there follow it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hefsearch.base import locations

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG layout is Linux's")


@pytest.fixture
def env(monkeypatch, tmp_path):
    home = tmp_path / "user"
    monkeypatch.setenv("HOME", str(home))
    for name in ("HEFSEARCH_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch, tmp_path, home


@pytest.mark.parametrize("hef_home", [None, "", "abs", "~/hh"])
@pytest.mark.parametrize("xdg", [False, True])
def test_folders_for_every_env_combination(env, hef_home, xdg):
    monkeypatch, tmp, home = env
    if xdg:
        for name in ("DATA", "CACHE", "CONFIG"):
            monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp / f"xdg-{name.lower()}"))
    if hef_home is not None:
        monkeypatch.setenv("HEFSEARCH_HOME", str(tmp / "abs") if hef_home == "abs" else hef_home)
    if hef_home == "abs":
        root = tmp / "abs"
        expected = (root, root / "cache", root / "config")
    elif hef_home == "~/hh":  # ~ is the user's home folder
        root = home / "hh"
        expected = (root, root / "cache", root / "config")
    elif xdg:  # unset or empty: the platform's folders, which honour XDG_*_HOME
        expected = (tmp / "xdg-data" / "hefsearch", tmp / "xdg-cache" / "hefsearch",
                    tmp / "xdg-config" / "hefsearch")
    else:
        expected = (home / ".local/share/hefsearch", home / ".cache/hefsearch", home / ".config/hefsearch")
    assert (locations.data_dir(), locations.cache_dir(), locations.config_dir()) == expected


def test_the_modules_keeping_files_follow_locations(env):
    from hefsearch import index
    from hefsearch.embed import bundle, ort_session
    from hefsearch.index import encoders, library, library_folder
    from hefsearch.serve import server

    monkeypatch, tmp, _ = env
    monkeypatch.setenv("HEFSEARCH_HOME", str(tmp / "h"))
    data, cache = tmp / "h", tmp / "h" / "cache"
    assert index.data_dir() == library.data_dir() == data
    assert library.resolve_library_path() == data / library_folder.DEFAULT_NAME
    assert encoders._default_bundle_file().parent == data
    assert server.default_token_file().parent == data
    assert ort_session.ort_cache_dir() == cache / "ort"
    assert bundle.FileHashCache.load().path == cache / bundle.CACHE_FILE

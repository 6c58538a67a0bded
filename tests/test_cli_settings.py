"""``hefsearch settings``: list, set and unset the library's index settings (hnsw_threshold,
compress_threshold, index_factory), refuse bad values with nothing stored, and the claim the
command prints: the next ``hefsearch index`` run on the same folders, with no file changed,
rebuilds every space's index as the settings say.

One library of the tiny BERT bundle (just over 1000 chunks: a forced IVF factory needs 1000
vectors to train) is indexed once per module; each test works on a copy of it."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from hefsearch.cli.main import main
from hefsearch.index import library as library_module
from hefsearch.index.library import Library
from hefsearch.index.spaces import (DEFAULT_COMPRESS_THRESHOLD, DEFAULT_HNSW_THRESHOLD, INDEX_META_FILE)
from tests.library_helpers import write_corpus

KEYS = ["hnsw_threshold", "compress_threshold", "index_factory", "extra_suffixes"]


def run(*args, library=None):
    extra = ["--library", str(library)] if library is not None else []
    return CliRunner(env={"COLUMNS": "200"}).invoke(main, [*map(str, args), *extra])


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, tiny_bert_bundle):
    """(library folder, docs folder): 120 small documents indexed on the CPU, nothing set."""
    base = tmp_path_factory.mktemp("settings")
    docs = base / "docs"
    write_corpus(docs, n_files=120, paragraphs=4)
    res = run("index", docs, "--bundle", tiny_bert_bundle, "--backend", "cpu", library=base / "lib")
    assert res.exit_code == 0, res.output
    return base / "lib", docs


@pytest.fixture
def lib_path(indexed, tmp_path):
    shutil.copytree(indexed[0], tmp_path / "lib")
    return tmp_path / "lib"


def stored(lib_path) -> dict:
    with Library.open(lib_path, create=False, read_only=True) as lib:
        return lib.settings()


def test_list_shows_every_index_setting_as_default_with_its_default_value(lib_path):
    res = run("settings", "--json", library=lib_path)
    assert res.exit_code == 0, res.output
    rows = {r["key"]: r for r in json.loads(res.stdout)["settings"]}
    assert list(rows) == KEYS
    assert all(r["value"] is None and r["meaning"] for r in rows.values())
    assert rows["hnsw_threshold"]["default"] == DEFAULT_HNSW_THRESHOLD
    assert rows["compress_threshold"]["default"] == DEFAULT_COMPRESS_THRESHOLD

    text = run("settings", library=lib_path).stdout
    assert f"{DEFAULT_COMPRESS_THRESHOLD:,}" in text and f"{DEFAULT_HNSW_THRESHOLD:,}" in text
    assert all(k in text for k in KEYS) and "default" in text


def test_help_explains_each_key_with_its_default():
    res = run("settings", "--help")
    assert res.exit_code == 0
    assert f"hnsw_threshold (default {DEFAULT_HNSW_THRESHOLD:,})" in res.stdout
    assert f"compress_threshold (default {DEFAULT_COMPRESS_THRESHOLD:,})" in res.stdout
    assert "index_factory (default by size)" in res.stdout


@pytest.mark.parametrize("text, value", [("500k", 500_000), ("1M", 1_000_000), ("1_000_000", 1_000_000),
                                         ("1.5M", 1_500_000), ("250000", 250_000)])
def test_set_and_unset_round_trip(lib_path, indexed, text, value):
    res = run("settings", "compress_threshold", text, library=lib_path)
    assert res.exit_code == 0, res.output
    assert "hefsearch index" in res.stdout and str(indexed[1]) in res.stdout  # how to apply it now
    with Library.open(lib_path, create=False, read_only=True) as lib:
        assert lib.settings()["compress_threshold"] == value and lib.compress_threshold() == value
    shown = {r["key"]: r["value"] for r in json.loads(run("settings", "--json", library=lib_path).stdout)["settings"]}
    assert shown == {"hnsw_threshold": None, "compress_threshold": value, "index_factory": None,
                     "extra_suffixes": None}

    assert run("settings", "compress_threshold", "default", library=lib_path).exit_code == 0
    with Library.open(lib_path, create=False, read_only=True) as lib:
        assert lib.settings().get("compress_threshold") is None
        assert lib.compress_threshold() == DEFAULT_COMPRESS_THRESHOLD


def test_unset_option_and_a_single_key(lib_path):
    assert run("settings", "hnsw_threshold", "1k", library=lib_path).exit_code == 0
    one = json.loads(run("settings", "hnsw_threshold", "--json", library=lib_path).stdout)["settings"]
    assert [(r["key"], r["value"]) for r in one] == [("hnsw_threshold", 1000)]
    res = run("settings", "--unset", "hnsw_threshold", "--json", library=lib_path)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["previous"] == 1000
    assert stored(lib_path).get("hnsw_threshold") is None


@pytest.mark.parametrize("key, value, says", [
    ("hnsw_threshold", "0", "positive whole number"),
    ("hnsw_threshold", "-5", "positive whole number"),
    ("compress_threshold", "abc", "positive whole number"),
    ("compress_threshold", "1.5", "positive whole number"),
    ("index_factory", "bogus", "could not parse index string bogus"),
    ("index_factory", "IVF16,PQ7", "dimension 32"),  # PQ7 does not divide the tiny model's 32
])
def test_bad_values_are_refused_and_nothing_is_stored(lib_path, key, value, says):
    before = stored(lib_path)
    res = run("settings", key, value, library=lib_path)
    assert res.exit_code == 2 and says in res.output, res.output
    assert "Traceback" not in res.output
    if key == "index_factory":
        assert repr(value) in res.output and "Nothing was changed" in res.output
    assert stored(lib_path) == before


def test_unknown_key_lists_the_known_ones(lib_path):
    before = stored(lib_path)
    res = run("settings", "nprobe", "32", library=lib_path)
    assert res.exit_code == 2 and "Unknown setting 'nprobe'" in res.output
    assert all(k in res.output for k in KEYS)
    assert stored(lib_path) == before


def test_read_only_library_refuses_with_the_library_message(lib_path, monkeypatch):
    monkeypatch.setattr(library_module, "_writable", lambda folder: False)
    res = run("settings", "hnsw_threshold", "1000", library=lib_path)
    assert res.exit_code == 2 and "is open read-only here" in res.output, res.output
    monkeypatch.undo()
    assert "hnsw_threshold" not in stored(lib_path)


def index_types(lib_path) -> tuple[str, str]:
    """(type in status --json, type in the space's index.json)"""
    space = json.loads(run("status", "--json", library=lib_path).stdout)["spaces"][0]
    meta = json.loads((lib_path / "spaces" / space["name"] / INDEX_META_FILE).read_text())
    return space["index_stats"]["type"], meta["type"]


def test_next_index_run_with_no_changed_file_applies_the_setting(lib_path, indexed):
    docs = indexed[1]
    assert json.loads(run("status", "--json", library=lib_path).stdout)["chunks"] >= 1000
    assert index_types(lib_path) == ("Flat", "Flat")
    assert run("settings", "index_factory", "IVF16,Flat", library=lib_path).exit_code == 0
    assert index_types(lib_path) == ("Flat", "Flat")  # stored, not applied yet

    res = run("index", docs, "--json", library=lib_path)
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["added"] == summary["changed"] == summary["chunks_embedded"] == 0
    assert index_types(lib_path) == ("IVF16,Flat", "IVF16,Flat")

    assert run("settings", "--unset", "index_factory", library=lib_path).exit_code == 0
    assert run("index", docs, library=lib_path).exit_code == 0
    assert index_types(lib_path) == ("Flat", "Flat")

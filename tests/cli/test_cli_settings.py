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
from hefsearch.index import library_folder
from hefsearch.index.library import Library
from hefsearch.index.spaces import (DEFAULT_COMPRESS_THRESHOLD, DEFAULT_HNSW_THRESHOLD, INDEX_META_FILE)
from tests.support.library_helpers import write_corpus

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
    ("compress_threshold", "1" + "0" * 25, "more chunks than any library holds"),
    ("hnsw_threshold", "1000000000000001", "more chunks than any library holds"),
    ("index_factory", "bogus", "could not parse index string bogus"),
    ("index_factory", "IVF16,PQ7", "dimension 32"),  # PQ7 does not divide the tiny model's 32
    # built fine, then crash FAISS (and every later index run) on the first add or search:
    ("index_factory", "IDMap,Flat", "add does not make sense with IndexIDMap"),
    ("index_factory", "IDMap2,HNSW32", "leave out IDMap"),
    ("index_factory", "HNSW0", "Faiss assertion 'i < end' failed and FAISS aborted the process"),
    ("index_factory", "HNSW1", "segmentation fault"),
    ("index_factory", "IVF16_HNSW1,Flat", "segmentation fault"),
    ("index_factory", "PQ16x0", "division by zero"),
    ("index_factory", "PQ16x1", "'ksub % 8 == 0' failed"),  # raises at search
    ("index_factory", "SQ0", "would return the wrong documents"),  # runs, finds nothing
])
def test_bad_values_are_refused_and_nothing_is_stored(lib_path, key, value, says):
    before = stored(lib_path)
    res = run("settings", key, value, library=lib_path)
    assert res.exit_code == 2 and says in res.output, res.output
    assert "Traceback" not in res.output
    if key == "index_factory":
        assert repr(value) in res.output and "Nothing was changed" in res.output
    assert stored(lib_path) == before


def test_a_factory_on_which_faiss_hangs_is_refused_in_bounded_time(lib_path, monkeypatch):
    from hefsearch.index import factory_check

    monkeypatch.setattr(factory_check, "PROBE_TIMEOUT_S", 5.0)
    res = run("settings", "index_factory", "NSG0", library=lib_path)  # FAISS loops forever on its first add
    assert res.exit_code == 2 and "did not finish" in res.output, res.output
    assert "index_factory" not in stored(lib_path)


@pytest.mark.parametrize("factory", ["IDMap,Flat", "IDMap2,HNSW32", "HNSW0", "HNSW1"])
def test_index_keeps_working_over_a_crashing_factory_already_stored(lib_path, indexed, factory):
    """As an older hefsearch left it: the setting stored and recorded as the space's factory
    (the run that crashed had recorded it before building). Run in a child: before, HNSW0
    aborted it (exit 134), HNSW1 segfaulted it (139), the IDMap ones raised (exit 1)."""
    import subprocess
    import sys

    with Library.open(lib_path, create=False) as lib:
        lib.set_settings(index_factory=factory)
        lib._set_space_factory(lib.spaces()[0].name, factory)
    done = subprocess.run([sys.executable, "-m", "hefsearch", "index", str(indexed[1]), "--library", str(lib_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"index_factory = {factory!r} cannot be used" in done.stderr
    assert "hefsearch settings index_factory" in done.stderr
    assert index_types(lib_path) == ("Flat", "Flat")  # the size rules' choice for ~1000 chunks
    hits = json.loads(run("search", "train station platform", "--json", library=lib_path).stdout)
    assert hits["hits"]


def test_an_ivf_with_more_lists_than_the_space_has_vectors_waits_instead_of_failing(lib_path, indexed):
    # before: the run trained IVF4096 on the space's ~1000 vectors and FAISS raised
    # ("Number of training points should be at least as large as number of clusters")
    res = run("settings", "index_factory", "IVF4096,Flat", library=lib_path)
    assert res.exit_code == 0, res.output
    assert "fewer than 4,096 chunks stay flat" in res.output
    res = run("index", indexed[1], library=lib_path)
    assert res.exit_code == 0, res.output
    assert index_types(lib_path) == ("Flat", "Flat")


def test_index_keeps_working_over_absurd_thresholds_already_stored(lib_path, indexed, caplog):
    with Library.open(lib_path, create=False) as lib:
        lib.set_settings(hnsw_threshold="abc", compress_threshold=10**30)
    res = run("index", indexed[1], library=lib_path)
    assert res.exit_code == 0, res.output
    said = caplog.text
    assert "hnsw_threshold = 'abc' is not a number of chunks" in said
    assert "compress_threshold = 1000000000000000000000000000000 is not" in said
    with Library.open(lib_path, create=False, read_only=True) as lib:
        assert lib.hnsw_threshold() == DEFAULT_HNSW_THRESHOLD
        assert lib.compress_threshold() == DEFAULT_COMPRESS_THRESHOLD


def test_unknown_key_lists_the_known_ones(lib_path):
    before = stored(lib_path)
    res = run("settings", "nprobe", "32", library=lib_path)
    assert res.exit_code == 2 and "Unknown setting 'nprobe'" in res.output
    assert all(k in res.output for k in KEYS)
    assert stored(lib_path) == before


def test_read_only_library_refuses_with_the_library_message(lib_path, monkeypatch):
    monkeypatch.setattr(library_folder, "writable", lambda folder: False)
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

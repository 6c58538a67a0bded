"""``hefsearch export`` / ``import`` as a person runs them: the summary lines, --json, the folder
map, which spaces this machine can search, an existing library kept, errors without tracebacks."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from hefsearch.cli.main import main
from tests.support.library_helpers import write_corpus


def run(*args):
    return CliRunner(env={"COLUMNS": "200"}).invoke(main, [*map(str, args)])


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, tiny_bert_bundle):
    base = tmp_path_factory.mktemp("travel")
    docs = base / "pi" / "Documents"
    write_corpus(docs, n_files=6, paragraphs=2)
    res = run("index", docs, "--bundle", tiny_bert_bundle, "--backend", "cpu", "--library", base / "lib")
    assert res.exit_code == 0, res.output
    return base / "lib", docs


def test_export_and_import_with_map(indexed, tmp_path):
    lib, docs = indexed
    res = run("export", tmp_path / "lib.tar", "--library", lib)
    assert res.exit_code == 0, res.output
    assert "Exported 6 documents" in res.output and "cpu-fp32" in res.output

    moved = tmp_path / "me" / "Documents"
    shutil.copytree(docs, moved)
    (moved / next(p.name for p in moved.iterdir())).unlink()  # one file did not travel
    res = run("import", tmp_path / "lib.tar", "--library", tmp_path / "new", "--map", f"{docs}={moved}", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["documents"] == 6 and out["remap"]["moved"] == 6
    assert out["remap"]["missing_count"] == 1 and out["remap"]["missing"][0].startswith(str(moved))
    assert out["reach"] == [{"name": "cpu-fp32", "backend": "cpu", "searchable": True, "how": "on the CPU"}]
    assert out["spaces"][0]["fingerprint"] and out["archive"]["format"] == 1

    res = run("search", "train platform", "--library", tmp_path / "new", "--json")
    assert res.exit_code == 0, res.output
    assert all(h["path"].startswith(str(moved)) for h in json.loads(res.output)["hits"])

    res = run("status", "--library", tmp_path / "new", "--json")
    assert json.loads(res.output)["search_here"] == out["reach"]
    res = run("status", "--library", tmp_path / "new")
    assert "Search here: cpu-fp32 on the CPU" in res.output

    # the same archive again: the library is there now, kept
    res = run("import", tmp_path / "lib.tar", "--library", tmp_path / "new")
    assert res.exit_code == 2 and "exists already" in res.output and "--replace" in res.output
    assert "Traceback" not in res.output


def test_text_report_and_refusals(indexed, tmp_path):
    lib, docs = indexed
    res = run("export", tmp_path / "v.tar.gz", "--library", lib, "--no-vectors")
    assert res.exit_code == 0 and "no vector spaces" in res.output
    res = run("import", tmp_path / "v.tar.gz", "--library", tmp_path / "n")
    assert res.exit_code == 0, res.output
    assert "Imported 6 documents" in res.output and "embeds the text again" in res.output

    bad = tmp_path / "bad.tar"
    bad.write_bytes((tmp_path / "v.tar.gz").read_bytes()[:500])
    res = run("import", bad, "--library", tmp_path / "m")
    assert res.exit_code == 2 and "damaged" in res.output and not (tmp_path / "m").exists()
    res = run("import", tmp_path / "v.tar.gz", "--library", tmp_path / "m", "--map", "relative=/x")
    assert res.exit_code == 2 and "absolute" in res.output
    res = run("export", tmp_path / "s.tar", "--library", lib, "--space", "hef")
    assert res.exit_code == 2 and "no space 'hef'" in res.output


def test_export_to_stdout(indexed, tmp_path):
    from hefsearch.index.restore import import_library

    lib, _docs = indexed
    res = CliRunner().invoke(main, ["export", "-", "--library", str(lib)])
    assert res.exit_code == 0, res.stderr
    assert res.stdout_bytes[:22] == b"hefsearch-archive.json" and "MB to stdout" in res.stderr
    (tmp_path / "piped.tar").write_bytes(res.stdout_bytes)
    assert import_library(tmp_path / "piped.tar", tmp_path / "piped").manifest.documents == 6

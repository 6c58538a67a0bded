"""``hefsearch index / search / status`` end to end, as a user runs them (subprocesses with
timeouts), on a normal folder and on a hostile one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.library_helpers import write_corpus


def hefsearch(*args, env_home: Path, timeout=180) -> subprocess.CompletedProcess:
    env = {**os.environ, "HEFSEARCH_HOME": str(env_home), "HEFSEARCH_THREADS": "1", "COLUMNS": "250"}
    env.pop("HEFSEARCH_LIBRARY", None)
    env.pop("HEFSEARCH_BUNDLE", None)
    return subprocess.run([sys.executable, "-m", "hefsearch", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_index_search_status_roundtrip(tmp_path, tiny_bert_bundle):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=5)
    home = tmp_path / "home"
    r = hefsearch("index", docs, "--bundle", tiny_bert_bundle, "--backend", "cpu", "--json", env_home=home)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["added"] == 5 and not summary["partial"] and summary["spaces"] == ["cpu-fp32"]
    assert "Library up to date" in r.stderr
    # the bundle is remembered: no --bundle needed any more
    r = hefsearch("index", docs, env_home=home)
    assert r.returncode == 0, r.stderr
    assert "0 new, 0 changed, 0 removed, 5 unchanged" in " ".join(r.stderr.split())

    r = hefsearch("search", "olive oil sauce", "--k", 3, "--json", env_home=home)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["mode"] == "hybrid" and res["space"] == "cpu-fp32" and len(res["hits"]) == 3
    assert {"rank", "score", "path", "page", "line", "start", "end", "snippet"} <= set(res["hits"][0])
    r = hefsearch("search", "tomatoes garlic", "--mode", "keyword", "--path", "*cooking*", env_home=home)
    assert r.returncode == 0 and "cooking" in r.stdout and "tomatoes" in r.stdout.lower()

    r = hefsearch("status", "--json", env_home=home)
    st = json.loads(r.stdout)
    assert st["documents"] == 5 and st["chunks"] > 5 and st["spaces"][0]["complete"]
    r = hefsearch("status", env_home=home)
    assert r.returncode == 0 and "cpu-fp32" in r.stdout and "documents: 5" in r.stdout

    # a named library elsewhere, and a missing one
    r = hefsearch("index", docs, "--library", "second", "--bundle", tiny_bert_bundle, "--backend", "cpu",
                  env_home=home)
    assert r.returncode == 0 and (home / "second" / "library.db").exists()
    r = hefsearch("search", "x", "--library", "nope", env_home=home)
    assert r.returncode == 2 and "No library" in r.stderr and "Traceback" not in r.stderr


def test_index_without_bundle_is_a_clear_error(tmp_path):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=1)
    r = hefsearch("index", docs, env_home=tmp_path / "home")
    assert r.returncode == 2 and "--bundle" in r.stderr and "Traceback" not in r.stderr


def _hostile_folder(root: Path) -> tuple[dict[str, Path], dict[str, Path], dict[str, Path]]:
    """(good files that must be indexed, bad files that must be reported, either)."""
    import docx

    root.mkdir()
    good = {
        "plain": root / "notes.txt",
        "markdown": root / "readme.md",
        "html": root / "page.html",
        "docx": root / "letter.docx",
        "utf16": root / "utf16.txt",
        "odd name": root / "na\u00efve\nr\u00e9sum\u00e9 \u6587\u4ef6.txt",
    }
    good["plain"].write_text("Plain notes about the quarterly budget review.\n")
    good["markdown"].write_text("# Readme\n\nHow to install the garden irrigation timer.\n")
    good["html"].write_text("<html><head><script>var secret=1;</script><style>p{}</style></head>"
                            "<body><p>Opening hours of the public library.</p></body></html>")
    d = docx.Document()
    d.add_paragraph("A letter about the apartment lease renewal.")
    d.save(good["docx"])
    good["utf16"].write_bytes("Grüße aus München, über den Wetterbericht.\n".encode("utf-16"))
    good["odd name"].write_text("A file whose name has a newline and accents.\n")
    bad = {
        "binary": root / "binary.txt",
        "huge": root / "huge.txt",
        "fifo": root / "pipe.txt",
        "loop": root / "loop",
        "broken link": root / "broken.txt",
        "corrupt pdf": root / "corrupt.pdf",
        "corrupt docx": root / "corrupt.docx",
    }
    bad["binary"].write_bytes(bytes(range(256)) * 40)
    with open(bad["huge"], "wb") as f:  # one 50 MB line
        f.write(b"a" * (50 * 1024 * 1024))
    os.mkfifo(bad["fifo"])
    os.symlink(root, bad["loop"])
    os.symlink(root / "does-not-exist.txt", bad["broken link"])
    bad["corrupt pdf"].write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >>\ngarbage\n%%EOF")
    bad["corrupt docx"].write_bytes(b"PK\x03\x04 this is not a zip")
    either = {
        "empty": root / "empty.txt",
        "invalid utf-8": root / "latin1.txt",
        "nul bytes": root / "nul.txt",
    }
    either["empty"].write_bytes(b"")
    either["invalid utf-8"].write_bytes("Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e, s'il vous pla\u00eet.\n".encode("latin-1"))
    either["nul bytes"].write_bytes(b"Some text\x00 with a NUL byte inside it.\n")
    return good, bad, either


@pytest.mark.timeout(300)
def test_hostile_folder_is_partial_and_reports_every_bad_file(tmp_path, tiny_bert_bundle):
    root = tmp_path / "hostile"
    good, bad, either = _hostile_folder(root)
    home = tmp_path / "home"
    r = hefsearch("index", root, "--bundle", tiny_bert_bundle, "--backend", "cpu", "--json", env_home=home,
                  timeout=240)
    assert r.returncode == 3, r.stderr  # partial
    summary = json.loads(r.stdout)
    assert summary["partial"]
    reported = {e["path"]: e["reason"] for e in summary["failed"] + summary["notes"]}
    for what, path in bad.items():
        assert str(path) in reported and reported[str(path)], f"{what} not reported"
    st = json.loads(hefsearch("status", "--json", env_home=home).stdout)
    indexed = {p for (p,) in _query(home / "library" / "library.db",
                                   "SELECT path FROM documents WHERE status = 'ok'")}
    for what, path in good.items():
        assert str(path) in indexed, f"{what} not indexed"
    for what, path in either.items():  # each accounted for exactly once
        assert (str(path) in indexed) != (str(path) in reported), what
    assert not (set(map(str, bad.values())) & indexed)
    failures = {f["path"] for f in st["failures"]}
    assert {str(bad[k]) for k in ("binary", "huge", "corrupt pdf", "corrupt docx")} <= failures
    # searching finds the good content, including the UTF-16 and the docx text
    r = hefsearch("search", "Wetterbericht", "--mode", "keyword", "--json", env_home=home)
    assert json.loads(r.stdout)["hits"][0]["path"] == str(good["utf16"])
    r = hefsearch("search", "lease renewal", "--mode", "keyword", "--json", env_home=home)
    assert json.loads(r.stdout)["hits"][0]["path"] == str(good["docx"])
    r = hefsearch("search", "secret", "--mode", "keyword", "--json", env_home=home)
    assert json.loads(r.stdout)["hits"] == []  # scripts are not text
    # the human summary names the failures
    r = hefsearch("index", root, env_home=home, timeout=240)
    assert r.returncode == 3 and "corrupt.pdf" in r.stderr and "Partial" in r.stderr


def _query(db: Path, sql: str):
    import sqlite3

    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_output_to_a_pipe_is_not_wrapped_and_says_nothing_useless(tmp_path, tiny_bert_bundle):
    """Written to a pipe or a journal (no terminal, no COLUMNS), a line is not broken at 80
    columns mid-phrase; a search in an FP32 space does not print a re-rank line (it never is)."""
    docs = tmp_path / ("documents-in-a-folder-with-a-long-name-" + "y" * 140)  # past any console width
    write_corpus(docs, n_files=2)
    home = tmp_path / "home"
    library = tmp_path / ("a-library-folder-with-a-long-name-" + "x" * 40)
    env = {**os.environ, "HEFSEARCH_HOME": str(home), "HEFSEARCH_THREADS": "1"}
    for name in ("COLUMNS", "LINES", "HEFSEARCH_LIBRARY", "HEFSEARCH_BUNDLE"):
        env.pop(name, None)

    def run(*args):
        return subprocess.run([sys.executable, "-m", "hefsearch", *map(str, args)], capture_output=True,
                              text=True, timeout=180, env=env)

    r = run("index", docs, "--library", library, "--bundle", tiny_bert_bundle, "--backend", "cpu")
    assert r.returncode == 0, r.stderr
    encoder_lines = [line for line in r.stderr.splitlines() if line.startswith("encoder:")]
    assert encoder_lines and encoder_lines[0].endswith("-> space cpu-fp32"), r.stderr
    assert any(str(library) in line for line in r.stderr.splitlines()), r.stderr
    r = run("search", "olive oil sauce", "--library", library)
    assert r.returncode == 0 and "┃" in r.stdout, r.stderr
    assert "re-ranked" not in r.stderr and "space cpu-fp32" in r.stderr
    r = run("status", "--library", library)
    folders = [line for line in r.stdout.splitlines() if line.strip().startswith("folders:")]
    assert folders and folders[0].strip() == f"folders: {docs}", r.stdout  # whole, not cut at the width

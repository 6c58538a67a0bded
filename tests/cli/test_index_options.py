"""``hefsearch index`` remembers its crawl options: a run without folders (the Ctrl+C hint's
advice, what ``watch`` and the TUI's re-index do) excludes and limits as the run before did; a
run that changes an option says so; ``--forget-options`` starts from the defaults."""

from __future__ import annotations

from click.testing import CliRunner

from hefsearch.cli.main import main
from hefsearch.index.library import Library


def run(*args, library):
    return CliRunner(env={"COLUMNS": "250"}).invoke(main, [*map(str, args), "--library", str(library)])


def indexed_names(lib) -> set[str]:
    with Library.open(lib, create=False, read_only=True) as library:
        return {row[0].rsplit("/", 1)[-1] for row in library.db.execute("SELECT path FROM documents")}


def test_a_run_without_folders_keeps_the_excludes_and_limits_of_the_run_before(tiny_bert_bundle, tmp_path):
    docs, lib = tmp_path / "docs", tmp_path / "lib"
    docs.mkdir()
    (docs / "guide.txt").write_text("How to rotate the logs of the server every week.", encoding="utf-8")
    (docs / "changelog.txt").write_text("Version 2 changed the log rotation.", encoding="utf-8")
    (docs / "big.txt").write_text("A large manual about backups. " * 2000, encoding="utf-8")  # ~60 KB
    res = run("index", docs, "--bundle", tiny_bert_bundle, "--backend", "cpu", "--exclude", "changelog*",
              "--max-size", "0.03", library=lib)
    assert res.exit_code == 3, res.output  # partial: big.txt is too large
    assert indexed_names(lib) == {"guide.txt"}

    (docs / "changelog-2.txt").write_text("Version 3 added compression.", encoding="utf-8")
    (docs / "notes.txt").write_text("Notes on the weekly backup of the server.", encoding="utf-8")
    res = run("index", library=lib)
    assert res.exit_code == 3, res.output
    assert indexed_names(lib) == {"guide.txt", "notes.txt"}  # still excluded, still too large
    said = " ".join(res.output.split())
    assert "options remembered by the library: --exclude 'changelog*' --max-size 0.03" in said
    assert "crawl options changed" not in said

    res = run("index", docs, "--max-size", "1", library=lib)  # a new limit, the excludes kept
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "crawl options changed" in said and "--max-size: 0.03 MiB -> 1 MiB" in said
    assert "--exclude 'changelog*'" in said  # kept, and said so
    assert indexed_names(lib) == {"guide.txt", "notes.txt", "big.txt"}

    (docs / "server.log").write_text("The backup job rotated the server logs.", encoding="utf-8")
    res = run("index", docs, "--ext", ".log", library=lib)
    assert "server.log" in indexed_names(lib)
    res = run("index", library=lib)  # the suffix is kept and said, with the other options
    assert "--exclude 'changelog*' --max-size 1 --ext .log" in " ".join(res.output.split())

    res = run("index", "--forget-options", library=lib)
    assert res.exit_code == 0, res.output
    assert "--exclude: 'changelog*' -> none" in " ".join(res.output.split())
    assert indexed_names(lib) == {"guide.txt", "notes.txt", "big.txt", "changelog.txt", "changelog-2.txt",
                                  "server.log"}
    with Library.open(lib, create=False, read_only=True) as library:
        assert library.settings()["crawl_options"]["excludes"] == []

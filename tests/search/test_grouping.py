"""Issue 21: one hit per file (its best chunk, "N more in this file"), copies of a text folded
under the first file that has it, ``--all-chunks`` for every chunk, hybrid hits with a score a
person can read (the cosine, as in vector mode), and snippets without runs of blanks."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from hefsearch.cli.main import main
from hefsearch.index.library import Library
from hefsearch.index.sync import sync
from hefsearch.search import Searcher
from hefsearch.search.filters import Filters
from hefsearch.search.request import SearchRequest

PASSAGE = ("To read a file line by line in node, create a read stream with fs.createReadStream and "
           "hand it to readline.createInterface; then iterate over the interface with for await, "
           "one line at a time, without loading the whole file into memory.")
GERMAN = ("Um eine Datei in Node Zeile für Zeile zu lesen, erzeugt man mit fs.createReadStream einen "
          "Lesestrom und übergibt ihn an readline.createInterface; dann liest man Zeile für Zeile.")


@dataclass
class Rec:
    id: int
    doc_id: int
    path: str
    text: str
    doc_sha256: str | None = None


def test_group_keeps_the_best_chunk_of_each_file_and_folds_copies():
    from hefsearch.search.grouping import group

    other = "The garden needs water every morning in summer, and the hedge is trimmed in autumn."
    recs = {1: Rec(1, 10, "/d/fs.md", PASSAGE), 2: Rec(2, 10, "/d/fs.md", other + " more"),
            3: Rec(3, 20, "/d/fs.html", "fs | " + PASSAGE + " Next: streams."),
            4: Rec(4, 30, "/d/de.md", GERMAN), 5: Rec(5, 40, "/d/garden.txt", other, "same"),
            6: Rec(6, 50, "/d/garden-copy.txt", "entirely other words here", "same"),
            7: Rec(7, 10, "/d/fs.md", "a third chunk of fs.md")}
    groups = group([1, 3, 2, 4, 5, 6, 7], recs, k=10)
    assert [(g.chunk_id, g.more, g.also_in) for g in groups] == [
        (1, [2, 7], ["/d/fs.html"]),  # the html copy of the passage is folded under fs.md
        (4, [], []),  # the translation is its own hit: copies are judged by words
        (5, [], ["/d/garden-copy.txt"]),  # same content hash
    ]
    assert [g.chunk_id for g in group([1, 3, 2, 4, 5, 6, 7], recs, k=2)] == [1, 4]
    # a copy ranked below the last hit shown is still named under its hit
    assert [(g.chunk_id, g.also_in) for g in group([1, 4, 3], recs, k=1)] == [(1, ["/d/fs.html"])]


@pytest.fixture(scope="module")
def library(bert_encoder, tmp_path_factory):
    docs = tmp_path_factory.mktemp("docs")
    long_doc = "\n\n".join(f"Section {i}: the invoice number {i} lists the amount due and the "
                           "payment deadline for the garden work." for i in range(12))
    (docs / "invoices.txt").write_text(long_doc)
    (docs / "fs.md").write_text("# fs\n\n" + PASSAGE + "\n")
    (docs / "fs.html").write_text(f"<html><body><h1>fs</h1><p>{PASSAGE}</p></body></html>")
    (docs / "all.html").write_text(f"<html><body><h2>path</h2><p>Paths are joined with path.join."
                                   f"</p><h2>fs</h2><p>{PASSAGE}</p></body></html>")
    (docs / "de.md").write_text(GERMAN + "\n")
    (docs / "copy-of-fs.md").write_text("# fs\n\n" + PASSAGE + "\n")  # the same bytes
    (docs / "spaces.txt").write_text("Column one        column two\t\t\tcolumn three: the  invoice   total.\n")
    lib = Library.open(tmp_path_factory.mktemp("lib") / "library")
    sync(lib, [docs], [bert_encoder])
    yield lib
    lib.close()


def names(result) -> list[str]:
    return [Path(h.path).name for h in result.hits]


@pytest.mark.parametrize("mode", ["keyword", "hybrid", "vector"])
def test_one_hit_per_file_and_every_chunk_on_request(library, bert_encoder, mode):
    s = Searcher(library, encoders={"cpu-fp32": bert_encoder})
    res = s.search(SearchRequest("invoice amount due payment deadline", mode=mode, k=5))
    assert len(names(res)) == len(set(names(res)))
    every = s.search(SearchRequest("invoice amount due payment deadline", mode=mode, k=30, all_chunks=True))
    assert names(every).count("invoices.txt") > 1
    hit = next(h for h in res.hits if h.path.endswith("invoices.txt"))
    later = [h for h in every.hits if h.path.endswith("invoices.txt")]
    assert hit.chunk_id == later[0].chunk_id  # the file's best chunk stands for it
    assert hit.more_in_file >= 1 and not res.all_chunks and every.all_chunks


def test_copies_are_folded_under_the_first_file(library, bert_encoder):
    s = Searcher(library, encoders={"cpu-fp32": bert_encoder})
    res = s.search(SearchRequest("read a file line by line in node", mode="keyword", k=10))
    fs = [h for h in res.hits if Path(h.path).name in ("fs.md", "fs.html", "all.html", "copy-of-fs.md")]
    assert len(fs) == 1
    assert sorted(Path(p).name for p in fs[0].also_in) == sorted(
        {"fs.md", "fs.html", "all.html", "copy-of-fs.md"} - {Path(fs[0].path).name})
    every = s.search(SearchRequest("read a file line by line in node", mode="keyword", k=10, all_chunks=True))
    assert {"fs.md", "fs.html", "all.html", "copy-of-fs.md"} <= set(names(every))
    # a translation of the passage is never a copy
    vec = s.search(SearchRequest("Datei Zeile für Zeile lesen", mode="keyword", k=10))
    assert "de.md" in names(vec) and not next(h for h in vec.hits if h.path.endswith("de.md")).also_in


def test_hybrid_hits_carry_the_cosine_the_cli_tui_and_json_show(library, bert_encoder, tiny_bert_bundle):
    s = Searcher(library, encoders={"cpu-fp32": bert_encoder})
    hybrid = s.search(SearchRequest("invoice payment", mode="hybrid", k=5))
    cosine = {h.chunk_id: h.score for h in s.search(SearchRequest("invoice payment", mode="vector", k=200, all_chunks=True)).hits}
    assert hybrid.hits and all(h.score < 0.04 for h in hybrid.hits)  # the fused rank value
    for h in hybrid.hits:
        assert h.similarity == pytest.approx(cosine[h.chunk_id], abs=1e-5)
        assert h.shown_score == h.similarity
    assert any("keyword" in h.sources for h in hybrid.hits)
    args = ["search", "invoice payment", "--library", str(library.path), "--bundle", str(tiny_bert_bundle), "-k", "5"]
    out = json.loads(CliRunner().invoke(main, args + ["--json"]).stdout)
    assert [round(h["similarity"], 4) for h in out["hits"]] == [round(h.similarity, 4) for h in hybrid.hits]
    assert {"more_in_file", "also_in", "similarity", "score"} <= set(out["hits"][0]) and out["all_chunks"] is False
    table = CliRunner().invoke(main, args).stdout
    assert f"{hybrid.hits[0].similarity:.3f}" in table and f"{hybrid.hits[0].score:.4f}" not in table


def test_snippets_have_no_runs_of_blanks(library, bert_encoder):
    s = Searcher(library, encoders={"cpu-fp32": bert_encoder})
    for mode in ("keyword", "vector"):
        res = s.search(SearchRequest("column three invoice total", mode=mode, k=10, filters=Filters(path_glob="spaces.txt")))
        assert res.hits, mode
        snippet = res.hits[0].snippet
        assert "  " not in snippet and "\t" not in snippet and "column two column three" in snippet.lower()


def test_also_in_names_which_copy_when_the_names_are_the_same():
    """Folded copies are named by file name; a copy with this hit's own name is named with the
    folders it differs by, so that 'also in' says which copy."""
    from hefsearch.search.searcher import Hit

    hit = Hit(rank=1, chunk_id=1, score=0.9, path="/usr/share/man/man1/chage.1.gz", page=None, line=1,
              start=0, end=10, snippet="", text="", doc_kind="man",
              also_in=["/usr/share/man/fr/man1/chage.1.gz", "/usr/share/man/man8/expiry.8.gz",
                       "/usr/share/man/de/man1/chage.1.gz", "/srv/x.txt"])
    assert hit.also_in_text() == "also in: fr/man1/chage.1.gz, expiry.8.gz, de/man1/chage.1.gz (+1)"
    assert hit.also_in_text(names=4).endswith(", x.txt")

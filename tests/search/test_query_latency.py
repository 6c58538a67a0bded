"""Fast queries, as behaviour: a search embeds no snippet sentences, the semantic snippets come
later for the hits asked (on the CPU FP32 encoder, never the NPU space's, cached per chunk) and
equal the closest sentence computed by hand; the query path's SQL does not grow with k or count
the library's members. Timings live in bench/query_latency.py.
The corpus's files are the same sentences in other orders, which one hit per document folds
into one: the snippet tests list every chunk (``all_chunks``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hefsearch.embed import Encoder
from hefsearch.index.library import Library
from hefsearch.index.sync import sync
from hefsearch.search import Searcher
from hefsearch.search import snippets
from hefsearch.search.request import SearchRequest
from hefsearch.search.grouping import tidy_snippet
from hefsearch.search.snippets import quick_snippets
from tests.support.library_helpers import count_passages
from tests.support.tui_support import noisy_encoder

#: shares no word with the corpus (as a query in another language would)
FOREIGN_QUERY = "Rechnung Zahlungsfrist Steuerbehoerde"
#: the tiny model's chunks (64 tokens) are shorter than a real snippet window: a narrower
#: window makes them long chunks whose snippet must be chosen
TEST_WINDOW = 60
SHORT_SENTENCES = ["Tax is due.", "The train is late.", "Soup is hot.", "Plants need water.",
                   "The router failed.", "Sleep well.", "The choir sang.", "Pay the invoice.",
                   "Buses run hourly."]


@pytest.fixture(autouse=True)
def narrow_window(monkeypatch):
    monkeypatch.setattr(snippets, "WINDOW_CHARS", TEST_WINDOW)


@pytest.fixture(scope="module")
def two_spaces(tiny_bert_bundle, tmp_path_factory):
    """A library with an npu-sim space (test-only noisy encoder) and the cpu-fp32 space."""
    root = tmp_path_factory.mktemp("corpus")
    for i in range(8):  # paragraphs of short sentences on several topics: a snippet must be chosen
        paragraphs = [" ".join(SHORT_SENTENCES[(i + p + j * 3) % len(SHORT_SENTENCES)] for j in range(4))
                      for p in range(3)]
        (root / f"mixed-{i}.txt").write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    noisy, cpu = noisy_encoder(tiny_bert_bundle), Encoder.open(tiny_bert_bundle, backend="cpu", threads=1)
    lib = Library.open(tmp_path_factory.mktemp("lib") / "library")
    sync(lib, [root], [noisy, cpu])
    yield lib, {"npu-sim": noisy, "cpu-fp32": cpu}
    lib.close()
    noisy.close()
    cpu.close()


def searcher_over(two_spaces, **options) -> Searcher:
    lib, encoders = two_spaces
    return Searcher(lib, encoders=dict(encoders), **options)


def test_a_search_embeds_no_snippet_sentences_and_lists_the_pending_hits(two_spaces):
    lib, encoders = two_spaces
    seen = count_passages(encoders["cpu-fp32"])
    try:
        res = searcher_over(two_spaces).search(SearchRequest(FOREIGN_QUERY, mode="vector", space="cpu-fp32", k=8, all_chunks=True))
    finally:
        del encoders["cpu-fp32"].encode_passages  # back to the class's method
    assert seen == []  # only the query was encoded
    assert res.hits and res.pending_snippets
    for h in res.hits:
        pending = h.chunk_id in res.pending_snippets
        # pending: a long chunk of several sentences sharing no query word, shown by its first sentence
        assert pending == (len(h.text) > TEST_WINDOW), h.text
        core = h.snippet.strip("…")
        assert core and core in h.text
        if pending:
            assert h.text.lstrip().startswith(core[:20])


def test_hits_sharing_a_query_word_are_final_at_once(two_spaces):
    res = searcher_over(two_spaces).search(SearchRequest("invoice", mode="vector", space="cpu-fp32", k=20, all_chunks=True))
    with_word = [h for h in res.hits if "invoice" in h.text.lower()]
    assert with_word
    for h in with_word:
        assert h.chunk_id not in res.pending_snippets and "invoice" in h.snippet.lower()


def test_semantic_snippets_later_are_the_sentence_closest_to_the_query(two_spaces):
    _, encoders = two_spaces
    cpu = encoders["cpu-fp32"]
    s = searcher_over(two_spaces)
    quick = s.search(SearchRequest(FOREIGN_QUERY, mode="vector", space="cpu-fp32", k=8, all_chunks=True))
    res = s.search(SearchRequest(FOREIGN_QUERY, mode="vector", space="cpu-fp32", k=8, all_chunks=True))
    assert [h.chunk_id for h in quick.hits] == [h.chunk_id for h in res.hits]
    res.apply_snippets(s.semantic_snippets(res))
    assert not res.pending_snippets
    # by hand: every sentence of each pending hit embedded, the one nearest the query wins
    q = np.asarray(cpu.encode_queries([FOREIGN_QUERY]), np.float32)[0]
    for before, after in zip(quick.hits, res.hits):
        if before.chunk_id not in quick.pending_snippets:
            assert after.snippet == before.snippet
            continue
        spans = snippets.sentence_spans(after.text)[:snippets.MAX_SENTENCES]
        sims = np.asarray(cpu.encode_passages([after.text[a:b] for a, b in spans]), np.float32) @ q
        assert after.snippet == tidy_snippet(snippets.window(after.text, spans[int(np.argmax(sims))]))
    # the semantic choice differs from the stand-in somewhere (else this test proves nothing)
    assert [h.snippet for h in res.hits] != [h.snippet for h in quick.hits]


def test_semantic_snippets_only_for_the_hits_asked_then_cached(two_spaces):
    lib, encoders = two_spaces
    s = searcher_over(two_spaces)
    res = s.search(SearchRequest(FOREIGN_QUERY, mode="vector", space="cpu-fp32", k=8, all_chunks=True))
    pending = [h for h in res.hits if h.chunk_id in res.pending_snippets]
    assert len(pending) >= 2
    seen = count_passages(encoders["cpu-fp32"])
    try:
        first = s.semantic_snippets(res, pending[:1])
        assert set(first) == {pending[0].chunk_id}
        assert seen and all(sentence in pending[0].text for sentence in seen)
        n = len(seen)
        again = s.semantic_snippets(s.search(SearchRequest(FOREIGN_QUERY + " Frist", mode="vector", space="cpu-fp32", k=8, all_chunks=True)),
                                    pending[:1])
        assert len(seen) == n  # same chunk, other query: its sentence vectors came from the cache
        assert again == {} or set(again) <= {pending[0].chunk_id}
    finally:
        del encoders["cpu-fp32"].encode_passages  # back to the class's method


def test_semantic_snippets_never_embed_with_the_npu_space_encoder(two_spaces):
    lib, encoders = two_spaces
    s = searcher_over(two_spaces)
    res = s.search(SearchRequest(FOREIGN_QUERY, mode="vector", space="npu-sim", k=8, rerank_depth=0, all_chunks=True))
    assert res.space == "npu-sim" and res.pending_snippets
    npu_seen, cpu_seen = count_passages(encoders["npu-sim"]), count_passages(encoders["cpu-fp32"])
    try:
        got = s.semantic_snippets(res)
        assert set(got) == res.pending_snippets
        assert npu_seen == [] and cpu_seen
    finally:
        del encoders["npu-sim"].encode_passages, encoders["cpu-fp32"].encode_passages


def test_query_sql_does_not_grow_with_k_nor_count_members(two_spaces, monkeypatch):
    lib, _ = two_spaces
    s = searcher_over(two_spaces)

    def refuse():
        raise AssertionError("Library.spaces() counts every space's members: not per query")

    statements: list[str] = []
    monkeypatch.setattr(lib, "spaces", refuse)
    lib.db.conn.set_trace_callback(statements.append)
    try:
        per_k = {}
        for k in (1, 10):
            statements.clear()
            res = s.search(SearchRequest(FOREIGN_QUERY, mode="vector", space="npu-sim", k=k))  # re-rank default on
            assert 1 <= len(res.hits) <= k  # one hit per file: these files are copies of each other
            per_k[k] = len(statements)
            fetches = [q for q in statements if "JOIN documents d ON d.id = c.doc_id" in q]
            assert len(fetches) == 1  # every hit's chunk in one query on the primary key
    finally:
        lib.db.conn.set_trace_callback(None)
    assert per_k[1] == per_k[10]


def test_quick_snippets_final_or_pending():
    long_ = "First sentence here. " + "Filler words again and again. " * 10
    got = quick_snippets("again", ["Short text.", long_, "x" * 300])
    assert got[0] == ("Short text.", True)  # shown whole
    assert got[1][1] and "again" in got[1][0]  # a sentence with a query word: final
    assert got[2][1]  # one sentence: nothing to choose
    snippet, final = quick_snippets("zzz", [long_])[0]
    assert not final and snippet.startswith("First sentence here.")  # a stand-in, pending


def test_cli_prints_semantic_snippets_unless_quick_ones_are_asked(two_spaces, tiny_bert_bundle, monkeypatch):
    from click.testing import CliRunner

    from hefsearch.cli.main import main
    from hefsearch.search import snippets as snippets_module

    monkeypatch.setattr(snippets_module, "CLI_BUDGET_MS", 1e9)  # a budget every hit fits (the cap: below)

    lib, _ = two_spaces
    s = searcher_over(two_spaces)
    expected = s.search(SearchRequest(FOREIGN_QUERY, mode="vector", space="cpu-fp32", k=8, all_chunks=True))
    stand_in = [h.snippet for h in expected.hits]
    expected.apply_snippets(s.semantic_snippets(expected))
    args = ["search", FOREIGN_QUERY, "--library", str(lib.path), "--space", "cpu-fp32", "--mode", "vector",
            "--k", "8", "--all-chunks", "--bundle", str(tiny_bert_bundle), "--json"]
    for extra, shown, later in (([], [h.snippet for h in expected.hits], True),
                                (["--quick-snippets"], stand_in, False)):
        res = CliRunner().invoke(main, args + extra)
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        assert [h["snippet"] for h in out["hits"]] == shown
        assert ("semantic_snippets" in out["timings_ms"]) == later


def test_hits_in_view_are_the_rows_on_screen_and_the_highlighted_one():
    pytest.importorskip("textual")
    from hefsearch.tui.widgets.results import hits_in_view

    hits = list(range(30))
    assert hits_in_view(hits, scroll_y=0, height=10, highlighted=0, rows_per_hit=2) == list(range(6))
    assert hits_in_view(hits, scroll_y=20, height=10, highlighted=3, rows_per_hit=2) == [*range(10, 16), 3]
    assert hits_in_view(hits[:3], scroll_y=0, height=40, highlighted=None, rows_per_hit=2) == [0, 1, 2]


def test_cli_caps_semantic_snippets_at_its_budget(two_spaces, tiny_bert_bundle, monkeypatch):
    """With the budget spent, the one-shot command still measures on the first pending hit
    (its snippet is by meaning) and prints every other hit with its stand-in."""
    from click.testing import CliRunner

    from hefsearch.cli.main import main
    from hefsearch.search import snippets as snippets_module

    monkeypatch.setattr(snippets_module, "CLI_BUDGET_MS", 0.0)  # the budget the CLI asks the session for
    lib, _ = two_spaces
    s = searcher_over(two_spaces)
    expected = s.search(SearchRequest(FOREIGN_QUERY, mode="vector", space="cpu-fp32", k=8, all_chunks=True))
    pending = [h for h in expected.hits if h.chunk_id in expected.pending_snippets]
    assert len(pending) >= 2
    meaning = s.semantic_snippets(expected, pending[:1])
    want = [meaning.get(h.chunk_id, h.snippet) for h in expected.hits]
    args = ["search", FOREIGN_QUERY, "--library", str(lib.path), "--space", "cpu-fp32", "--mode", "vector",
            "--k", "8", "--all-chunks", "--bundle", str(tiny_bert_bundle), "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert [h["snippet"] for h in json.loads(res.stdout)["hits"]] == want

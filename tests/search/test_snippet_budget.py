"""Meaning-based snippets never hold up results (issue 22): a search returns before any snippet
sentence is embedded, and an answer that carries meaning-based snippets (the server's) embeds
only what fits its time budget, the rest keeping the stand-in and staying pending. Time is a
fake clock that the slow fake snippet encoder advances: nothing here reads the wall clock."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hefsearch.app.service import LibraryService, Limits
from hefsearch.app.session import LibrarySession
from hefsearch.embed import Encoder
from hefsearch.index.library import Library
from hefsearch.index.sync import sync
from hefsearch.search import Searcher, snippets
from hefsearch.search.request import SearchRequest
from hefsearch.search.snippets import SemanticSnippets, sentences_of

QUERY = "Rechnung Zahlungsfrist Steuerbehoerde"  # shares no word with the corpus
SENTENCES = ["Tax is due.", "The train is late.", "Soup is hot.", "Plants need water.",
             "The router failed.", "Sleep well.", "The choir sang.", "Pay the invoice."]
QUERY_MS, SENTENCE_MS = 2.0, 5.0


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowEncoder:
    """A real encoder whose every call costs fake time: 2 ms a query, 5 ms a sentence."""

    def __init__(self, real, clock: FakeClock):
        self.real, self.clock = real, clock
        self.passages: list[str] = []

    def encode_queries(self, texts):
        self.clock.now += QUERY_MS * len(texts) / 1000
        return self.real.encode_queries(texts)

    def encode_passages(self, texts):
        self.passages += list(texts)
        self.clock.now += SENTENCE_MS * len(texts) / 1000
        return self.real.encode_passages(texts)


@pytest.fixture(autouse=True)
def narrow_window(monkeypatch):
    monkeypatch.setattr(snippets, "WINDOW_CHARS", 60)  # the tiny model's chunks are short


@pytest.fixture(scope="module")
def library(tiny_bert_bundle, tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    for i in range(6):
        text = " ".join(SENTENCES[(i + j) % len(SENTENCES)] for j in range(4))
        (root / f"note-{i}.txt").write_text(text + "\n", encoding="utf-8")
    cpu = Encoder.open(tiny_bert_bundle, backend="cpu", threads=1)
    lib = Library.open(tmp_path_factory.mktemp("lib") / "library")
    sync(lib, [root], [cpu])
    yield lib, cpu
    lib.close()
    cpu.close()


def slow_session(library):
    lib, cpu = library
    clock = FakeClock()
    slow = SlowEncoder(cpu, clock)
    searcher = Searcher(lib, encoders={"cpu-fp32": cpu})
    searcher._semantic = SemanticSnippets(slow, clock=clock)  # the snippet encoder is the slow one
    return LibrarySession(lib, searcher), slow


def test_the_budget_takes_hits_in_rank_order_while_their_predicted_cost_fits(library):
    _lib, cpu = library
    clock = FakeClock()
    slow = SlowEncoder(cpu, clock)
    engine = SemanticSnippets(slow, clock=clock)
    chunks = [(i, " ".join(SENTENCES[i : i + 3])) for i in range(5)]  # 3 sentences each
    # the query (2 ms) is the first measure: 2 ms a sentence predicted, 6 ms a chunk;
    # 20 ms - 2 ms leaves room for three chunks
    got = engine.snippets(QUERY, chunks, budget_ms=20)
    assert sorted(got) == [0, 1, 2]
    assert slow.passages == [s for _, t in chunks[:3] for s in sentences_of(t)]
    assert engine.ms_per_sentence == pytest.approx((2.0 + 5.0) / 2)  # the measured 5 ms weighed in
    # cached chunks cost nothing; the first uncached one (3 x 3.5 ms) does not fit 5 ms
    slow.passages.clear()
    assert sorted(engine.snippets(QUERY, chunks, budget_ms=5)) == [0, 1, 2] and slow.passages == []
    # without a budget every chunk is done, as before
    assert sorted(engine.snippets(QUERY, chunks)) == [0, 1, 2, 3, 4]


def test_results_come_before_any_snippet_sentence_and_the_rest_stays_pending(library):
    session, slow = slow_session(library)
    request = SearchRequest(query=QUERY, mode="vector", k=6, space="cpu-fp32", all_chunks=True)
    plain = session.search(replace(request, snippets="quick"))
    assert plain.pending_snippets and slow.passages == []  # results without any snippet sentence
    pending = [h for h in plain.hits if h.chunk_id in plain.pending_snippets]
    assert len(pending) >= 3
    # budget for the query and the first pending hit's sentences only
    first = len(sentences_of(pending[0].text))
    budget = QUERY_MS + first * QUERY_MS + 0.5  # predicted at the query's 2 ms a sentence
    res = session.search(replace(request, snippets="meaning", snippet_budget_ms=budget))
    assert [h.chunk_id for h in res.hits] == [h.chunk_id for h in plain.hits]  # the same results
    assert slow.passages == sentences_of(pending[0].text)
    assert res.pending_snippets == plain.pending_snippets - {pending[0].chunk_id}
    stand_ins = {h.chunk_id: h.snippet for h in plain.hits}
    assert all(h.snippet == stand_ins[h.chunk_id] for h in res.hits if h.chunk_id in res.pending_snippets)


def test_the_server_answers_with_quick_snippets_when_its_budget_is_spent(library):
    session, slow = slow_session(library)
    service = LibraryService(session, Limits(snippet_budget_ms=0))
    quick = session.search(SearchRequest(query=QUERY, mode="vector", k=6, space="cpu-fp32", snippets="quick"))
    answer = service.search(SearchRequest(QUERY, mode="vector", k=6, space="cpu-fp32", snippets="meaning"))
    assert slow.passages == []  # no sentence embedded on the way to the answer
    assert [h["snippet"] for h in answer["hits"]] == [h.snippet for h in quick.hits]
    assert np.isfinite(answer["timings_ms"]["semantic_snippets"])


def test_a_primed_engine_measures_on_its_first_chunk(library):
    """A query vector primed from the search (the FP32 space searched) measures no time: the
    engine then embeds its first uncached chunk to measure the rate (5 ms a sentence here) and
    the rest follow while they fit. Without that, a server on the FP32 space never had a rate
    and never gave a meaning-based snippet."""
    _lib, cpu = library
    clock = FakeClock()
    slow = SlowEncoder(cpu, clock)
    chunks = [(i, " ".join(SENTENCES[i : i + 2])) for i in range(5)]  # 2 sentences, 10 ms each
    engine = SemanticSnippets(slow, clock=clock)
    engine.prime(QUERY, cpu.encode_queries([QUERY])[0])
    got = engine.snippets(QUERY, chunks, budget_ms=25)
    # the first chunk spends 10 ms, which leaves 15 ms: one more chunk (10 ms), not two
    assert sorted(got) == [0, 1] and engine.ms_per_sentence == pytest.approx(SENTENCE_MS)
    # measured now: the next call probes nothing, its first uncached chunk must fit
    slow.passages.clear()
    assert sorted(engine.snippets(QUERY, chunks, budget_ms=5)) == [0, 1] and slow.passages == []


def test_a_server_on_the_fp32_space_gives_meaning_snippets_within_its_budget(library):
    lib, cpu = library
    session = LibrarySession(lib, Searcher(lib, encoders={"cpu-fp32": cpu}))
    request = SearchRequest(query=QUERY, mode="vector", k=6, space="cpu-fp32")
    plain = session.search(replace(request, snippets="quick"))
    res = session.search(replace(request, snippets="meaning", snippet_budget_ms=1e6))
    assert plain.pending_snippets and not res.pending_snippets


def test_a_slow_query_encoding_predicts_that_no_chunk_fits(library):
    """A one-shot CLI search with a 12-layer model on a loaded machine: the query took 60 ms to
    encode, so a chunk of two sentences is predicted at ~66 ms and the 25 ms budget embeds
    nothing (it used to embed the first chunk whatever it cost, 1.5 s against 100 ms); a fast
    encoder still measures on its first chunk."""
    _lib, cpu = library
    chunks = [(i, " ".join(SENTENCES[i : i + 2])) for i in range(5)]
    for query_ms, expected in ((60.0, []), (2.0, [0, 1])):
        clock = FakeClock()
        slow = SlowEncoder(cpu, clock)
        engine = SemanticSnippets(slow, clock=clock)
        engine.prime(QUERY, cpu.encode_queries([QUERY])[0], encode_ms=query_ms)
        assert sorted(engine.snippets(QUERY, chunks, budget_ms=25)) == expected
        assert (slow.passages == []) == (expected == [])

"""The search API on a small library built with the tiny encoder: modes, the safe keyword
parser, filters, snippets, fusion (hand-checked), compare, the fingerprint guard and the
device fallback (with a test-only backend registered in the backend REGISTRY)."""

from __future__ import annotations

import json
import sys
import types

import pytest

from hefsearch.embed import Encoder
from hefsearch.embed.backends import REGISTRY
from hefsearch.embed.backends.base import Backend
from hefsearch.base.errors import BackendUnavailable, DeviceError
from hefsearch.index.errors import FingerprintMismatch
from hefsearch.index.library import Library
from hefsearch.index.sync import sync
from hefsearch.search import Searcher, compare
from hefsearch.search.comparison import ranking_agreement
from hefsearch.search.filters import Filters
from hefsearch.search.request import SearchRequest
from hefsearch.search.fusion import rrf
from hefsearch.search.keyword import keyword_search, parse_query
from tests.support.library_helpers import write_corpus

HOSTILE_QUERIES = ['"', "AND", "NEAR(", "a OR", "*", "-foo", "col:val", "^x", "C++", "it's", "((", '"open',
                   "x*", "🙂", "", "   ", "NOT NOT", '"" ""', 'a"b', "chunks_fts", "'; DROP TABLE chunks; --",
                   "rank:1", "{a b}", "a + b", "\\", "%_%"]


@pytest.fixture
def library(tmp_path, tiny_bert_bundle):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=8)
    (docs / "specs.md").write_text("# Router\n\nThe model XR-2000 supports firmware 4.2.\n\nOther line.\n")
    (docs / "zh.txt").write_text("这是一张发票，金额为一百元。\n\n请在月底之前付款。\n")
    (docs / "page.html").write_text("<html><body><p>Invoices and receipts for the garden shop.</p></body></html>")
    lib = Library.open(tmp_path / "lib")
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        sync(lib, [docs], [enc])
    yield lib
    lib.close()


@pytest.fixture
def searcher(library):
    s = Searcher(library)
    yield s
    s.close()


def test_hostile_queries_never_raise(library, searcher):
    for q in HOSTILE_QUERIES:
        for strength in ("all", "any"):
            keyword_search(library.db, q, 10, strength=strength)
        for mode in ("keyword", "hybrid", "vector"):
            searcher.search(SearchRequest(q, k=3, mode=mode))
    assert library.status().chunks > 0  # and nothing was dropped


def test_parse_query():
    assert [t.fts() for t in parse_query('XR-2000 "olive oil" tax* tax* C++')] == [
        '"xr 2000"', '"olive oil"', '"tax"*', '"c"']
    # a code of several parts is one phrase, also beside a quoted one; a word with a hyphen is not a code
    assert [t.fts() for t in parse_query('"HZ-2026-118 paid" 4.2.1 e-mail')] == [
        '"hz 2026 118 paid"', '"4 2 1"', '"e"', '"mail"']
    assert parse_query('" ""') == []


def test_keyword_exact_rare_term_and_all_before_any(searcher):
    res = searcher.search(SearchRequest("XR-2000", mode="keyword", k=3))
    assert res.hits[0].path.endswith("specs.md") and "XR-2000" in res.hits[0].snippet
    res = searcher.search(SearchRequest("invoice penalty", mode="keyword", k=10))
    # no chunk has both words: the chunks with either come (any), invoices first by BM25
    assert res.hits and all(("invoice" in h.text.lower()) or ("penalty" in h.text.lower()) for h in res.hits)
    res = searcher.search(SearchRequest("tax deadline", mode="keyword", k=10))
    first = res.hits[0].text.lower()
    assert "tax" in first and "deadline" in first


def test_a_code_query_is_not_flooded_by_chunks_that_share_its_digits(tmp_path, tiny_bert_bundle):
    """Keyword mode tops up with chunks holding some of the words; a code's parts are not such
    words: messages that share only the year of "HZ-2026-118" are no answer to it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "invoice.txt").write_text("Invoice HZ-2026-118 for the heating repair, due in March.\n")
    for n in range(4):
        (docs / f"message{n}.txt").write_text(f"Meeting notes from 2026, item {n}: the garden plan.\n")
    with Library.open(tmp_path / "lib") as lib:
        with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
            sync(lib, [docs], [enc])
        with Searcher(lib) as searcher:
            res = searcher.search(SearchRequest("HZ-2026-118", mode="keyword", k=10))
            assert [h.path.rsplit("/", 1)[1] for h in res.hits] == ["invoice.txt"]
            spaced = searcher.search(SearchRequest("invoice HZ 2026 118", mode="keyword", k=10))
            assert spaced.hits[0].path.endswith("invoice.txt")


def test_cjk_keyword_search(searcher):
    for q in ("发票", "一张发票", "付款"):
        res = searcher.search(SearchRequest(q, mode="keyword", k=3))
        assert res.hits and res.hits[0].path.endswith("zh.txt"), q
        assert q in res.hits[0].snippet


def test_hits_map_back_to_source(searcher, library):
    res = searcher.search(SearchRequest("XR-2000 firmware", mode="keyword", k=1))
    h = res.hits[0]
    source = open(h.path, encoding="utf-8").read()
    assert source[h.start:h.end] == h.text
    assert h.line == source.count("\n", 0, h.start) + 1
    assert h.text.splitlines()[0] in source.splitlines()[h.line - 1]
    assert h.page is None and h.doc_kind == "markdown" and h.sources == {"keyword": 1}
    json.dumps(res.to_dict())


def test_filters_in_every_mode(searcher):
    for mode in ("vector", "keyword", "hybrid"):
        res = searcher.search(SearchRequest("receipts", mode=mode, k=20, filters=Filters(path_glob="*.html")))
        assert res.hits and all(h.path.endswith(".html") for h in res.hits), mode
        res = searcher.search(SearchRequest("invoice", mode=mode, k=20, filters=Filters(kinds=tuple(["markdown"]))))
        assert all(h.doc_kind == "markdown" for h in res.hits), mode
        res = searcher.search(SearchRequest("invoice", mode=mode, k=20, filters=Filters(path_glob="*/docs/000-*")))
        assert res.hits and all("/000-" in h.path for h in res.hits), mode
        assert searcher.search(SearchRequest("invoice", mode=mode, filters=Filters(path_glob="*.pdf"))).hits == []


def test_vector_snippets_are_windows_of_the_chunk(searcher):
    res = searcher.search(SearchRequest("platform four", mode="vector", k=10))
    assert res.space == "cpu-fp32" and res.backend_label == "CPU FP32"
    for h in res.hits:
        core = h.snippet.strip("…")
        assert core and core in h.text and len(h.snippet) <= 230
    assert {"encode", "search", "fetch", "total"} <= set(res.timings)


def test_rrf_by_hand():
    fused = rrf({"vector": [1, 2, 3], "keyword": [3, 4]})
    assert [i for i, _, _ in fused] == [3, 1, 2, 4]  # 2 and 4 tie at 1/62: first seen first
    assert fused[0][1] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[0][2] == {"vector": 3, "keyword": 1}
    weighted = rrf({"vector": [1, 2], "keyword": [2]}, {"keyword": 0.5})
    assert weighted[0][0] == 2 and weighted[0][1] == pytest.approx(1 / 62 + 0.5 / 61)


def test_hybrid_keeps_the_vector_ranking_without_strong_keyword_evidence(searcher):
    """A query no chunk contains whole (as with a query in another language) must not be
    reordered by partial keyword matches."""
    q = "invoice sailing"  # "invoice" occurs, "sailing" nowhere: no chunk has every word
    vec = [h.chunk_id for h in searcher.search(SearchRequest(q, mode="vector", k=10)).hits]
    hyb = [h.chunk_id for h in searcher.search(SearchRequest(q, mode="hybrid", k=10)).hits]
    assert hyb == vec
    # with every word present, the keyword evidence counts
    res = searcher.search(SearchRequest("firmware XR-2000", mode="hybrid", k=5))
    assert res.hits[0].path.endswith("specs.md") and "keyword" in res.hits[0].sources


def test_ranking_agreement_by_hand():
    assert ranking_agreement([1, 2, 3, 4], [1, 2, 3, 4], 4) == (1.0, pytest.approx(1.0))
    assert ranking_agreement([1, 2, 3, 4], [5, 6, 7, 8], 4) == (0.0, 0.0)
    ov, _ = ranking_agreement([1, 2, 3, 4], [2, 1, 3, 9], 4)
    assert ov == 0.75
    # RBO(p=0.9) of [1,2] vs [2,1]: A1 = 0, A2 = 1 -> 1*0.81 + (0.1/0.9)*(0.81) = 0.9
    assert ranking_agreement([1, 2], [2, 1], 2)[1] == pytest.approx(0.9)
    assert ranking_agreement([], [], 5) == (1.0, 1.0)
    assert ranking_agreement([1], [], 5) == (0.0, 0.0)


def test_fingerprint_guard_refuses_queries_of_another_bundle(library, tiny_xlmr_bundle):
    with Encoder.open(tiny_xlmr_bundle, backend="cpu", threads=1) as other:
        s = Searcher(library, encoders={"cpu-fp32": other})
        with pytest.raises(FingerprintMismatch) as e:
            s.search(SearchRequest("invoice", mode="vector"))
        assert "model_hash" in e.value.message
        assert s.search(SearchRequest("invoice", mode="keyword")).hits  # keyword search needs no encoder


# -- device fallback ----------------------------------------------------------------------
class FlakyBackend(Backend):
    """A test-only accelerator backend: the CPU body, failing on demand."""

    name = "flaky"
    label = "Flaky NPU"
    space_kind = "hef"
    seq_lens = None
    batch_size = 8
    fail = False
    unavailable = False

    def __init__(self, bundle, **opts):
        from hefsearch.embed.backends.cpu import CpuBackend

        if FlakyBackend.unavailable:
            raise BackendUnavailable("the flaky device is gone", "plug it in")
        self.inner = CpuBackend(bundle, threads=1)

    @classmethod
    def available(cls, bundle):
        return (not cls.unavailable, "test backend")

    def fingerprint_parts(self):
        return {"encoder": "flaky-int8", "file_sha256": self.inner.file_sha256}

    def run(self, embeddings, mask):
        if FlakyBackend.fail:
            raise DeviceError("device timed out after 5000 ms", "reset the device")
        return self.inner.run(embeddings, mask)

    def close(self):
        self.inner.close()


@pytest.fixture
def flaky(monkeypatch):
    module = types.ModuleType("hefsearch.embed.backends.flakytest")
    module.FlakyBackend = FlakyBackend
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(REGISTRY, "flaky", "flakytest:FlakyBackend")
    monkeypatch.setattr(FlakyBackend, "fail", False)
    monkeypatch.setattr(FlakyBackend, "unavailable", False)
    return FlakyBackend


def _two_space_library(tmp_path, bundle, with_fp32=True):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=6)
    lib = Library.open(tmp_path / "lib2")
    encs = [Encoder.open(bundle, backend="flaky")]
    if with_fp32:
        encs.append(Encoder.open(bundle, backend="cpu", threads=1))
    sync(lib, [docs], encs)
    for e in encs:
        e.close()
    return lib


def test_device_error_falls_back_to_the_fp32_space(tmp_path, tiny_bert_bundle, flaky):
    lib = _two_space_library(tmp_path, tiny_bert_bundle)
    s = Searcher(lib)
    assert s.default_space() == "hef"
    ok = s.search(SearchRequest("train station", mode="vector", k=5))
    assert ok.space == "hef" and ok.notice is None and ok.backend_label == "Flaky NPU"
    flaky.fail = True
    res = s.search(SearchRequest("train station", mode="vector", k=5))
    assert res.space == "cpu-fp32" and res.backend_label == "CPU FP32"
    assert res.notice == ("Flaky NPU failed: device timed out after 5000 ms; answered from the FP32 space")
    direct = s.search(SearchRequest("train station", mode="vector", k=5, space="cpu-fp32"))
    assert [h.chunk_id for h in res.hits] == [h.chunk_id for h in direct.hits]
    assert [h.score for h in res.hits] == pytest.approx([h.score for h in direct.hits])
    with pytest.raises(DeviceError):  # compare never substitutes FP32 for the NPU
        compare(s, SearchRequest("train station", k=5), ("hef", "cpu-fp32"))
    with pytest.raises(DeviceError):
        s.search(SearchRequest("train station", fallback=False))
    s.close()
    # unavailable at open: same rule
    flaky.fail, flaky.unavailable = False, True
    s = Searcher(lib)
    res = s.search(SearchRequest("train station", mode="hybrid", k=5))
    assert res.space == "cpu-fp32" and "the flaky device is gone" in res.notice
    s.close()
    lib.close()


def test_device_error_without_fp32_space_raises_with_a_hint(tmp_path, tiny_bert_bundle, flaky):
    lib = _two_space_library(tmp_path, tiny_bert_bundle, with_fp32=False)
    s = Searcher(lib)
    flaky.fail = True
    with pytest.raises(DeviceError) as e:
        s.search(SearchRequest("train station", mode="vector"))
    assert "--also-fp32" in e.value.hint and "reset the device" in e.value.hint
    s.close()
    lib.close()


def test_compare_two_spaces(tmp_path, tiny_bert_bundle, flaky):
    lib = _two_space_library(tmp_path, tiny_bert_bundle)
    s = Searcher(lib)
    c = compare(s, SearchRequest("olive oil sauce", k=5), ("hef", "cpu-fp32"))
    # the flaky backend is the CPU body: both spaces rank alike
    assert c.overlap_at_k == 1.0 and c.rbo == pytest.approx(1.0)
    assert c.only_left == set() == c.only_right
    assert c.left.space == "hef" and c.right.space == "cpu-fp32"
    json.dumps(c.to_dict())
    s.close()
    lib.close()


def test_quantities_are_not_codes_but_long_numbers_versions_and_hex_codes_are():
    from hefsearch.search.keyword import code_terms

    found = [" ".join(t.words) for t in code_terms("expire after 90 days in 2024, order 48213, v4.2.1, 0x80070005 E-52")]
    assert found == ["48213", "v4 2 1", "0x80070005", "e 52"]


def test_a_code_most_chunks_hold_is_no_evidence(tmp_path):
    """"IT" is matched by FTS5 as "it": in most chunks, so it must not act as an exact code."""
    import sqlite3

    from hefsearch.search.keyword import Term, rare_terms

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE chunks (id INTEGER PRIMARY KEY)")
    db.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(text)")
    texts = [f"it was day {i}" for i in range(40)] + ["error E-52 in the printer", "the XR-2000 manual"]
    for i, t in enumerate(texts, 1):
        db.execute("INSERT INTO chunks (id) VALUES (?)", [i])
        db.execute("INSERT INTO chunks_fts (rowid, text) VALUES (?, ?)", [i, t])
    kept = rare_terms(db, [Term(("it",)), Term(("e", "52")), Term(("xr", "2000"))])
    assert kept == [Term(("e", "52")), Term(("xr", "2000"))]


def test_a_space_opened_encoder_says_the_space_chose_its_backend(searcher):
    """The server's start line reads this: a backend taken from the library's space is not
    'chosen by --backend' (no flag was given)."""
    enc = searcher.encoder_for("cpu-fp32")
    assert "--backend" not in enc.backend_reason
    assert enc.backend_reason == "cpu (the backend of the space 'cpu-fp32')"

"""bench/index.py: its synthetic library is built and searched through the current encoder
interface (the latency part crashed when its stub lacked what ensure_space reads)."""

from __future__ import annotations

from hefsearch.bench.index import StubEncoder, build_synthetic, vocabulary
from hefsearch.index.library import Library
from hefsearch.search import Searcher
from hefsearch.search.request import SearchRequest


def test_latency_library_builds_and_answers_every_mode(tmp_path):
    build_synthetic(tmp_path / "lib", 120, vocabulary(300))
    lib = Library.open(tmp_path / "lib")
    try:
        assert lib.space_names() == ["cpu-fp32"] and len(lib.chunk_ids()) == 120
        s = Searcher(lib, encoders={"cpu-fp32": StubEncoder()})
        for mode in ("vector", "keyword", "hybrid"):
            word = lib.chunks([lib.chunk_ids()[0]])[0].text.split()[0]
            assert s.search(SearchRequest(word, mode=mode, k=5)).hits, mode
    finally:
        lib.close()

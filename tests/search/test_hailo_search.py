"""Query-time fallback with the real hailo backend on the fake device failing mid-search.

Verified against the contract fake of hailo_platform (tests/fakes) only.
"""

from __future__ import annotations

import pytest

from hefsearch.embed.encoder import Encoder
from hefsearch.base.errors import DeviceError
from hefsearch.index.library import Library
from hefsearch.index.sync import sync
from hefsearch.search.searcher import Searcher
from hefsearch.search.request import SearchRequest
from tests.support.library_helpers import write_corpus


@pytest.fixture
def indexed(fake_hailo, hef_bundle, tmp_path):
    """A library indexed on the (fake) NPU into "hef" and on the CPU into "cpu-fp32"."""
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=6)
    lib = Library.open(tmp_path / "lib")
    lib.set_settings(bundle=str(hef_bundle))
    npu = Encoder.open(hef_bundle, backend="hailo")
    cpu = Encoder.open(hef_bundle, backend="cpu")
    sync(lib, [docs], [npu, cpu])
    yield lib, npu, cpu
    npu.close()
    cpu.close()
    lib.close()


def test_device_failure_mid_search_answers_from_fp32_with_a_notice(fake_hailo, indexed):
    lib, npu, cpu = indexed
    searcher = Searcher(lib, encoders={"hef": npu, "cpu-fp32": cpu})
    ok = searcher.search(SearchRequest("train to the central station", space="hef", mode="vector", k=3))
    assert ok.space == "hef" and ok.notice is None and ok.backend_label == "Hailo-10H"
    assert ok.hits

    fake_hailo.fail_after_frames = fake_hailo.stats.frames  # the next frame fails on the device
    failed = searcher.search(SearchRequest("train to the central station", space="hef", mode="vector", k=3))
    assert failed.space == "cpu-fp32"  # never an FP32 query against the NPU vectors
    assert failed.backend_label == "CPU FP32"
    assert failed.notice and "failed" in failed.notice and "answered from the FP32 space" in failed.notice
    assert "The Hailo device failed" in failed.notice
    direct = searcher.search(SearchRequest("train to the central station", space="cpu-fp32", mode="vector", k=3))
    assert failed.hits and [h.chunk_id for h in failed.hits] == [h.chunk_id for h in direct.hits]

    fake_hailo.fail_after_frames = None  # the device is back: the backend reopens it
    again = searcher.search(SearchRequest("train to the central station", space="hef", mode="vector", k=3))
    assert again.space == "hef" and again.notice is None
    assert [h.chunk_id for h in again.hits] == [h.chunk_id for h in ok.hits]


def test_a_timeout_also_falls_back(fake_hailo, indexed, hef_bundle):
    lib, _npu, cpu = indexed
    slow = Encoder.open(hef_bundle, backend="hailo", timeout_ms=200)
    try:
        searcher = Searcher(lib, encoders={"hef": slow, "cpu-fp32": cpu})
        fake_hailo.hang_after_frames = fake_hailo.stats.frames
        res = searcher.search(SearchRequest("tax return deadline", space="hef", mode="vector", k=3))
        assert res.space == "cpu-fp32" and "timeout of 0.2 s per wait (up to 0.4 s" in res.notice
    finally:
        slow.close()


def test_without_an_fp32_space_the_error_says_how_to_get_one(fake_hailo, hef_bundle, tmp_path):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=3)
    with Library.open(tmp_path / "lib") as lib, Encoder.open(hef_bundle, backend="hailo") as npu:
        sync(lib, [docs], [npu])
        searcher = Searcher(lib, encoders={"hef": npu})
        fake_hailo.fail_after_frames = fake_hailo.stats.frames
        with pytest.raises(DeviceError) as err:
            searcher.search(SearchRequest("invoice", space="hef", mode="vector"))
        assert "The Hailo device failed" in err.value.message
        assert "FP32 space" in err.value.hint

"""Space kinds and names in one place (embed/space_names.py), the backend base class that
carries them, and the int8 CPU space taking part wherever an NPU space does: its own space,
FP32 re-ranking by default, the compare view, ``bench quality``, ``doctor --verify``, and
the fingerprint guard in both directions. The int8 encoder is built in the test from the tiny
model (needs the onnx package)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from hefsearch.app.spaces import pick_compare_spaces
from hefsearch.embed import space_names as S
from hefsearch.embed.backends import load_backend_class, resolve_backend_name
from hefsearch.embed.backends.base import Backend
from hefsearch.embed.bundle import Bundle
from hefsearch.embed.encoder import Encoder
from hefsearch.index.errors import FingerprintMismatch
from hefsearch.index.encoders import open_sync_encoders
from hefsearch.index.library import Library
from hefsearch.index.sync import sync
from hefsearch.search import Searcher
from hefsearch.search.request import SearchRequest
from hefsearch.search.rerank import default_depth
from tests.support.library_helpers import write_corpus


# -- naming, without any model -------------------------------------------------------------
def test_names_and_kinds():
    assert S.FP32_SPACE == "cpu-fp32"
    assert S.space_name("npu-sim", "a8") == "npu-sim-a8" and S.space_name("hef") == "hef"
    assert S.kind_of("npu-sim-a8") == "npu-sim" and S.kind_of("anything", "cpu-int8") == "cpu-int8"
    assert [k for k in ("cpu-fp32", "cpu-int8", "npu-sim-a8", "hef") if S.is_quantised(k)] == [
        "cpu-int8", "npu-sim-a8", "hef"]
    assert [k for k in ("cpu-fp32", "cpu-int8", "npu-sim", "hef") if S.is_npu(k)] == ["npu-sim", "hef"]
    assert sorted(["cpu-int8", "npu-sim", "hef"], key=S.compare_order) == ["hef", "npu-sim", "cpu-int8"]


def test_every_registered_backend_declares_a_known_kind():
    kinds = {name: load_backend_class(name).space_kind for name in ("cpu", "cpu-int8", "npu-sim", "hailo")}
    assert kinds == {"cpu": "cpu-fp32", "cpu-int8": "cpu-int8", "npu-sim": "npu-sim", "hailo": "hef"}
    assert all(issubclass(load_backend_class(n), Backend) for n in kinds)


def test_the_base_supplies_the_defaults():
    class Minimal(Backend):
        name, label, space_kind = "minimal", "Minimal", "cpu-int8"

        def fingerprint_parts(self):
            return {"encoder": "minimal"}

        def run(self, embeddings, mask):
            return embeddings

        def close(self):
            pass

    with pytest.raises(TypeError):
        Backend()  # abstract
    b = Minimal()
    assert (b.space_name, b.space_opts, b.is_quantised, b.is_npu) == ("cpu-int8", {}, True, False)
    assert b.encoder_entries() == [] and b.describe() == {"label": "Minimal"}
    assert Minimal.available(None)[0] is False  # only accelerators are picked by "auto"
    b.space_name = "alt"  # a second space of the same backend
    assert b.space_name == "alt"


# -- the int8 CPU space end to end -----------------------------------------------------------
@pytest.fixture(scope="module")
def int8_bundle(tiny_bert_bundle, tmp_path_factory):
    pytest.importorskip("onnx")
    from hefsearch.compile.cpu_int8 import build_cpu_int8

    out = tmp_path_factory.mktemp("int8") / "bundle"
    shutil.copytree(tiny_bert_bundle, out)
    build_cpu_int8(out)
    return out


@pytest.fixture(scope="module")
def int8_library(int8_bundle, tmp_path_factory):
    """Indexed with the cpu-int8 backend first (the default space), then --also-fp32."""
    root = tmp_path_factory.mktemp("int8lib")
    write_corpus(root / "docs", n_files=6, paragraphs=3)
    lib = Library.open(root / "lib")
    choice = open_sync_encoders(lib, bundle=int8_bundle, backend="cpu-int8", also_fp32=True, threads=1)
    try:
        sync(lib, [root / "docs"], choice.encoders)
    finally:
        choice.close()
    yield lib
    lib.close()


def test_int8_backend_is_a_quantised_cpu_space(int8_bundle, monkeypatch):
    with Encoder.open(int8_bundle, backend="cpu-int8", threads=1) as enc:
        assert (enc.space_kind, enc.space_name, enc.space_opts) == ("cpu-int8", "cpu-int8", {})
        assert enc.is_quantised and not enc.backend.is_npu
        assert enc.label == "CPU int8"
        assert enc.backend.describe()["file"] == "encoder.cpu-int8.onnx"
        assert [e.file for e in enc.backend.encoder_entries()] == ["encoder.cpu-int8.onnx"]
    monkeypatch.delenv("HEFSEARCH_BACKEND", raising=False)
    assert resolve_backend_name("auto", Bundle.open(int8_bundle))[0] in ("cpu", "hailo")  # never cpu-int8


def test_indexing_with_int8_fills_its_own_space_and_reranks_with_fp32(int8_library):
    spaces = {s.name: s for s in int8_library.spaces()}
    assert set(spaces) == {"cpu-int8", "cpu-fp32"}
    assert spaces["cpu-int8"].kind == "cpu-int8" and spaces["cpu-int8"].label == "CPU int8"
    assert spaces["cpu-int8"].count == spaces["cpu-fp32"].count > 0
    assert int8_library.settings()["default_space"] == "cpu-int8"
    assert default_depth(int8_library, "cpu-int8") > 0 and default_depth(int8_library, "cpu-fp32") == 0
    s = Searcher(int8_library)
    try:
        res = s.search(SearchRequest("trains and stations", mode="vector", k=3))
    finally:
        s.close()
    assert res.space == "cpu-int8" and res.backend_label == "CPU int8" and "rerank" in res.timings
    assert pick_compare_spaces(int8_library.spaces()) == ("cpu-int8", "cpu-fp32")


def test_the_space_guard_keeps_int8_and_fp32_vectors_apart(int8_library, int8_bundle):
    with Encoder.open(int8_bundle, backend="cpu", threads=1) as fp32, \
            Encoder.open(int8_bundle, backend="cpu-int8", threads=1) as int8:
        assert fp32.fingerprint != int8.fingerprint
        with pytest.raises(FingerprintMismatch):
            int8_library.ensure_space(fp32, "cpu-int8")
        with pytest.raises(FingerprintMismatch):
            int8_library.ensure_space(int8, "cpu-fp32")
        with pytest.raises(FingerprintMismatch):
            int8_library.space("cpu-int8").check_encoder(fp32)


def test_bench_quality_measures_int8_against_fp32(int8_library, int8_bundle):
    from hefsearch.evaluate.quality import QualityOptions, bundle_spaces, config_line, run_quality

    assert [s.name for s in bundle_spaces(Bundle.open(int8_bundle))] == ["cpu-fp32", "cpu-int8"]
    rep = run_quality(library=int8_library, options=QualityOptions(n_queries=10, rerank=5, parallel=False))
    assert [s.name for s in rep.spaces] == ["cpu-fp32", "cpu-int8"]
    int8 = rep.space("cpu-int8")
    assert int8.error is None and int8.label == "CPU int8" and int8.library is not None
    assert int8.config["space_kind"] == "cpu-int8" and int8.config["file"] == "encoder.cpu-int8.onnx"
    assert config_line(int8.config).startswith("int8 weights") and config_line(rep.space("cpu-fp32").config).startswith("FP32")


def test_doctor_verify_runs_on_int8_and_never_calls_it_an_npu(int8_bundle):
    from hefsearch.evaluate.npu_verify import verify_npu

    r = verify_npu(int8_bundle, backend="cpu-int8", threads=1)
    assert r.backend == "CPU int8" and r.reference == "CPU FP32"
    assert np.isfinite(r.median_cosine) and r.cause
    assert "NPU" not in r.verdict and "CPU int8" in r.verdict

"""The CPU backends' ONNX Runtime sessions (embed/ort_session.py): the optimised-model cache
(hit, miss, damaged file), the fused-attention copy (same vectors as the body, the body file
untouched), execution providers passed through, the one reference encoder, and a keyword-only
search that never opens an encoder."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from hefsearch.embed import ort_session
from hefsearch.embed.encoder import Encoder
from hefsearch.embed.reference import REFERENCE_BACKEND, open_reference_encoder
from hefsearch.embed.samples import VERIFY_TEXTS
from hefsearch.search.request import SearchRequest

TEXTS = list(VERIFY_TEXTS) + ["short", "a somewhat longer text " * 20]


@pytest.fixture(autouse=True)
def _fusion_on(monkeypatch):
    monkeypatch.delenv(ort_session.ENV_FUSE, raising=False)  # conftest turns it off elsewhere


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cached(kind: str) -> list[Path]:
    """The cache entries (folders) of ``kind``."""
    folder = ort_session.ort_cache_dir()
    return sorted(p for p in folder.glob(f"*.{kind}") if p.is_dir()) if folder.exists() else []


def _uncached_vectors(bundle, monkeypatch) -> np.ndarray:
    monkeypatch.setenv(ort_session.ENV_CACHE, "0")
    with Encoder.open(bundle, threads=1) as enc:
        assert enc.backend.session_kind == "uncached"
        vecs = enc.encode_passages(TEXTS)
    monkeypatch.delenv(ort_session.ENV_CACHE)
    return vecs


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))).min())


@pytest.mark.parametrize("which", ["tiny_bert_bundle", "minilm_bundle"])
def test_fused_copy_gives_the_bodys_vectors_and_leaves_the_body_untouched(which, request, monkeypatch):
    bundle = request.getfixturevalue(which)
    body = Path(bundle) / "encoder.onnx"
    before = _sha(body)
    ref = _uncached_vectors(bundle, monkeypatch)
    with Encoder.open(bundle, threads=1, bulk=True) as enc:  # a miss: the fusion child runs
        assert enc.backend.session_kind == "fused"
        fused = enc.encode_passages(TEXTS)
    assert len(_cached("fused")) == 1
    with Encoder.open(bundle, threads=1) as enc:  # a query's open finds the fused copy
        assert enc.backend.session_kind == "fused"
        again = enc.encode_passages(TEXTS)
    assert _min_cosine(fused, ref) >= 0.99999
    assert _min_cosine(again, ref) >= 0.99999
    assert _sha(body) == before


def test_cache_miss_then_hit_then_damaged_file_rebuilt(tiny_bert_bundle, monkeypatch):
    ref = _uncached_vectors(tiny_bert_bundle, monkeypatch)
    assert not _cached("plain")
    with Encoder.open(tiny_bert_bundle, threads=1) as enc:  # miss: optimise, keep it
        assert enc.backend.session_kind == "optimised"
    (entry,) = _cached("plain")
    cached, weights = entry / ort_session.ENTRY_MODEL, entry / ort_session.ENTRY_WEIGHTS
    # the initializers sit beside the graph as external data (memory-mapped when loaded)
    onnx = pytest.importorskip("onnx")
    graph = onnx.load(str(cached), load_external_data=False).graph
    external = [t for t in graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert external and all(len(t.raw_data) < ort_session.EXTERNAL_MIN_BYTES for t in graph.initializer)
    assert weights.stat().st_size > sum(len(t.raw_data) for t in graph.initializer)
    written = (cached.stat().st_ino, cached.read_bytes())

    loaded = []
    real = ort_session.make_session
    monkeypatch.setattr(ort_session, "make_session",
                        lambda path, *a, **kw: loaded.append((Path(path), kw)) or real(path, *a, **kw))
    with Encoder.open(tiny_bert_bundle, threads=1) as enc:  # hit: the cached file, not optimised again
        hit = enc.encode_passages(TEXTS)
    assert loaded == [(cached, {"optimize": False})]
    assert (cached.stat().st_ino, cached.read_bytes()) == written  # not rewritten
    assert _min_cosine(hit, ref) >= 0.99999

    cached.write_bytes(cached.read_bytes()[:1000])  # cut short
    loaded.clear()
    with Encoder.open(tiny_bert_bundle, threads=1) as enc:
        rebuilt = enc.encode_passages(TEXTS)
    assert [p for p, _ in loaded][0] == cached  # tried, refused, rebuilt from the body
    assert Path(tiny_bert_bundle) / "encoder.onnx" in [p for p, _ in loaded]
    assert cached.stat().st_size > 1000
    assert not list(entry.parent.glob(".*.tmp"))  # written in a temp folder, renamed: none left
    assert _min_cosine(rebuilt, ref) >= 0.99999

    size = weights.stat().st_size
    with open(weights, "r+b") as f:  # the weights cut short: refused too, the entry rebuilt
        f.truncate(size // 2)
    with Encoder.open(tiny_bert_bundle, threads=1) as enc:
        again = enc.encode_passages(TEXTS)
    assert weights.stat().st_size == size
    assert _min_cosine(again, ref) >= 0.99999


def test_a_racing_writer_keeps_the_entry_that_is_there(tiny_bert_bundle):
    with Encoder.open(tiny_bert_bundle, threads=1):  # the first writer's entry
        pass
    (entry,) = _cached("plain")
    before = (entry / ort_session.ENTRY_MODEL).stat().st_ino
    body = Path(tiny_bert_bundle) / "encoder.onnx"
    sess = ort_session._build_cached(body, entry, 1)  # a second writer that lost the race
    assert sess is not None
    assert (entry / ort_session.ENTRY_MODEL).stat().st_ino == before
    assert [p.name for p in entry.parent.iterdir() if p.name.startswith(".")] == []


def test_a_body_the_optimizer_cannot_fuse_is_tried_once(tiny_bert_bundle, monkeypatch):
    runs = []
    monkeypatch.setattr(ort_session, "_build_fused", lambda *a: runs.append(a) and None)
    for _ in range(2):
        with Encoder.open(tiny_bert_bundle, threads=1, bulk=True) as enc:
            assert enc.backend.session_kind == "optimised"
    assert len(runs) == 1


def test_providers_are_passed_through_with_the_cpu_default(tiny_bert_bundle, monkeypatch):
    import onnxruntime as ort

    seen = []
    real = ort.InferenceSession

    def recording(path, sess_options=None, providers=None, **kw):  # kw: disabled_optimizers (cpu_plan)
        seen.append(list(providers))
        return real(path, sess_options=sess_options, providers=["CPUExecutionProvider"], **kw)

    monkeypatch.setattr(ort, "InferenceSession", recording)
    with Encoder.open(tiny_bert_bundle, threads=1):
        pass
    assert seen == [["CPUExecutionProvider"]]
    seen.clear()
    wanted = ["XnnpackExecutionProvider", "CPUExecutionProvider"]
    with Encoder.open(tiny_bert_bundle, threads=1, providers=wanted) as enc:
        assert enc.backend.providers == tuple(wanted)
        assert enc.backend.session_kind == "uncached"  # another provider's graph is not cached
    assert seen == [wanted]


def test_the_reference_encoder_is_the_fp32_backend(tiny_bert_bundle):
    with open_reference_encoder(tiny_bert_bundle, threads=1) as enc:
        assert enc.backend.name == REFERENCE_BACKEND
        assert enc.space_name == "cpu-fp32"
        assert not enc.is_quantised


def test_keyword_only_search_never_opens_an_encoder(tmp_path, tiny_bert_bundle, monkeypatch):
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from hefsearch.search import Searcher
    from tests.support.library_helpers import write_corpus

    docs = tmp_path / "docs"
    write_corpus(docs, n_files=4, paragraphs=3)
    with Library.open(tmp_path / "lib") as lib, Encoder.open(tiny_bert_bundle, threads=1) as enc:
        sync(lib, [docs], [enc])

    def refuse(*a, **kw):
        raise AssertionError("a keyword-only search opened an encoder")

    monkeypatch.setattr(Encoder, "open", refuse)
    with Library.open(tmp_path / "lib", create=False) as lib:
        words = lib.query("SELECT text FROM chunks LIMIT 1")[0][0].split()[:2]
        res = Searcher(lib).search(SearchRequest(" ".join(words), k=3, mode="keyword"))
        assert res.hits


def test_the_cache_keeps_the_most_recently_used_models(tmp_path):
    import os

    for i in range(5):
        entry = tmp_path / f"k{i}.plain"
        entry.mkdir()
        (entry / ort_session.ENTRY_MODEL).write_bytes(b"x")
        os.utime(entry, ns=(i * 10**9, i * 10**9))
    (tmp_path / "old.plain.onnx").write_bytes(b"x")  # the single-file layout of before
    crashed, fresh = tmp_path / ".k9.plain.abc.tmp", tmp_path / ".k8.plain.def.tmp"
    crashed.mkdir()
    fresh.mkdir()  # another writer's, still at work
    os.utime(crashed, ns=(0, 0))
    ort_session.prune(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [fresh.name, "k3.plain", "k4.plain"]

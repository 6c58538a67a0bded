"""Export -> bundle -> encode matches the transformers model with its own pooling."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hefsearch.embed import Bundle, BundleError, Encoder
from hefsearch.embed.samples import VERIFY_TEXTS


def _reference(model_dir, texts, max_len):
    """sentence-transformers' own vectors for the model folder."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model_dir), device="cpu")
    st.max_seq_length = max_len
    return st.encode(texts, batch_size=8, normalize_embeddings=False, convert_to_numpy=True)


@pytest.mark.parametrize("kind", ["bert", "xlmr"])
def test_tiny_models_match_sentence_transformers(kind, request):
    model = request.getfixturevalue(f"tiny_{kind}_model")
    bundle = request.getfixturevalue(f"tiny_{kind}_bundle")
    texts = VERIFY_TEXTS
    with Encoder.open(bundle, backend="cpu", batch_size=7) as enc:
        ours = enc.encode(texts)
        assert enc.stats.truncated > 0  # the long samples exceed 64 tokens
    ref = _reference(model, texts, Bundle.open(bundle).seq_len)
    cos = (ours * ref).sum(1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(ref, axis=1))
    assert cos.min() >= 0.9999, cos.min()


def test_manifest_records_scheme_and_pooling(tiny_bert_bundle, tiny_xlmr_bundle):
    b = Bundle.open(tiny_bert_bundle)
    x = Bundle.open(tiny_xlmr_bundle)
    assert b.manifest["position_ids"] == {"scheme": "absolute", "offset": 0}
    assert x.manifest["position_ids"]["scheme"] == "padding_offset"
    assert x.position_offset == json.loads((tiny_xlmr_bundle / "manifest.json").read_text())["position_ids"]["offset"] > 0
    assert b.pooling == "mean" and b.normalize
    assert b.seq_len == 64  # from sentence_bert_config.json
    assert b.verify() == []
    assert [e.kind for e in b.encoders] == ["onnx"]


def test_export_refuses_non_empty_out(tiny_bert_model, tmp_path):
    from hefsearch.compile.export.bundle import export_bundle
    from hefsearch.base.errors import ExportError

    (tmp_path / "junk.txt").write_text("x")
    with pytest.raises(ExportError, match="not empty"):
        export_bundle(str(tiny_bert_model), tmp_path)
    assert (tmp_path / "junk.txt").read_text() == "x"


def test_prefixes_are_recorded_and_applied(tiny_bert_model, tmp_path):
    from hefsearch.compile.export.bundle import ExportOptions, export_bundle

    out = tmp_path / "e5ish"
    export_bundle(str(tiny_bert_model), out, ExportOptions(query_prefix="query: ", passage_prefix="passage: "))
    with Encoder.open(out) as enc:
        assert enc.bundle.prefixes == {"query": "query: ", "passage": "passage: "}
        q = enc.encode_queries(["hello world"])
        p = enc.encode_passages(["hello world"])
        raw = enc.encode(["query: hello world"])
    assert np.allclose(q, raw, atol=1e-6)
    assert not np.allclose(q, p, atol=1e-3)


def test_unknown_model_is_a_fast_clear_error(tmp_path, monkeypatch):
    from hefsearch.compile.export.bundle import resolve_model
    from hefsearch.base.errors import ModelNotFound

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(ModelNotFound) as e:
        resolve_model("sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2")
    assert "not in the local Hugging Face cache" in e.value.message
    assert "huggingface-cli download" in e.value.hint
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFound, match="no config.json"):
        resolve_model(str(tmp_path / "empty"))


def test_missing_or_corrupt_bundle_files_are_named(tiny_bert_bundle, tmp_path):
    import shutil

    copy = tmp_path / "b"
    shutil.copytree(tiny_bert_bundle, copy)
    (copy / "encoder.onnx").write_bytes(b"broken")
    with pytest.raises(BundleError, match="encoder.onnx has 6 bytes"):
        Bundle.open(copy)
    (copy / "encoder.onnx").unlink()
    with pytest.raises(BundleError, match=r"encoder.onnx is missing"):
        Bundle.open(copy)
    shutil.rmtree(copy)
    shutil.copytree(tiny_bert_bundle, copy)
    (copy / "manifest.json").write_text("{not json")
    with pytest.raises(BundleError, match="not valid JSON"):
        Bundle.open(copy)
    with pytest.raises(BundleError, match="does not exist"):
        Bundle.open(tmp_path / "nope")



def test_whitespace_is_tokenised_like_the_full_model(tiny_xlmr_model, tiny_xlmr_bundle):
    """Leading/trailing whitespace must give the same vectors as sentence-transformers (a
    Unigram tokenizer may make a token of it, so the bundle keeps transformers' own pipeline)."""
    texts = ["  leading spaces", "trailing spaces   ", "\tboth\n", "inner   spaces"]
    with Encoder.open(tiny_xlmr_bundle) as enc:
        ours = enc.encode(texts)
    ref = _reference(tiny_xlmr_model, texts, Bundle.open(tiny_xlmr_bundle).seq_len)
    cos = (ours * ref).sum(1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(ref, axis=1))
    assert cos.min() >= 0.9999, cos

"""``compile cpu-int8``: which MatMuls become int8, and that the result is a working encoder."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytest.importorskip("onnx")


def _build(src, dest, **kw):
    from hefsearch.compile.cpu_int8 import build_cpu_int8

    shutil.copytree(src, dest)
    return build_cpu_int8(dest, **kw)


def test_ffn_output_projections_stay_fp32_unless_all_int8(tiny_bert_bundle, tmp_path):
    from hefsearch.embed import Encoder
    from hefsearch.embed.bundle import Bundle

    kept = _build(tiny_bert_bundle, tmp_path / "kept")
    every = _build(tiny_bert_bundle, tmp_path / "all", keep_ffn_output_fp32=False)
    layers = int(Bundle.open(tmp_path / "kept").model["layers"])
    # Q, K, V, attention output, FFN in, FFN out per layer; the default leaves FFN out in FP32
    assert every.weights == 6 * layers and kept.weights == 5 * layers
    entry = Bundle.open(tmp_path / "kept").encoder_entries("cpu-int8")[0]
    assert "FFN output projections" in entry.extra["fp32"] and entry.extra["matmuls"] == kept.weights
    texts = ["the invoice is due in May", "der Zug fährt um sieben", "water the plants"]
    with Encoder.open(tmp_path / "kept", backend="cpu") as fp32, \
            Encoder.open(tmp_path / "kept", backend="cpu-int8") as int8, \
            Encoder.open(tmp_path / "all", backend="cpu-int8") as all8:
        ref = fp32.encode_passages(texts)
        near, far = (int8.encode_passages(texts) * ref).sum(1), (all8.encode_passages(texts) * ref).sum(1)
        assert int8.fingerprint != all8.fingerprint != fp32.fingerprint
    assert np.all(near > 0.9) and np.all(far > 0.9)
    assert near.mean() >= far.mean() - 1e-3  # keeping FP32 where the outliers are never hurts

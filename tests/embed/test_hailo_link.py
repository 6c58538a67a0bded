"""What crosses the host-device link, and fewer bytes of it (issue 18, item 4).

HailoRT 5.x (Hailo-10H) sends each stream's format type to the device and converts there, so a
FLOAT32 buffer crosses PCIe as 4 bytes per value (hailort ``infer_model_hrpc_client.cpp``,
``hailort_server.cpp``); 4.x converts in the host process. Verified against the contract fake
of hailo_platform (tests/fakes), which counts the bytes of every frame it receives and returns.
"""

from __future__ import annotations

import numpy as np
import pytest

from hefsearch.embed.hailo_streams import resolve_stream_types, stream_quantiser
from hefsearch.embed.encoder import Encoder
from hefsearch.embed.hef_contract import StreamSpec
from hefsearch.embed.samples import VERIFY_TEXTS
from tests.fakes.fake_hef import add_fake_hef, copy_bundle

TEXTS = VERIFY_TEXTS[:12]
SEQ, H = 64, 32


def _bundle(tiny_bert_bundle, tmp_path, **kw):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "bundle")
    kw.setdefault("out_type", "UINT8")
    add_fake_hef(path, **kw)
    return path


def _measured_per_frame(world) -> dict:
    n = world.stats.link_frames
    return {"in": world.stats.link_bytes["in"] / n, "out": world.stats.link_bytes["out"] / n}


@pytest.mark.parametrize("streams", ["float32", "native"])
def test_hailort5_link_bytes_are_the_configured_format(fake_hailo, tiny_bert_bundle, tmp_path, streams):
    path = _bundle(tiny_bert_bundle, tmp_path)
    with Encoder.open(path, backend="hailo", input_type=streams, output_type=streams) as enc:
        enc.encode(TEXTS)
        cost = enc.backend.frame_cost()
    measured = _measured_per_frame(fake_hailo)
    assert cost.conversion == "device"
    # what the backend reports is what the (fake) device received and sent
    assert cost.link_bytes["embeddings"] + cost.link_bytes["attention_mask"] == measured["in"]
    assert cost.link_bytes["last_hidden_state"] == measured["out"]
    per_value = 4 if streams == "float32" else 1
    assert cost.link_bytes["embeddings"] == SEQ * H * per_value
    assert cost.link_bytes["last_hidden_state"] == SEQ * H * per_value
    assert cost.link_bytes["attention_mask"] == SEQ  # keys01: one byte per key, 0/1 exact in uint8


def test_hailort4_converts_on_the_host_so_native_bytes_cross(fake_hailo, tiny_bert_bundle, tmp_path):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "bundle")
    add_fake_hef(path, hw_arch="hailo8", dfc_version="3.34.0", mask_mode="scores01", out_type="UINT8")
    fake_hailo.devices = [{"id": "0001:01:00.0", "arch": "HAILO8"}]
    fake_hailo.version = "4.24.0"  # the pair of DFC 3.34.0 (zoo v2.19)
    with Encoder.open(path, backend="hailo") as enc:  # auto: FLOAT32 to HailoRT on 4.x
        enc.encode(TEXTS)
        cost = enc.backend.frame_cost()
    measured = _measured_per_frame(fake_hailo)
    assert cost.conversion == "host"
    assert cost.host_bytes["embeddings"] == SEQ * H * 4 and cost.link_bytes["embeddings"] == SEQ * H
    assert sum(cost.link_bytes[r] for r in ("embeddings", "attention_mask")) == measured["in"]
    assert cost.link_bytes["last_hidden_state"] == measured["out"] == SEQ * H
    types = {n: t.name for n, t, _ in fake_hailo.stats.set_format_types}
    assert types["encoder/input_layer1"] == "FLOAT32"


def test_auto_on_hailort5_sends_and_reads_native_types(fake_hailo, tiny_bert_bundle, tmp_path):
    """The default: on 5.x the host quantises the embeddings to the input stream's uint8 and reads
    uint8 outputs, a quarter of the bytes each way, with the vectors FLOAT32 streams give."""
    path = _bundle(tiny_bert_bundle, tmp_path)
    with Encoder.open(path, backend="hailo", input_type="float32", output_type="float32") as enc:
        wide = enc.encode(TEXTS)
        wide_cost = enc.backend.frame_cost()
    fake_hailo.stats.set_format_types.clear()
    with Encoder.open(path, backend="hailo") as enc:
        narrow = enc.encode(TEXTS)
        cost = enc.backend.frame_cost()
    types = {n: t.name for n, t, _ in fake_hailo.stats.set_format_types}
    assert types == {"encoder/input_layer1": "UINT8", "encoder/input_layer2": "UINT8",
                     "encoder/layer_normalization5": "UINT8"}
    assert cost.link_bytes["embeddings"] * 4 == wide_cost.link_bytes["embeddings"]
    assert cost.link_bytes["last_hidden_state"] * 4 == wide_cost.link_bytes["last_hidden_state"]
    # host quantisation is HailoRT's own formula: the device sees the same bytes either way
    np.testing.assert_allclose(narrow, wide, atol=1e-5)


def test_the_env_chooses_the_stream_types(fake_hailo, tiny_bert_bundle, tmp_path, monkeypatch):
    from hefsearch.base.errors import BackendUnavailable

    path = _bundle(tiny_bert_bundle, tmp_path)
    monkeypatch.setenv("HEFSEARCH_HAILO_STREAMS", "float32")
    with Encoder.open(path, backend="hailo") as enc:
        assert enc.backend.frame_cost().link_bytes["embeddings"] == SEQ * H * 4
    monkeypatch.setenv("HEFSEARCH_HAILO_STREAMS", "int4")
    with pytest.raises(BackendUnavailable) as e:
        Encoder.open(path, backend="hailo")
    assert "HEFSEARCH_HAILO_STREAMS" in e.value.hint


def test_stream_quantiser_is_hailorts_formula():
    """quantization.hpp: clip to the limits, x / scale + zp, round half to even."""
    spec = StreamSpec("n/input_layer1", (1, 4, 2), "NHWC", "UINT8", ((0.5, 10.0),))
    q = stream_quantiser(spec)
    x = np.array([[-100.0, -5.0, -4.75, 0.25, 0.75, 1.0, 122.4, 1e9]], dtype=np.float32)
    # -5/0.5+10 = 0; -4.75 -> 0.5 -> 0 (half to even); 0.25 -> 10.5 -> 10; 0.75 -> 11.5 -> 12
    np.testing.assert_array_equal(q(x), np.array([[0, 0, 0, 10, 12, 12, 255, 255]], dtype=np.uint8))
    assert q(x).dtype == np.uint8
    assert stream_quantiser(StreamSpec("f", (1, 1, 1), "NHWC", "FLOAT32", ((1.0, 0.0),))) is None
    assert stream_quantiser(StreamSpec("two", (1, 1, 2), "NHWC", "UINT8", ((1.0, 0.0), (2.0, 0.0)))) is None
    wide = stream_quantiser(StreamSpec("w", (1, 1, 1), "NHWC", "UINT16", ((0.001, 32768.0),)))
    assert wide(np.array([1.0], np.float32)).dtype == np.uint16 and wide(np.array([1.0], np.float32))[0] == 33768


def test_auto_resolves_by_hailort_line():
    assert resolve_stream_types("auto", "5.2.0") == "native"
    assert resolve_stream_types("auto", "4.23.0") == "float32"
    assert resolve_stream_types("float32", "5.2.0") == "float32"
    with pytest.raises(ValueError):
        resolve_stream_types("int8", "5.2.0")


def test_stream_quantiser_clips_to_the_streams_limvals_before_rounding():
    """quantization.hpp quantize_input: x is clipped to the stream's limvals_min/max (which may be
    narrower than the type), then x / scale + zp is rounded. Clipping after rounding, to the type's
    0..255, lets a value beyond the limits through."""
    spec = StreamSpec("n/input_layer1", (1, 1, 4), "NHWC", "UINT8", ((0.5, 10.0),), limvals=((-2.0, 20.0),))
    q = stream_quantiser(spec)
    x = np.array([[-100.0, -2.2, 19.9, 1e9]], dtype=np.float32)
    # -2.0 / 0.5 + 10 = 6; 20.0 / 0.5 + 10 = 50; 19.9 -> 49.8 -> 50
    np.testing.assert_array_equal(q(x), np.array([[6, 6, 50, 50]], dtype=np.uint8))
    # the identity quant info is rounded only (HailoRT skips the clip)
    ident = stream_quantiser(StreamSpec("i", (1, 1, 2), "NHWC", "UINT8", ((1.0, 0.0),), limvals=((0.0, 1.0),)))
    np.testing.assert_array_equal(ident(np.array([[2.4, 7.5]], np.float32)), np.array([[2, 8]], np.uint8))


def test_limvals_are_carried_from_hailort_quant_infos():
    from types import SimpleNamespace

    from hefsearch.embed.hef_file import spec_from_infer_stream

    fmt = SimpleNamespace(type=SimpleNamespace(name="UINT8"), order=SimpleNamespace(name="NHWC"), flags=None)
    qi = SimpleNamespace(qp_scale=0.5, qp_zp=10.0, limvals_min=-2.0, limvals_max=20.0)
    stream = SimpleNamespace(name="n/input_layer1", shape=(1, 1, 4), format=fmt, quant_infos=[qi])
    spec = spec_from_infer_stream(stream)
    assert spec.limvals == ((-2.0, 20.0),) and spec.quant == ((0.5, 10.0),)


def test_host_quantisation_clips_to_narrow_limvals_like_hailort(fake_hailo, tiny_bert_bundle, tmp_path):
    """A HEF whose embeddings stream has limvals narrower than its type: the host quantiser
    (native streams) must clip to them before rounding, as HailoRT does for FLOAT32 buffers
    (quantization.hpp), so both paths give the same vectors; clipping only to the type's range
    after rounding lets the out-of-limit values through."""
    from tests.fakes.fake_hef import edit_fake_hef

    path = _bundle(tiny_bert_bundle, tmp_path)

    def narrow(d):
        for spec in d["inputs"]:
            if spec["role"] == "embeddings":
                scale, zp = spec["quant"][0]
                spec["limvals"] = [[-zp * scale * 0.3, (255 - zp) * scale * 0.3]]

    edit_fake_hef(path, "encoder.hailo10h.hef", narrow)
    with Encoder.open(path, backend="hailo", input_type="float32", output_type="float32") as enc:
        on_device = enc.encode(TEXTS)
    with Encoder.open(path, backend="hailo", output_type="float32") as enc:
        on_host = enc.encode(TEXTS)
    np.testing.assert_allclose(on_host, on_device, atol=1e-5)

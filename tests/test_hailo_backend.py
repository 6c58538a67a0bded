"""The hailo backend driven through the contract fake of hailo_platform (tests/fakes).

Everything here is verified against the fake only (written from the public HailoRT 4.23/5.2
Python sources), not against a physical Hailo device.
"""

from __future__ import annotations

import numpy as np
import pytest

from hefsearch.embed.backends import resolve_backend_name
from hefsearch.embed.bundle import Bundle
from hefsearch.embed.encoder import Encoder
from hefsearch.embed.errors import BackendUnavailable, DeviceError
from hefsearch.embed.hef_contract import HefContractError
from hefsearch.embed.samples import VERIFY_TEXTS
from tests.fakes.fake_hef import add_fake_hef, copy_bundle, edit_fake_hef
from tests.hailo_fixtures import fake_hailo, hef_bundle, no_hailo  # noqa: F401

TEXTS = VERIFY_TEXTS


@pytest.fixture
def cpu_vectors(tiny_bert_bundle):
    with Encoder.open(tiny_bert_bundle, backend="cpu") as enc:
        return enc.encode(TEXTS)


def _bundle(tiny_bert_bundle, tmp_path, **kw):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "bundle")
    add_fake_hef(path, **kw)
    return path


def _cos(a, b):
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_float_outputs_equal_cpu_and_the_api_is_used_as_documented(fake_hailo, hef_bundle, cpu_vectors):
    with Encoder.open(hef_bundle, backend="hailo", batch_size=8) as enc:
        assert enc.backend.label == "Hailo-10H"
        assert enc.space_kind == "hef"
        vecs = enc.encode(TEXTS)
        stats = enc.stats
    np.testing.assert_allclose(vecs, cpu_vectors, atol=1e-5)
    st = fake_hailo.stats
    # one shared, scheduled VDevice
    (algo, group, _mps), = st.vdevice_params
    assert algo.name == "ROUND_ROBIN" and group == "SHARED"
    # every input and output set to FLOAT32, all before configure()
    names = {n for n, _, _ in st.set_format_types}
    assert names == {"encoder/input_layer1", "encoder/input_layer2", "encoder/layer_normalization5"}
    assert all(t.name == "FLOAT32" and not configured for _, t, configured in st.set_format_types)
    # one frame per Bindings, each admitted by wait_for_async_ready, never beyond the queue
    assert st.frames == len(TEXTS) == stats.frames
    assert st.ready_waits >= st.frames
    assert 1 < st.max_in_flight <= fake_hailo.async_queue_size
    # the fake completed frames out of order, and the vectors still line up (checked above)
    order = st.completion_order[0]
    assert order != sorted(order)
    # clean shutdown on close; the legacy configure path is never used
    assert st.shutdowns == 1 and st.released_vdevices == 1
    assert st.legacy_configure_calls == 0


def test_frame_order_survives_a_deep_queue(fake_hailo, hef_bundle, cpu_vectors):
    fake_hailo.async_queue_size = 16
    with Encoder.open(hef_bundle, backend="hailo", batch_size=36) as enc:
        vecs = enc.encode(TEXTS)
    order = fake_hailo.stats.completion_order[0]
    assert order != sorted(order) and sorted(order) == list(range(len(TEXTS)))
    np.testing.assert_allclose(vecs, cpu_vectors, atol=1e-5)


def test_back_pressure_keeps_a_shallow_queue_from_overflowing(fake_hailo, hef_bundle, cpu_vectors):
    # run_async on a full queue fails with HAILO_QUEUE_IS_FULL in the fake, as in HailoRT
    fake_hailo.async_queue_size = 2
    with Encoder.open(hef_bundle, backend="hailo", batch_size=32) as enc:
        vecs = enc.encode(TEXTS)
    assert fake_hailo.stats.max_in_flight <= 2
    np.testing.assert_allclose(vecs, cpu_vectors, atol=1e-5)


@pytest.mark.parametrize("order", ["FCR", "NHWC", "F8CR", "NHCW", "NCHW", "NC"])
def test_output_format_order_is_read_from_the_hef(fake_hailo, tiny_bert_bundle, tmp_path, cpu_vectors, order):
    path = _bundle(tiny_bert_bundle, tmp_path, out_order=order, in_type="FLOAT32")
    with Encoder.open(path, backend="hailo") as enc:
        vecs = enc.encode(TEXTS)
    np.testing.assert_allclose(vecs, cpu_vectors, atol=1e-5)


@pytest.mark.parametrize("split", ["channels", "tokens"])
def test_output_split_over_two_streams_is_concatenated(fake_hailo, tiny_bert_bundle, tmp_path, cpu_vectors, split):
    path = _bundle(tiny_bert_bundle, tmp_path, split=split, in_type="FLOAT32")
    with Encoder.open(path, backend="hailo") as enc:
        vecs = enc.encode(TEXTS)
    np.testing.assert_allclose(vecs, cpu_vectors, atol=1e-5)


def test_uint8_outputs_stay_close_and_host_dequantisation_matches_hailort(
        fake_hailo, tiny_bert_bundle, tmp_path, cpu_vectors):
    path = _bundle(tiny_bert_bundle, tmp_path, out_type="UINT8", split="channels", in_type="FLOAT32")
    with Encoder.open(path, backend="hailo") as enc:
        runtime = enc.encode(TEXTS)
    cos = _cos(runtime, cpu_vectors)
    assert cos.min() > 0.99
    assert np.abs(runtime - cpu_vectors).max() > 1e-4  # really quantised, not a copy of FP32
    # the raw uint8 buffers, dequantised on the host with the stream's scale and zero point
    with Encoder.open(path, backend="hailo", output_type="native") as enc:
        host = enc.encode(TEXTS)
    out_calls = [t.name for n, t, _ in fake_hailo.stats.set_format_types if "input_layer" not in n]
    assert out_calls == ["FLOAT32", "FLOAT32"]  # two split outputs, set by the float32 encoder only
    np.testing.assert_allclose(host, runtime, atol=1e-6)


def test_each_batch_uses_the_smallest_seq_that_fits(fake_hailo, tiny_bert_bundle, tmp_path, cpu_vectors):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "bundle")
    add_fake_hef(path, seq_len=16, in_type="FLOAT32")
    add_fake_hef(path, seq_len=64, in_type="FLOAT32")
    with Encoder.open(path, backend="hailo", batch_size=4) as enc:
        assert enc.backend.seq_lens == (16, 64)
        parts = enc.fingerprint_parts()
        vecs = enc.encode(TEXTS)
        lengths = enc.host.tokenize(TEXTS).lengths
    assert set(parts["file_sha256"]) == {"16", "64"}
    np.testing.assert_allclose(vecs, cpu_vectors, atol=1e-5)
    short_model, long_model = fake_hailo.stats.completion_order  # configured in SEQ order
    # batches are length-sorted groups of 4: a group goes to SEQ 16 only if all fit
    sorted_len = np.sort(lengths)
    expect_short = sum(len(g) for g in np.array_split(sorted_len, range(4, len(sorted_len), 4)) if g.max() <= 16)
    assert len(short_model) == expect_short > 0
    assert len(long_model) == len(TEXTS) - expect_short > 0


def test_backend_pads_to_the_next_seq_and_crops(fake_hailo, tiny_bert_bundle, tmp_path):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "bundle")
    add_fake_hef(path, seq_len=16, in_type="FLOAT32")
    bundle = Bundle.open(path)
    with Encoder.open(bundle, backend="cpu") as cpu, Encoder.open(bundle, backend="hailo") as npu:
        tok = cpu.host.tokenize(["short text", "another one"])
        e, m = cpu.host.embed(tok.ids)  # padded to the longest (a few tokens), not to 16
        want = cpu.backend.run(e, m)
        got = npu.backend.run(e, m)
        assert got.shape == want.shape
        np.testing.assert_allclose(got[m.astype(bool)], want[m.astype(bool)], atol=1e-5)
        with pytest.raises(ValueError, match="exceed the longest compiled SEQ 16"):
            npu.backend.run(np.zeros((1, 17, bundle.hidden), np.float32), np.ones((1, 17), np.int64))


def test_truncation_to_the_hef_window_is_counted(fake_hailo, tiny_bert_bundle, tmp_path):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "bundle")
    add_fake_hef(path, seq_len=24)
    with Encoder.open(path, backend="hailo") as enc:
        assert enc.max_tokens == 24
        too_long = [i for i, t in enumerate(TEXTS) if enc.count_tokens(t) > 24]
        enc.encode_passages(TEXTS)
        assert enc.stats.truncated == len(too_long) > 2
        assert sorted(enc.stats.last_truncated) == too_long


def test_contract_mismatch_names_the_stream(fake_hailo, tiny_bert_bundle, tmp_path):
    path = _bundle(tiny_bert_bundle, tmp_path)
    bundle = Bundle.open(path)
    entry = bundle.encoder_entries("hef")[0]
    entry.extra["inputs"]["embeddings"]["name"] = "encoder/input_layer9"
    bundle.upsert_encoder(entry)
    bundle.save_manifest()
    # a name the HEF does not have is not fatal: the stream holding SEQ x H values is the one
    with Encoder.open(path, backend="hailo") as enc:
        assert any("the manifest names 'encoder/input_layer9', which the HEF does not have; identified "
                   "'encoder/input_layer1' by its size (2048 values)" in n for n in enc.backend.notes)
    # ... but when no input holds that many values, the error names the streams
    edit_fake_hef(path, "encoder.hailo10h.hef", lambda d: d["inputs"][0].update(shape=[8, 8, 16]))
    frames = fake_hailo.stats.frames
    with pytest.raises(HefContractError) as err:
        Encoder.open(path, backend="hailo")
    msg = str(err.value)
    assert "input embeddings: the manifest names stream 'encoder/input_layer9', but no single HEF input holds " \
           "the 2048 values of 64 tokens x 32 channels" in msg
    assert "'encoder/input_layer1' [8, 8, 16], 'encoder/input_layer2' [8, 8, 256]" in msg
    assert "hefsearch inspect" in msg
    assert fake_hailo.stats.frames == frames  # stopped before the first frame


def test_swapped_inputs_are_reported_as_swapped(fake_hailo, tiny_bert_bundle, tmp_path):
    path = _bundle(tiny_bert_bundle, tmp_path)

    def swap(d):
        a, b = d["inputs"]
        a["name"], b["name"] = b["name"], a["name"]

    edit_fake_hef(path, "encoder.hailo10h.hef", swap)
    with pytest.raises(HefContractError, match="look swapped"):
        Encoder.open(path, backend="hailo")


def test_wrong_output_width_is_a_mismatch(fake_hailo, tiny_bert_bundle, tmp_path):
    path = _bundle(tiny_bert_bundle, tmp_path)
    edit_fake_hef(path, "encoder.hailo10h.hef", lambda d: d["outputs"][0].update(shape=[1, 64, 16]))
    with pytest.raises(HefContractError, match=r"holds 64 tokens x 16 channels; the host needs 64 x 32"):
        Encoder.open(path, backend="hailo")


def test_device_failure_mid_encode_is_a_device_error_and_recovers(fake_hailo, hef_bundle, cpu_vectors):
    enc = Encoder.open(hef_bundle, backend="hailo", batch_size=8)
    try:
        fake_hailo.fail_after_frames = 10
        with pytest.raises(DeviceError, match="The Hailo device failed while encoding") as err:
            enc.encode(TEXTS)
        assert "HailoRTDriverOperationFailedException" in err.value.message
        assert "hailortcli fw-control identify" in err.value.hint
        assert fake_hailo.stats.shutdowns == 1 and fake_hailo.stats.released_vdevices == 1
        fake_hailo.fail_after_frames = None
        vecs = enc.encode(TEXTS)  # reopens the device
        np.testing.assert_allclose(vecs, cpu_vectors, atol=1e-5)
    finally:
        enc.close()
        enc.close()  # twice is safe


def test_a_hung_device_times_out(fake_hailo, tiny_bert_bundle, tmp_path):
    path = _bundle(tiny_bert_bundle, tmp_path)
    fake_hailo.hang_after_frames = 3
    with Encoder.open(path, backend="hailo", timeout_ms=200) as enc:
        with pytest.raises(DeviceError, match=r"did not answer while encoding") as err:
            enc.encode(TEXTS)
    # HailoRT's AsyncInferJob.wait waits for the job, then for the callback, each with the full
    # timeout: the message states both the timeout and its upper bound
    assert "within the timeout of 0.2 s per wait (up to 0.4 s" in err.value.message
    assert "HEFSEARCH_HAILO_TIMEOUT_MS" in err.value.hint


def test_missing_sdk_gives_the_install_message(no_hailo, hef_bundle):
    with pytest.raises(BackendUnavailable) as err:
        Encoder.open(hef_bundle, backend="hailo")
    assert "hailo_platform" in err.value.message
    assert "sudo apt install hailo-h10-all" in err.value.hint
    assert "hailo-all" in err.value.hint and "--system-site-packages" in err.value.hint
    assert "Developer Zone" in err.value.hint
    name, why = resolve_backend_name("auto", Bundle.open(hef_bundle))
    assert name == "cpu" and "hailo: HailoRT (hailo_platform) is not installed" in why


# -- auto ---------------------------------------------------------------------------------------
def test_auto_picks_hailo_when_everything_is_there(fake_hailo, hef_bundle):
    name, why = resolve_backend_name("auto", Bundle.open(hef_bundle))
    assert name == "hailo"
    assert "Hailo-10H found; bundle has encoder.hailo10h.hef (SEQ 64)" in why


def test_auto_falls_back_when_the_hef_is_for_another_chip(fake_hailo, hef_bundle):
    fake_hailo.devices = [{"id": "0001:01:00.0", "arch": "HAILO8L"}]
    fake_hailo.version = "4.23.0"  # the runtime that drives a Hailo-8L
    name, why = resolve_backend_name("auto", Bundle.open(hef_bundle))
    assert name == "cpu" and "Hailo-8L found, but the bundle's HEFs are for hailo10h" in why


def test_auto_falls_back_without_a_device(fake_hailo, hef_bundle):
    fake_hailo.devices = []
    name, why = resolve_backend_name("auto", Bundle.open(hef_bundle))
    assert name == "cpu" and "no Hailo device found" in why
    with pytest.raises(BackendUnavailable, match="No Hailo device found"):
        Encoder.open(hef_bundle, backend="hailo")


def test_auto_falls_back_when_the_device_does_not_answer(fake_hailo, hef_bundle):
    fake_hailo.identify_fails = True
    name, why = resolve_backend_name("auto", Bundle.open(hef_bundle))
    assert name == "cpu" and "is present but did not answer" in why


def test_auto_falls_back_for_a_bundle_without_hef(fake_hailo, tiny_bert_bundle):
    name, why = resolve_backend_name("auto", Bundle.open(tiny_bert_bundle))
    assert name == "cpu" and "the bundle has no HEF" in why
    assert fake_hailo.stats.identify_calls == 0  # did not even touch the device


def test_environment_overrides_auto(fake_hailo, hef_bundle, monkeypatch):
    monkeypatch.setenv("HEFSEARCH_BACKEND", "cpu")
    name, why = resolve_backend_name(None, Bundle.open(hef_bundle))
    assert name == "cpu" and "HEFSEARCH_BACKEND" in why
    fake_hailo.devices = []
    monkeypatch.setenv("HEFSEARCH_BACKEND", "hailo")
    with pytest.raises(BackendUnavailable, match="No Hailo device found"):
        Encoder.open(hef_bundle, backend=None)


def test_device_arch_selects_the_hef(fake_hailo, tiny_bert_bundle, tmp_path, cpu_vectors):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "bundle")
    add_fake_hef(path, hw_arch="hailo10h", in_type="FLOAT32")
    add_fake_hef(path, hw_arch="hailo8", dfc_version="3.33.0", in_type="FLOAT32")
    fake_hailo.devices = [{"id": "0001:01:00.0", "arch": "HAILO8"}]
    fake_hailo.version = "4.23.0"
    with Encoder.open(path, backend="auto") as enc:
        assert enc.backend.name == "hailo" and enc.backend.label == "Hailo-8"
        assert enc.fingerprint_parts()["hw_arch"] == "hailo8"
        np.testing.assert_allclose(enc.encode(TEXTS), cpu_vectors, atol=1e-5)


def test_fingerprint_differs_from_cpu_and_between_hefs(fake_hailo, tiny_bert_bundle, tmp_path):
    a = _bundle(tiny_bert_bundle, tmp_path / "a")
    b = _bundle(tiny_bert_bundle, tmp_path / "b", out_type="UINT8")
    with Encoder.open(a, backend="hailo") as ea, Encoder.open(b, backend="hailo") as eb, \
            Encoder.open(a, backend="cpu") as ec:
        assert len({ea.fingerprint, eb.fingerprint, ec.fingerprint}) == 3
        assert ea.fingerprint_parts()["precision"] == "a8"


# -- the fake's documented failure modes (so the tests above could fail) ---------------------------
def test_fake_rejects_wrong_buffer_sizes_and_the_legacy_api_on_hailo10h(fake_hailo, tiny_bert_bundle, tmp_path):
    import hailo_platform as hp
    from hailo_platform.pyhailort.pyhailort import HailoRTInvalidOperationException

    hef = str(_bundle(tiny_bert_bundle, tmp_path) / "encoder.hailo10h.hef")  # UINT8 inputs
    with hp.VDevice() as vdev:
        with pytest.raises(hp.HailoRTException, match="HAILO_NOT_IMPLEMENTED"):
            vdev.configure(hp.HEF(hef))
        im = vdev.create_infer_model(hef)  # formats left at the HEF's UINT8
        cim = im.configure()
        try:
            shape_e = im.input("encoder/input_layer1").shape
            shape_m = im.input("encoder/input_layer2").shape
            assert shape_e == [8, 8, 32]  # folded by the allocator, as the HEF reports it
            shape_o, name_o = im.output().shape, im.output().name
            b = cim.create_bindings(
                input_buffers={"encoder/input_layer1": np.zeros(shape_e, np.float32),
                               "encoder/input_layer2": np.zeros(shape_m, np.uint8)},
                output_buffers={name_o: np.zeros(shape_o, np.float32)})
            with pytest.raises(HailoRTInvalidOperationException,
                               match=r"Input buffer size 8192 is different than expected 2048 for input 'encoder/input_layer1'"):
                cim.run_async([b])
            with pytest.raises(hp.HailoRTException, match="C_CONTIGUOUS"):
                cim.create_bindings(input_buffers={"encoder/input_layer1": np.zeros((64, 32), np.uint8).T})
        finally:
            cim.shutdown()


def test_environment_sets_timeout_and_the_4x_service(fake_hailo, hef_bundle, monkeypatch):
    monkeypatch.setenv("HEFSEARCH_HAILO_TIMEOUT_MS", "1234")
    with Encoder.open(hef_bundle, backend="hailo") as enc:
        assert enc.backend.timeout_ms == 1234
    # HailoRT 5.x rejects the multi-process flag on Hailo-10H (it shares without a service):
    # the backend never sets it there, even when asked
    monkeypatch.setenv("HEFSEARCH_HAILO_SERVICE", "1")
    with Encoder.open(hef_bundle, backend="hailo") as enc:
        assert fake_hailo.stats.vdevice_params[-1][1:] == ("SHARED", False)
        assert not enc.backend.uses_service
    # on HailoRT 4.x / Hailo-8 it is passed through
    add_fake_hef(hef_bundle, hw_arch="hailo8", dfc_version="3.33.0")
    fake_hailo.devices = [{"id": "0001:01:00.0", "arch": "HAILO8"}]
    fake_hailo.version = "4.23.0"
    fake_hailo.service_running = True
    with Encoder.open(hef_bundle, backend="hailo") as enc:
        assert fake_hailo.stats.vdevice_params[-1][1:] == ("SHARED", True)
        assert enc.backend.uses_service

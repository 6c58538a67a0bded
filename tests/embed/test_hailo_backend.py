"""The hailo backend driven through the contract fake of hailo_platform (tests/fakes).

Everything here is verified against the fake only (written from the public HailoRT 4.23/5.2
Python sources), not against a physical Hailo device.
"""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

from hefsearch.embed.backends import resolve_backend_name
from hefsearch.embed.bundle import Bundle
from hefsearch.embed.encoder import Encoder
from hefsearch.base.errors import BackendUnavailable, DeviceError
from hefsearch.embed.hef_contract import HefContractError
from hefsearch.embed.samples import VERIFY_TEXTS
from tests.fakes.fake_hef import add_fake_hef, copy_bundle, edit_fake_hef

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
    with Encoder.open(path, backend="hailo", output_type="float32") as enc:
        runtime = enc.encode(TEXTS)
    cos = _cos(runtime, cpu_vectors)
    assert cos.min() > 0.99
    assert np.abs(runtime - cpu_vectors).max() > 1e-4  # really quantised, not a copy of FP32
    # the raw uint8 buffers, dequantised on the host with the stream's scale and zero point
    with Encoder.open(path, backend="hailo", output_type="native") as enc:
        host = enc.encode(TEXTS)
    out_calls = [t.name for n, t, _ in fake_hailo.stats.set_format_types if "input_layer" not in n]
    assert out_calls == ["FLOAT32", "FLOAT32", "UINT8", "UINT8"]  # two split outputs, per encoder
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
    assert "'encoder/input_layer1' [8, 8, 16], 'encoder/input_layer2' [1, 1, 64]" in msg
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
    assert "sudo apt install dkms hailo-h10-all" in err.value.hint
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


# -- streams as Hailo's compiler makes them (docs/hailo-facts.md) ------------------------------------
MASK = "encoder/input_layer2"
EMB = "encoder/input_layer1"
HEF = "encoder.hailo10h.hef"


def _capture(monkeypatch) -> list[list[dict]]:
    """Record, per run_async call, a copy of every frame's input buffers (one dict per Bindings)."""
    from hailo_platform.pyhailort import pyhailort

    calls: list[list[dict]] = []
    run_async = pyhailort.ConfiguredInferModel.run_async

    def recording(self, bindings, callback=None):
        calls.append([{n: b.input(n).get_buffer().copy() for n in (EMB, MASK)} for b in bindings])
        return run_async(self, bindings, callback=callback)

    monkeypatch.setattr(pyhailort.ConfiguredInferModel, "run_async", recording)
    return calls


@pytest.mark.parametrize("out_order,split", [("NHWC", None), ("FCR", "channels"), ("FCR", "tokens")])
def test_a_manifest_with_the_parsed_names_still_embeds(fake_hailo, tiny_bert_bundle, tmp_path, cpu_vectors,
                                                        out_order, split):
    # The manifest says output_layer1 and unfolded [1, 64, C] inputs (the parsed network); the HEF's
    # output is named after its feeding layer (split ones _1, _0) and its inputs are folded 8x8.
    path = _bundle(tiny_bert_bundle, tmp_path, manifest_streams="parsed", in_type="UINT8", out_type="UINT8",
                   out_order=out_order, split=split, mask_mode="scores01")
    with Encoder.open(path, backend="hailo") as enc:
        vecs = enc.encode(TEXTS)
        notes = enc.backend.notes
    assert _cos(vecs, cpu_vectors).min() >= 0.98
    assert any(n.startswith("output: the manifest names 'encoder/output_layer1', the HEF's outputs are "
                            "'encoder/layer_normalization5") for n in notes), notes
    assert any(f"input embeddings ({EMB}): the HEF's shape [8, 8, 32] differs from the recorded [1, 64, 32]" in n
               for n in notes), notes
    assert any(f"input attention_mask ({MASK}): the HEF's shape [8, 8, 256] differs from the recorded [1, 64, 256]"
               in n for n in notes), notes


@pytest.mark.parametrize("fold", [True, False])
def test_inputs_folded_or_not_are_fed_in_the_hefs_shape(fake_hailo, tiny_bert_bundle, tmp_path, cpu_vectors,
                                                        monkeypatch, fold):
    path = _bundle(tiny_bert_bundle, tmp_path, fold=fold, in_type="FLOAT32", mask_mode="scores01")
    calls = _capture(monkeypatch)
    with Encoder.open(path, backend="hailo") as enc:
        vecs = enc.encode(TEXTS)
        notes = enc.backend.notes
    np.testing.assert_allclose(vecs, cpu_vectors, atol=1e-5)
    frame = calls[0][0]
    assert frame[EMB].shape == ((8, 8, 32) if fold else (1, 64, 32))
    assert frame[MASK].shape == ((8, 8, 256) if fold else (1, 64, 256))
    assert any("automatic spatial reshape" in n for n in notes) == fold


def test_an_input_is_checked_by_its_element_count(fake_hailo, tiny_bert_bundle, tmp_path, cpu_vectors):
    path = _bundle(tiny_bert_bundle, tmp_path, in_type="FLOAT32", mask_mode="scores01")
    # another fold of the same 2048 values: fed row-major in the HEF's shape, with a note
    edit_fake_hef(path, HEF, lambda d: d["inputs"][0].update(shape=[16, 4, 32]))
    with Encoder.open(path, backend="hailo") as enc:
        np.testing.assert_allclose(enc.encode(TEXTS), cpu_vectors, atol=1e-5)
        assert any(f"input embeddings ({EMB}): the HEF's shape [16, 4, 32] differs from the recorded [8, 8, 32]; "
                   "fed row-major" in n for n in enc.backend.notes)
    # a different number of values is refused, naming the stream
    edit_fake_hef(path, HEF, lambda d: d["inputs"][1].update(shape=[8, 8, 128]))
    frames = fake_hailo.stats.frames
    with pytest.raises(HefContractError) as err:
        Encoder.open(path, backend="hailo")
    assert (f"input attention_mask ({MASK}): the HEF has shape [8, 8, 128] = 8192 values; the host sends 16384"
            in err.value.message)
    assert fake_hailo.stats.frames == frames


def test_transposed_streams_are_refused(fake_hailo, tiny_bert_bundle, tmp_path):
    # FormatFlags.TRANSPOSED: "The height and width will be swapped" (hailort.h)
    path = _bundle(tiny_bert_bundle, tmp_path)
    for stream in (EMB, MASK, "encoder/layer_normalization5"):
        def flag(d, stream=stream):
            for s in d["inputs"] + d["outputs"]:
                s["flags"] = "TRANSPOSED" if s["name"] == stream else "NONE"

        edit_fake_hef(path, HEF, flag)
        with pytest.raises(HefContractError, match="TRANSPOSED") as err:
            Encoder.open(path, backend="hailo")
        assert stream in err.value.message
    assert fake_hailo.stats.frames == 0


def test_input_order_in_the_hef_does_not_matter(fake_hailo, tiny_bert_bundle, tmp_path, cpu_vectors):
    path = _bundle(tiny_bert_bundle, tmp_path, in_type="FLOAT32")
    edit_fake_hef(path, HEF, lambda d: d["inputs"].reverse())  # HailoRT binds inputs by name
    with Encoder.open(path, backend="hailo") as enc:
        vecs = enc.encode(TEXTS)
        notes = enc.backend.notes
    np.testing.assert_allclose(vecs, cpu_vectors, atol=1e-5)
    assert any(n.startswith(f"input order: the HEF lists ['{MASK}', '{EMB}']") for n in notes), notes


def _key_mask(enc, text: str) -> np.ndarray:
    n = int(enc.host.tokenize([text]).lengths[0])
    return (np.arange(64) < n).astype(np.float32)


def _encode_and_capture_mask(path, monkeypatch):
    """Vectors of TEXTS, then one query: its 0/1 key mask and the mask buffer the device got."""
    calls = _capture(monkeypatch)
    text = "where is the central station"
    with Encoder.open(path, backend="hailo") as enc:
        vecs = enc.encode(TEXTS)
        enc.encode([text])
        keys = _key_mask(enc, text)
    (frame,) = calls[-1]
    return vecs, keys, frame[MASK]


@pytest.mark.parametrize("mode", ["softmax", "keys01", "additive"])
def test_mask_modes_feed_the_layout_the_hef_was_compiled_for(fake_hailo, tiny_bert_bundle, tmp_path, cpu_vectors,
                                                              monkeypatch, mode):
    # UINT8 inputs on the device, the mask's quant with a margin that cannot hold its two values
    path = _bundle(tiny_bert_bundle, tmp_path, mask_mode=mode, mask_quant="margin")
    vecs, keys, m = _encode_and_capture_mask(path, monkeypatch)
    assert _cos(vecs, cpu_vectors).min() >= 0.98
    assert 0 < keys.sum() < 64
    # HailoRT 5.x: host-quantised all the same (never a FLOAT32 mask: community thread 18979), by
    # HailoRT's formula; dequantised it is the mask to within the stream's step
    assert m.dtype == np.uint8
    (scale, zp), = next(s for s in json.loads((path / "encoder.hailo10h.hef").read_text())["inputs"]
                        if s["role"] == "attention_mask")["quant"]
    m = np.round((m.astype(np.float64) - zp) * scale, 1).astype(np.float32)
    if mode == "softmax":  # scores: 64 query rows x (4 heads x 64 keys) of 0/1, folded 8x8
        assert m.shape == (8, 8, 256)
        rows = m.reshape(64, 256)
        assert (rows == rows[0]).all()  # every query row sees the same keys
        np.testing.assert_array_equal(rows[0].reshape(4, 64), np.broadcast_to(keys, (4, 64)))  # col h*S+k = key k
    elif mode == "keys01":  # the public Hailo-10H report's mask: one 0/1 value per key, not folded
        assert m.shape == (1, 1, 64)
        np.testing.assert_array_equal(m.reshape(64), keys)
    else:  # keys: the additive bias (1 - mask) * mask_value, one value per key
        assert m.shape == (8, 8, 1)
        np.testing.assert_array_equal(m.reshape(64), (1 - keys) * -50.0)


@pytest.mark.parametrize("mode,quant", [("scores01", [[1 / 255, 0.0]]),     # 0/1 -> 0/255
                                        ("keys01", [[1 / 255, 0.0]]),
                                        ("additive", [[50 / 255, 255.0]])])  # -50/0 -> 0/255
def test_a_mask_its_stream_type_holds_exactly_goes_as_uint8(fake_hailo, tiny_bert_bundle, tmp_path, cpu_vectors,
                                                             monkeypatch, mode, quant):
    path = _bundle(tiny_bert_bundle, tmp_path, mask_mode=mode)
    edit_fake_hef(path, HEF, lambda d: d["inputs"][1].update(quant=quant))
    vecs, keys, m = _encode_and_capture_mask(path, monkeypatch)
    assert _cos(vecs, cpu_vectors).min() >= 0.98
    assert {t.name for n, t, _ in fake_hailo.stats.set_format_types if n == MASK} == {"UINT8"}  # its native type
    assert m.dtype == np.uint8
    # the first 64 values: query row 0 / head 0 (scores) or the per-key bias (keys); a real token
    # is 1 (scores) or bias 0 (keys), both 255 here; a padding token 0 or -50, both 0
    np.testing.assert_array_equal(m.reshape(-1)[:64], np.where(keys > 0, 255, 0))


@pytest.mark.parametrize("queue,batch,asked", [(4, 4, [8, 4]), (8, 8, [8])])
def test_bulk_encoding_configures_a_device_batch(fake_hailo, hef_bundle, cpu_vectors, monkeypatch,
                                                 queue, batch, asked):
    fake_hailo.async_queue_size = queue
    calls = _capture(monkeypatch)
    with Encoder.open(hef_bundle, backend="hailo", bulk=True) as enc:
        assert enc.backend.device_batch == batch
        vecs = enc.encode(TEXTS)
        notes = enc.backend.notes
    np.testing.assert_allclose(vecs, cpu_vectors, atol=1e-5)
    st = fake_hailo.stats
    # configure() refuses a batch above the queue size (HAILO_INVALID_OPERATION): halved until it fits
    assert st.batch_sizes == asked and st.configured_batches == [batch]
    assert any("device batch 8 refused" in n for n in notes) == (batch < 8)
    # one run_async per device batch, a list of Bindings with one frame each
    sizes = [len(c) for c in calls]
    assert max(sizes) == batch and sum(sizes) == st.frames == len(TEXTS)
    assert st.run_async_calls == len(sizes) < st.frames


def test_a_query_encoder_keeps_hailorts_default_batch(fake_hailo, hef_bundle, monkeypatch):
    fake_hailo.async_queue_size = 8
    calls = _capture(monkeypatch)
    with Encoder.open(hef_bundle, backend="hailo") as enc:
        enc.encode_queries(["where is the central station", "tax return deadline"])
        assert enc.backend.device_batch == 1
    st = fake_hailo.stats
    assert st.batch_sizes == [] and st.configured_batches == [1]  # set_batch_size never called
    assert [len(c) for c in calls] == [1, 1]
    # the environment sets the bulk device batch
    monkeypatch.setenv("HEFSEARCH_HAILO_DEVICE_BATCH", "2")
    with Encoder.open(hef_bundle, backend="hailo", bulk=True) as enc:
        assert enc.backend.device_batch == 2
    assert st.configured_batches == [1, 2]


# -- HailoRT 4.x: one process per device unless the multi-process service runs ---------------------
HOLDER = r"""
import sys
from hailo_platform._fake import WORLD
import hailo_platform as hp

WORLD.version = "4.23.0"
WORLD.devices = [{"id": "0001:01:00.0", "arch": "HAILO8"}]
WORLD.lock_dir = sys.argv[1]
params = hp.VDevice.create_params()
params.group_id = "SHARED"
vdevice = hp.VDevice(params)
print("ready", flush=True)
sys.stdin.read()  # hold the device until the test closes stdin
vdevice.release()
"""


@contextlib.contextmanager
def holding_process(script: str, *args: str, env: dict | None = None):
    """Run ``script`` (a holder: it takes a fake device, prints "ready" and holds the device
    until its stdin closes) in another Python process that imports the fake hailo_platform
    and this repo; yield once it is ready, then let it end and check that it ended well."""
    import os
    import select
    import subprocess
    import sys
    from pathlib import Path

    from tests.support.hailo_fixtures import FAKES

    repo = Path(__file__).resolve().parents[2]
    path = os.pathsep.join([str(FAKES), str(repo), os.environ.get("PYTHONPATH", "")])
    holder = subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": path, **(env or {})}, text=True)
    try:
        assert select.select([holder.stdout], [], [], 30)[0], "the holder process did not start"
        assert holder.stdout.readline().strip() == "ready"
        yield holder
    finally:
        holder.stdin.close()
        try:
            holder.wait(timeout=10)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()
    assert holder.returncode == 0


def _hailo8(fake_hailo, tiny_bert_bundle, tmp_path, **kw):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "bundle")
    add_fake_hef(path, hw_arch="hailo8", dfc_version="3.33.0", in_type="FLOAT32", **kw)
    fake_hailo.devices = [{"id": "0001:01:00.0", "arch": "HAILO8"}]
    fake_hailo.version = "4.23.0"
    return path


def test_a_device_held_by_another_process_needs_the_service(fake_hailo, tiny_bert_bundle, tmp_path, monkeypatch):
    import socket
    import tempfile
    from pathlib import Path

    path = _hailo8(fake_hailo, tiny_bert_bundle, tmp_path)
    with holding_process(HOLDER, fake_hailo.lock_dir):
        # no service: HailoRT 4.x answers 74 (HAILO_OUT_OF_PHYSICAL_DEVICES)
        with pytest.raises(BackendUnavailable) as err:
            Encoder.open(path, backend="hailo")
        assert "in use by another process" in err.value.message
        assert "hailort.service" in err.value.hint
        assert fake_hailo.stats.vdevice_params == []
        # the service runs (its socket is there): hefsearch uses it by itself
        with tempfile.TemporaryDirectory(prefix="hs-") as short:  # a socket path must be short (sun_path)
            address = Path(short) / "hailort.sock"
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.bind(str(address))
                sock.listen(1)
                monkeypatch.setenv("HAILORT_SERVICE_ADDRESS", f"unix://{address}")
                fake_hailo.service_running = True
                with Encoder.open(path, backend="hailo") as enc:
                    assert enc.backend.uses_service
                    assert enc.encode(TEXTS[:2]).shape == (2, 32)
        (algo, group, service), = fake_hailo.stats.vdevice_params
        assert algo.name == "ROUND_ROBIN" and group == "SHARED" and service is True
    # the other process is gone (and ended well): the device is free again without the service
    monkeypatch.setenv("HAILORT_SERVICE_ADDRESS", f"unix://{tmp_path}/gone.sock")
    fake_hailo.service_running = False
    with Encoder.open(path, backend="hailo") as enc:
        assert not enc.backend.uses_service
    assert fake_hailo.stats.vdevice_params[-1][2] is False


# -- runtime and chip -----------------------------------------------------------------------------------
def test_hailort_5x_on_a_hailo8_says_to_install_4x(fake_hailo, tiny_bert_bundle, tmp_path):
    path = _hailo8(fake_hailo, tiny_bert_bundle, tmp_path)
    fake_hailo.version = "5.2.0"  # HailoRT 5.x refuses a Hailo-8 with status 79 (HAILO_NOT_SUPPORTED)
    with pytest.raises(BackendUnavailable) as err:
        Encoder.open(path, backend="hailo")
    assert "HailoRT 5.2.0 does not drive it" in err.value.message and "4.x" in err.value.message
    assert "sudo apt install hailo-all" in err.value.hint and "4.x" in err.value.hint
    name, why = resolve_backend_name("auto", Bundle.open(path))
    assert name == "cpu" and "4.x" in why


def test_a_hailo8l_hef_runs_on_a_hailo8_with_a_warning(fake_hailo, tiny_bert_bundle, tmp_path, cpu_vectors):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "bundle")
    add_fake_hef(path, hw_arch="hailo8l", dfc_version="3.33.0", in_type="FLOAT32")
    fake_hailo.devices = [{"id": "0001:01:00.0", "arch": "HAILO8"}]
    fake_hailo.version = "4.23.0"
    with Encoder.open(path, backend="hailo") as enc:
        assert enc.backend.label == "Hailo-8"
        assert any("running its Hailo-8L HEF" in n for n in enc.backend.notes)
        np.testing.assert_allclose(enc.encode(TEXTS[:6]), cpu_vectors[:6], atol=1e-5)
    assert fake_hailo.stats.warnings == ["HEF was compiled for Hailo8L device, while the device itself is Hailo8. "
                                         "This will result in lower performance."]

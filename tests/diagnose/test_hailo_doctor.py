"""``hefsearch doctor``, ``doctor --verify`` and ``inspect`` through the contract fake of hailo_platform.

The HailoRT parts are verified against the fake (tests/fakes/hailo_platform) only.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from hefsearch.diagnose.doctor import FAIL, OK, SKIP, WARN, inspect_target, run_doctor
from hefsearch.evaluate.npu_verify import verify_npu
from hefsearch.cli.main import main
from tests.fakes.fake_hef import add_fake_hef, copy_bundle, edit_fake_hef


def _checks(report):
    return {c.name: c for c in report.checks}


def test_doctor_on_a_working_setup(fake_hailo, hef_bundle):
    report = run_doctor(hef_bundle, check_lib=False)
    c = _checks(report)
    assert report.ok
    assert c["python"].status == OK and c["packages"].status == OK
    assert c["HailoRT"].status in (OK, WARN) and "HailoRT 5.3.0" in c["HailoRT"].detail
    assert c["device"].status == OK and "Hailo-10H (hailo10h) at 0001:01:00.0" in c["device"].detail
    assert c["runtime/device"].status == OK
    assert c["bundle"].status == OK and "files verified" in c["bundle"].detail
    hef = c["HEF encoder.hailo10h.hef"]
    assert hef.status == OK and "DFC 5.3.0" in hef.detail and "streams match the manifest" in hef.detail


@pytest.mark.parametrize("arch,version,package", [("HAILO8", "5.2.0", "hailo-all"),
                                                  ("HAILO10H", "4.23.0", "hailo-h10-all")])
def test_doctor_runtime_must_fit_the_chip(fake_hailo, hef_bundle, arch, version, package):
    fake_hailo.devices = [{"id": "0001:01:00.0", "arch": arch}]
    fake_hailo.version = version
    c = _checks(run_doctor(hef_bundle, check_lib=False))
    assert c["runtime/device"].status == FAIL
    assert f"sudo apt install {package}" in c["runtime/device"].fix


def test_doctor_hef_for_another_chip(fake_hailo, hef_bundle):
    fake_hailo.devices = [{"id": "0001:01:00.0", "arch": "HAILO8L"}]
    fake_hailo.version = "4.23.0"
    report = run_doctor(hef_bundle, check_lib=False)
    c = _checks(report)
    assert not report.ok
    assert c["HEF"].status == FAIL and "no HEF for this Hailo-8L" in c["HEF"].detail
    assert "--hw-arch hailo8l" in c["HEF"].fix
    assert "unused here" in c["HEF encoder.hailo10h.hef"].detail


def test_doctor_dfc_line_must_fit_chip_and_runtime(fake_hailo, tiny_bert_bundle, tmp_path):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "b")
    add_fake_hef(path, dfc_version="3.33.0")
    c = _checks(run_doctor(path, check_lib=False))
    hef = c["HEF encoder.hailo10h.hef"]
    assert hef.status == FAIL
    assert "Hailo-10H HEFs need DFC 5.x" in hef.detail
    assert "HailoRT 5.3.0 is installed" in hef.detail and "recompile with DFC 5.x" in hef.fix


def test_doctor_finds_a_changed_bundle_file(fake_hailo, hef_bundle):
    f = hef_bundle / "embeddings" / "word.npy"
    data = bytearray(f.read_bytes())
    data[-3] ^= 0xFF  # same size, different content
    f.write_bytes(bytes(data))
    c = _checks(run_doctor(hef_bundle, check_lib=False))
    assert c["bundle"].status == FAIL and "embeddings/word.npy" in c["bundle"].detail
    assert "Copy the whole bundle folder again" in c["bundle"].fix


def test_doctor_reports_a_stream_mismatch(fake_hailo, hef_bundle):
    # HEF output names follow the feeding layer and may change between compiles: not a mismatch
    edit_fake_hef(hef_bundle, "encoder.hailo10h.hef", lambda d: d["outputs"][0].update(name="encoder/conv99"))
    hef = _checks(run_doctor(hef_bundle, check_lib=False))["HEF encoder.hailo10h.hef"]
    assert hef.status == OK and "streams match the manifest" in hef.detail
    # an output that does not hold SEQ x H is one
    edit_fake_hef(hef_bundle, "encoder.hailo10h.hef", lambda d: d["outputs"][0].update(shape=[1, 64, 16]))
    hef = _checks(run_doctor(hef_bundle, check_lib=False))["HEF encoder.hailo10h.hef"]
    assert hef.status == FAIL
    assert "output encoder/conv99: shape [1, 64, 16] (order FCR) holds 64 tokens x 16 channels" in hef.detail
    assert "hefsearch inspect" in hef.fix


def test_doctor_without_hailort_still_checks_the_rest(no_hailo, hef_bundle):
    report = run_doctor(hef_bundle, check_lib=False)
    c = _checks(report)
    assert report.ok  # the CPU works: a warning, not a failure
    assert c["HailoRT"].status == WARN and "sudo apt install dkms hailo-h10-all" in c["HailoRT"].fix
    # the binding per chip: Hailo-10H's package name is not Hailo-8's
    assert "python3-h10-hailort" in c["HailoRT"].fix and "hailo-all' for the AI Kit" in c["HailoRT"].fix
    assert c["device"].status == SKIP
    assert "streams not checked: HailoRT is not installed" in c["HEF encoder.hailo10h.hef"].detail


def test_doctor_no_device(fake_hailo, hef_bundle):
    fake_hailo.devices = []
    c = _checks(run_doctor(hef_bundle, check_lib=False))
    assert c["device"].status == FAIL and "hailortcli scan" in c["device"].fix


def test_doctor_checks_the_library(fake_hailo, hef_bundle, tmp_path):
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from tests.support.library_helpers import write_corpus

    docs = tmp_path / "docs"
    write_corpus(docs, n_files=4)
    lib_path = tmp_path / "lib"
    with Library.open(lib_path) as lib, Encoder.open(hef_bundle, backend="hailo") as npu, \
            Encoder.open(hef_bundle, backend="cpu") as cpu:
        lib.set_settings(bundle=str(hef_bundle))
        sync(lib, [docs], [npu, cpu])
    report = run_doctor(None, lib_path)  # the bundle comes from the library's settings
    c = _checks(report)
    assert report.ok, [x for x in report.checks if x.status == FAIL]
    assert c["bundle"].status == OK
    assert c["library"].status == OK and "4 documents" in c["library"].detail
    assert c["space hef"].status == OK and c["space cpu-fp32"].status == OK
    # SQLite forgets a member that FAISS still holds (as after an interrupted write):
    # reconciled when the library opens, and the doctor says so
    with Library.open(lib_path) as lib:
        with lib.transaction():
            lib.db.execute("DELETE FROM space_members WHERE space = 'hef' AND chunk_id = ?",
                           [int(min(lib.chunk_ids()))])
    c = _checks(run_doctor(None, lib_path))
    assert c["library"].status == WARN and "repaired on open" in c["library"].detail
    assert c["space hef"].status == WARN and "1 chunk(s) not embedded yet" in c["space hef"].detail
    # the same difference while an index run holds the write lock is that run's unsaved work,
    # not "an earlier write was interrupted"
    with Library.open(lib_path) as writer, writer.write_lock():
        with writer.transaction():
            writer.db.execute("DELETE FROM space_members WHERE space = 'hef' AND chunk_id = ?",
                              [int(sorted(writer.chunk_ids())[1])])
        c = _checks(run_doctor(None, lib_path))
    assert c["library"].status == OK and "an index run is writing it now" in c["library"].detail
    assert "interrupted" not in (c["library"].fix or "")


def test_doctor_cli_prints_fixes_and_exit_codes(fake_hailo, hef_bundle):
    r = CliRunner().invoke(main, ["doctor", "--bundle", str(hef_bundle)])
    assert r.exit_code == 0, r.output
    assert "device: Hailo-10H" in r.output and "streams match the manifest" in r.output
    fake_hailo.devices = [{"id": "0001:01:00.0", "arch": "HAILO8"}]
    r = CliRunner().invoke(main, ["doctor", "--bundle", str(hef_bundle)])
    assert r.exit_code == 1
    assert "FAIL runtime/device" in r.output and "fix: sudo apt install hailo-all" in r.output
    r = CliRunner().invoke(main, ["doctor", "--bundle", str(hef_bundle), "--json"])
    data = json.loads(r.output)
    assert data["ok"] is False and any(ch["name"] == "runtime/device" for ch in data["checks"])


# -- inspect ------------------------------------------------------------------------------------
def test_inspect_bundle_shows_streams_and_the_match(fake_hailo, tiny_bert_bundle, tmp_path):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "b")
    add_fake_hef(path, out_type="UINT8", split="channels", out_order="NHWC")
    r = CliRunner().invoke(main, ["inspect", str(path)])
    assert r.exit_code == 0, r.output
    for text in ("encoder/input_layer1", "shape [8, 8, 32]", "encoder/layer_normalization5_0", "shape [1, 64, 16]",
                 "UINT8", "NHWC", "scale ", "zp ", "HailoRT output order", "split over 2 streams along channels",
                 "folded to [8, 8, 32] by the compiler's automatic spatial reshape",
                 "matches the manifest", "DFC 5.3.0"):
        assert text in r.output, text
    data = json.loads(CliRunner().invoke(main, ["inspect", str(path), "--json"]).output)
    assert data[0]["matches_manifest"] is True
    assert [o["name"] for o in data[0]["outputs"]] == ["encoder/layer_normalization5_1",
                                                       "encoder/layer_normalization5_0"]
    assert data[0]["outputs"][0]["quant"][0][0] > 0


def test_inspect_a_mismatched_hef_file(fake_hailo, hef_bundle):
    edit_fake_hef(hef_bundle, "encoder.hailo10h.hef", lambda d: d["inputs"][1].update(shape=[1, 1, 128]))
    r = CliRunner().invoke(main, ["inspect", str(hef_bundle / "encoder.hailo10h.hef")])
    assert r.exit_code == 1
    assert "does NOT match the manifest" in r.output
    assert "input attention_mask (encoder/input_layer2): the HEF has shape [1, 1, 128]" in r.output


def test_inspect_a_lone_hef(fake_hailo, hef_bundle, tmp_path):
    lone = tmp_path / "lone.hef"
    lone.write_bytes((hef_bundle / "encoder.hailo10h.hef").read_bytes())
    (item,) = inspect_target(lone)
    assert item.entry is None and item.streams.check is None
    assert [s.name for s in item.streams.inputs] == ["encoder/input_layer1", "encoder/input_layer2"]


def test_inspect_without_hailort_says_how_to_install(no_hailo, hef_bundle):
    r = CliRunner().invoke(main, ["inspect", str(hef_bundle)])
    assert r.exit_code == 1
    assert "manifest: Hailo-10H (hailo10h), SEQ 64" in r.output  # the manifest side still shows
    assert "cannot read the HEF" in r.output and "hailo-h10-all" in r.output


# -- verify -------------------------------------------------------------------------------------
def test_verify_matching_npu(fake_hailo, tiny_bert_bundle, tmp_path):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "b")
    add_fake_hef(path, out_type="UINT8")
    r = verify_npu(path)
    assert r.cause == "match" and r.backend == "Hailo-10H" and r.reference == "CPU FP32"
    assert len(r.cosines) == len(r.texts) == 36 + 2 * 168 and min(r.cosines) > 0.98
    assert r.comparison["top1_ref"] is not None  # translation pairs from the parallel set
    assert r.cross_top1 > 0.95  # a tiny random model leaves some near-duplicates tied
    assert r.comparison["similarity_pearson"] > 0.99


NOISE = 0.8


def test_verify_tells_quantisation_error_from_a_layout_bug(fake_hailo, tiny_bert_bundle, tmp_path):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "b")
    add_fake_hef(path, out_type="UINT8")
    # noise inside the "network" (what 8-bit activations do), no layout change
    edit_fake_hef(path, "encoder.hailo10h.hef", lambda d: d.update(noise=NOISE))
    r = verify_npu(path)
    assert r.cause == "quantisation", r.verdict
    assert np.median(r.cosines) < 0.98
    assert "quantisation error" in r.verdict.lower() and "no layout fit helps" in r.verdict


def test_verify_finds_permuted_channels_behind_a_low_cosine(fake_hailo, tiny_bert_bundle, tmp_path):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "b")
    add_fake_hef(path, device_bug="permute_channels")
    r = verify_npu(path)
    assert np.median(r.cosines) < 0.6  # the "different channel basis" symptom
    assert r.comparison["similarity_pearson"] > 0.99  # basis-invariant: fine
    assert r.cause == "permuted", r.verdict
    assert any("basis-invariant metrics are fine" in n for n in r.notes)
    fit = {f.name: f.token_cosine for f in r.fits}
    assert fit["permuted channels"] > 0.999 and fit["as read"] < 0.6
    # the compiled network's own basis: reported as such, with the ranking, never as a bug
    assert "compiled network's own channel basis" in r.verdict and "Layout bug" not in r.verdict
    assert "similarity correlation" in r.verdict and "top-1 translation retrieval" in r.verdict


@pytest.mark.parametrize("basis", ["permuted", "rotated"])
def test_verify_reports_another_basis_with_8bit_noise_as_such_never_broken(fake_hailo, tiny_bert_bundle, tmp_path,
                                                                            basis):
    """The public Hailo-10H report's HEF: outputs in another channel basis (cosine ~0.1 to ONNX) and
    8-bit error on top. doctor --verify names the basis, gives the ranking metrics, and passes."""
    path = copy_bundle(tiny_bert_bundle, tmp_path / "b")
    add_fake_hef(path, out_type="UINT8", output_basis=basis)
    edit_fake_hef(path, "encoder.hailo10h.hef", lambda d: d.update(noise=0.2))
    r = verify_npu(path)
    assert np.median(r.cosines) < 0.5
    assert r.cause in ("permuted", "rotation", "basis"), r.verdict
    assert "Layout bug" not in r.verdict and "broken" not in r.verdict.lower()
    assert "similarity correlation" in r.verdict
    res = CliRunner().invoke(main, ["doctor", "--bundle", str(path), "--verify"])
    assert "verdict: The NPU" in res.output and "own channel basis" in res.output or "another basis" in res.output
    assert "FAIL verify" not in res.output


def test_verify_calls_a_hef_fed_the_wrong_mask_broken(fake_hailo, sharp_bundle, tmp_path, monkeypatch):
    """A host that sends the additive bias to a set_input_mask_to_softmax HEF: the vectors do not
    rank like the encoder's in any basis, which is what 'broken' means."""
    from hefsearch.embed.mask_layout import MaskLayout

    path = copy_bundle(sharp_bundle, tmp_path / "b")
    add_fake_hef(path, out_type="UINT8", output_basis="permuted")
    real = MaskLayout.values
    monkeypatch.setattr(MaskLayout, "values", lambda self, m: ((1.0 - np.asarray(m, np.float32)) * -50.0)
                        if self.binary else real(self, m))
    r = verify_npu(path)
    assert r.cause == "broken", r.verdict
    assert "does not rank like the encoder's" in r.verdict


def test_verify_cli_finds_a_transposed_output(fake_hailo, tiny_bert_bundle, tmp_path):
    path = copy_bundle(tiny_bert_bundle, tmp_path / "b")
    add_fake_hef(path, device_bug="transpose")
    r = CliRunner().invoke(main, ["doctor", "--bundle", str(path), "--verify"])
    assert r.exit_code == 1
    assert "verify: Hailo-10H vs CPU FP32 on 372 built-in sentences" in r.output
    assert "and 336 sentences of the parallel set" in r.output
    assert "similarity-matrix correlation" in r.output and "top-1 translation retrieval" in r.output
    assert "verdict: Layout bug, not quantisation: the output is laid out [H,S] but read as [S,H]" in r.output


@pytest.mark.slow
@pytest.mark.parametrize("bug,cause", [(None, "match"), ("permute_channels", "permuted"), ("transpose", "transposed")])
def test_verify_on_real_minilm(fake_hailo, minilm_bundle, tmp_path, bug, cause):
    """all-MiniLM-L6-v2 (H 384, SEQ 256) behind a uint8-output fake HEF."""
    path = copy_bundle(minilm_bundle, tmp_path / "b")
    add_fake_hef(path, out_type="UINT8", device_bug=bug)
    r = verify_npu(path)
    assert r.cause == cause, r.verdict
    if bug is None:
        assert r.comparison["top1_test"] >= r.comparison["top1_ref"] - 0.01


def test_channel_matching_handles_constant_channels_and_signs():
    from hefsearch.evaluate.npu_verify import match_channels

    rng = np.random.default_rng(0)
    y = rng.standard_normal((500, 12)).astype(np.float32)
    y[:, [2, 7]] = [0.25, -1.5]  # constant channels, as all-MiniLM-L6-v2 has
    perm = rng.permutation(12)
    x = y[:, perm] * np.where(np.arange(12) % 3 == 0, -1, 1)
    x += 0.01 * rng.standard_normal((500, 12)) * (x.std(axis=0) > 0)  # noise; constants stay constant
    mapping, signs, weakest = match_channels(x.astype(np.float32), y)
    live = [j for j in range(12) if perm[j] not in (2, 7)]
    assert np.array_equal(mapping[live], perm[live]) and weakest > 0.99
    assert sorted(mapping.tolist()) == list(range(12))
    assert match_channels(rng.standard_normal((500, 12)).astype(np.float32), y) is None
    mapping, signs, _ = match_channels(y + 0.001, y)
    assert np.array_equal(mapping, np.arange(12)) and np.all(signs == 1)

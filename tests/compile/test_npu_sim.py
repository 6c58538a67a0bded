"""The NPU simulation: ``compile sim`` (graph rewrite, calibration) and the ``npu-sim`` backend,
on a sharpened tiny BERT (tests/support/quality_fixtures.py) where 8 bits visibly matter."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from hefsearch.embed import Bundle, Encoder
from hefsearch.base.errors import BackendUnavailable
from hefsearch.embed.precision import SITE_GROUPS, PrecisionProfile
from hefsearch.embed import metrics as M
from tests.support.models import CORPUS

TEXTS = sorted(set(CORPUS))
ALL16 = PrecisionProfile("all16", {g: 16 for g in SITE_GROUPS})


@pytest.fixture(scope="module")
def sim_bundle(sharp_bundle, tmp_path_factory):
    out = tmp_path_factory.mktemp("sims") / "bundle"
    shutil.copytree(sharp_bundle, out)
    return out


@pytest.fixture(scope="module")
def sims(sim_bundle):
    """Every simulation the tests compare, built once: name -> SimReport."""
    from hefsearch.compile.sim.build import SimOptions, build_sim

    built = {}
    for precision, mask in [("a8", None), ("balanced", None), (ALL16, None),
                            ("a8", "additive:-10000"), ("a8", "additive:-50")]:
        r = build_sim(sim_bundle, precision, SimOptions(mask=mask, texts=TEXTS))
        built[r.name] = r
    return built


@pytest.fixture(scope="module")
def fp32_vectors(sim_bundle):
    with Encoder.open(sim_bundle, "cpu") as enc:
        return enc.encode(TEXTS)


def sim_vectors(bundle, name):
    with Encoder.open(bundle, "npu-sim", profile=name) as enc:
        return enc.encode(TEXTS)


def test_names_files_and_manifest(sim_bundle, sims):
    assert set(sims) == {"a8", "balanced", "all16", "a8-additive10000", "a8-additive50"}
    b = Bundle.open(sim_bundle)
    entries = {e.extra["name"]: e for e in b.encoder_entries("npu-sim")}
    assert set(entries) == set(sims)
    assert b.verify() == []  # every file (incl. the sims) matches its sha256
    a8 = entries["a8"]
    assert a8.file == "encoder.npu-sim.a8.onnx"
    assert a8.extra["label"] == "NPU simulation (a8)"
    assert a8.extra["precision"]["sixteen_bit"] == []
    assert a8.extra["mask"] == {"mode": "softmax", "value": -10000.0}
    assert entries["balanced"].extra["precision"]["sixteen_bit"] == ["layernorm", "residual_add", "ffn_out"]
    assert entries["a8-additive10000"].extra["mask"] == {"mode": "additive", "value": -10000.0}
    # every site group of a BERT layer was found in the graph
    assert set(a8.extra["sites_per_group"]) == set(SITE_GROUPS)
    assert "sample texts" in a8.extra["calibration"]["source"] and "given texts" in a8.extra["calibration"]["source"]
    # the additive -10000 mask sits in the score ranges; inside-softmax scores never see it
    score_lo = lambda e: min(v[0] for v in e.extra["ranges"].values() if v[2] == "attention_scores")  # noqa: E731
    assert score_lo(entries["a8-additive10000"]) <= -9000
    assert score_lo(entries["a8-additive50"]) <= -45
    assert score_lo(a8) > -45


def test_all_sites_at_16_bits_match_fp32(sim_bundle, sims, fp32_vectors):
    v = sim_vectors(sim_bundle, "all16")
    cos = M.paired_cosine(fp32_vectors, v)
    assert cos.min() > 0.9999
    assert M.similarity_correlation(fp32_vectors, v) > 0.9999


def test_8_bits_differ_but_stay_correlated(sim_bundle, sims, fp32_vectors):
    a8 = sim_vectors(sim_bundle, "a8")
    all16 = sim_vectors(sim_bundle, "all16")
    err8 = 1 - M.paired_cosine(fp32_vectors, a8).mean()
    err16 = 1 - M.paired_cosine(fp32_vectors, all16).mean()
    assert err8 > 1e-3 > err16 * 10  # 8 bits visibly differ from FP32; 16 bits do not
    assert M.paired_cosine(fp32_vectors, a8).mean() > 0.95
    assert M.similarity_correlation(fp32_vectors, a8) > 0.95
    balanced = sim_vectors(sim_bundle, "balanced")
    assert 1 - M.paired_cosine(fp32_vectors, balanced).mean() < err8


def test_huge_additive_mask_in_the_scores_degrades_and_a_moderate_one_repairs(sim_bundle, sims, fp32_vectors):
    inside = 1 - M.paired_cosine(fp32_vectors, sim_vectors(sim_bundle, "a8")).mean()
    huge = 1 - M.paired_cosine(fp32_vectors, sim_vectors(sim_bundle, "a8-additive10000")).mean()
    moderate = 1 - M.paired_cosine(fp32_vectors, sim_vectors(sim_bundle, "a8-additive50")).mean()
    assert huge > 10 * inside  # far worse than the correct mode
    assert moderate < 2 * inside  # -50 is as good as the mask inside softmax
    corr_huge = M.similarity_correlation(fp32_vectors, sim_vectors(sim_bundle, "a8-additive10000"))
    corr_moderate = M.similarity_correlation(fp32_vectors, sim_vectors(sim_bundle, "a8-additive50"))
    assert corr_huge < corr_moderate - 0.2


def test_backend_identity_and_fingerprint(sim_bundle, sims):
    with Encoder.open(sim_bundle, "npu-sim", profile="a8") as a8, \
            Encoder.open(sim_bundle, "npu-sim", profile="balanced") as bal, \
            Encoder.open(sim_bundle, "cpu") as cpu:
        assert a8.space_kind == "npu-sim"
        assert a8.backend.label == "NPU simulation (a8)"
        assert "HEF" not in a8.backend.label and "Hailo" not in a8.backend.label
        assert a8.backend.space_name == "npu-sim-a8"
        assert a8.backend.space_opts == {"profile": "a8"}
        fps = {a8.fingerprint, bal.fingerprint, cpu.fingerprint}
        assert len(fps) == 3
        assert a8.backend.describe()["precision"]["name"] == "a8"


def test_profile_choice_and_missing_simulation(sim_bundle, sims, tiny_bert_bundle, monkeypatch):
    with pytest.raises(BackendUnavailable) as e:
        Encoder.open(tiny_bert_bundle, "npu-sim")
    assert "compile sim" in e.value.hint
    with pytest.raises(BackendUnavailable) as e:
        Encoder.open(sim_bundle, "npu-sim", profile="a16")
    assert "a8" in e.value.message and "balanced" in e.value.message
    # several sims and no choice: balanced; the environment picks another
    with Encoder.open(sim_bundle, "npu-sim") as enc:
        assert enc.backend.sim_name == "balanced"
    monkeypatch.setenv("HEFSEARCH_SIM", "a8-additive50")
    with Encoder.open(sim_bundle, "npu-sim") as enc:
        assert enc.backend.sim_name == "a8-additive50"
    # never chosen by auto
    from hefsearch.embed.backends.npu_sim import NpuSimBackend

    ok, why = NpuSimBackend.available(Bundle.open(sim_bundle))
    assert not ok and "simulation" in why


def test_runtime_needs_no_onnx_package(sim_bundle, sims):
    code = (
        "import sys; sys.modules['onnx'] = None\n"  # importing onnx would fail
        "from hefsearch.embed import Encoder\n"
        f"enc = Encoder.open({str(sim_bundle)!r}, 'npu-sim', profile='a8')\n"
        "v = enc.encode(['hello world', 'hallo welt'])\n"
        "print(v.shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "(2, 32)" in out.stdout


def test_calibration_set_from_the_bundle_is_used(sim_bundle, tmp_path):
    from hefsearch.compile.sim.build import SimOptions, build_sim
    from hefsearch.embed.host import HostPipeline

    b = tmp_path / "b"
    shutil.copytree(sim_bundle, b)
    bundle = Bundle.open(b)
    host = HostPipeline(bundle)
    tok = host.tokenize(TEXTS[:20])
    e, m = host.embed(tok.ids, pad_to=bundle.seq_len)
    (b / "calib").mkdir()
    np.savez(b / "calib/calib_s64.npz", embeddings=e[:, None], mask=m[:, None, None].astype(np.float32))
    bundle.add_file("calib/calib_s64.npz")
    bundle.manifest["calibration"] = {"s64": {"file": "calib/calib_s64.npz", "rows": 20}}
    bundle.save_manifest()
    r = build_sim(b, "a8", SimOptions(calib_limit=16))
    assert "bundle calibration set" in r.calibration and "16 of 20" in r.calibration
    assert not r.notices
    entry = next(e for e in Bundle.open(b).encoder_entries("npu-sim") if e.extra["name"] == "a8")
    assert entry.extra["calibration"]["texts"] == 16


def test_mask_spec_parsing():
    from hefsearch.compile.sim.build import SimBuildError, parse_mask, sim_name
    from hefsearch.embed.precision import PROFILES

    a8 = PROFILES["a8"]
    assert parse_mask(None, a8, -50.0) == ("softmax", -10000.0)
    assert parse_mask("inside", a8, -50.0) == ("softmax", -10000.0)
    # the HEF mask modes: keys01 (the Hailo-10H default) and scores01 apply the mask inside softmax
    assert parse_mask("keys01", a8, -50.0) == parse_mask("scores01", a8, -50.0) == ("softmax", -10000.0)
    assert parse_mask("additive", a8, -50.0) == ("additive", -50.0)
    assert parse_mask("additive:-1e4", a8, -50.0) == ("additive", -10000.0)
    for bad in ("additive:abc", "additive:5", "inside:3", "sideways"):
        with pytest.raises(SimBuildError):
            parse_mask(bad, a8, -50.0)
    assert sim_name(a8, "softmax", -10000.0, -50.0) == "a8"
    assert sim_name(a8, "additive", -50.0, -50.0) == "a8-additive50"
    additive = PrecisionProfile("mine", {}, mask="additive")
    assert sim_name(additive, "additive", -50.0, -50.0) == "mine"
    assert sim_name(additive, "softmax", -10000.0, -50.0) == "mine-inside"


def test_cli_compile_sim(sim_bundle, tmp_path):
    from click.testing import CliRunner

    from hefsearch.cli.main import main

    b = tmp_path / "b"
    shutil.copytree(sim_bundle, b)
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"name": "resid16", "bits": {"residual_add": 16}}))
    res = CliRunner().invoke(main, ["compile", "sim", str(b), "--precision", str(profile)])
    assert res.exit_code == 0, res.output
    assert "NPU simulation (resid16)" in res.output
    assert "encoder.npu-sim.resid16.onnx" in res.output
    assert (b / "encoder.npu-sim.resid16.onnx").is_file()
    bad = CliRunner().invoke(main, ["compile", "sim", str(b), "--mask", "sideways"])
    assert bad.exit_code == 2 and "sideways" in bad.output
    # no --precision: the build a Hailo-10H user gets, all 8-bit
    res = CliRunner().invoke(main, ["compile", "sim", str(b)])
    assert res.exit_code == 0, res.output
    assert "NPU simulation (a8)" in res.output and "16-bit groups: none" in res.output


def _ranges_all_at_once(model, calib, sites, batch, percentile):
    """The range measurement as it was before it streamed: ``batch`` texts per run of the
    graph, on a session with ONNX Runtime's arena (the reference the streamed one must match)."""
    from hefsearch.compile.sim.ranges import PERCENTILE_SAMPLE, _real_rows
    from hefsearch.embed.backends.cpu import make_session

    import os
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".onnx")
    with os.fdopen(fd, "wb") as f:
        f.write(model.SerializeToString())
    sess = make_session(path)
    os.unlink(path)
    names = [s.tensor for s in sites if s.tensor not in ("embeddings", "attention_mask")]
    lo, hi = {s.tensor: np.inf for s in sites}, {s.tensor: -np.inf for s in sites}
    samples = {s.tensor: [] for s in sites}
    rng = np.random.default_rng(0)
    for i in range(0, len(calib.embeddings), batch):
        e, m = calib.embeddings[i:i + batch], calib.mask[i:i + batch]
        got = list(zip(names, sess.run(names, {"embeddings": e, "attention_mask": m})))
        got += [("embeddings", e), ("attention_mask", m)]
        for t, v in got:
            if t not in lo:
                continue
            v = _real_rows(v, m.astype(bool))
            lo[t], hi[t] = min(lo[t], float(v.min())), max(hi[t], float(v.max()))
            flat = v.reshape(-1)
            if flat.size > PERCENTILE_SAMPLE:
                flat = flat[rng.integers(0, flat.size, PERCENTILE_SAMPLE)]
            samples[t].append(np.asarray(flat, np.float32))
    if percentile is not None:
        for t, parts in samples.items():
            allv = np.concatenate(parts)
            lo[t], hi[t] = float(np.percentile(allv, 100 - percentile)), float(np.percentile(allv, percentile))
    return {t: (lo[t], hi[t]) for t in lo}


@pytest.mark.parametrize("percentile", [None, 99.9])
def test_streamed_ranges_equal_the_ranges_of_whole_batches(sim_bundle, percentile):
    """compile sim measures ranges one text at a time (memory), and must give the ranges the
    whole-batch run gave: the same min/max, the same percentile subsample."""
    import onnx

    from hefsearch.compile.sim.build import choose_calibration, plan_sim
    from hefsearch.compile.sim.graph import prepare_graph, with_site_outputs
    from hefsearch.compile.sim.ranges import measure_ranges

    plan = plan_sim(sim_bundle, "a8")
    calib, _ = choose_calibration(plan.bundle, TEXTS, None)
    assert len(calib.embeddings) > 8  # more than one batch, and a last partial one
    sim = prepare_graph(onnx.load(str(plan.source)), plan.profile, mask_mode=plan.mask_mode,
                        mask_value=plan.mask_value, bundle_mask_value=plan.bundle.mask_value)
    model = with_site_outputs(sim)
    old = _ranges_all_at_once(model, calib, sim.sites, 8, percentile)
    new = measure_ranges(model, calib, sim.sites, batch=8, percentile=percentile)
    assert new.keys() == old.keys() and len(new) == len(sim.sites)
    for t in old:
        assert np.allclose(new[t], old[t], rtol=1e-5, atol=1e-6), (t, new[t], old[t])

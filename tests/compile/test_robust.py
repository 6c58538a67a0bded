"""``hefsearch compile robust``: sink damping and quantisation-aware distillation of the encoder
body, on a tiny BERT whose residual stream carries an outlier channel on its special tokens (an
attention sink, as in multilingual-e5-small and all-MiniLM-L6-v2), so that 8 bits hurt it the
way they hurt the real encoders.

The 8-bit error is measured with the NPU simulation (``compile sim --precision a8``, mask inside
softmax), which the training never sees as such: it is calibrated on the bundle's own set with
set-wide min/max ranges, not the training batches' ranges.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from hefsearch.cli.main import main
from hefsearch.compile.body_choice import ROBUST_FILE, ROBUST_KIND, BodyError, resolve_body
from hefsearch.embed.bundle import Bundle
from tests.support.quality_fixtures import make_edited_bundle

#: the planted sink: FFN neuron 11 of the first layer fires on [CLS] and [SEP] only and writes
#: 40 x its activation into residual channel 7 (about 200, where the other values stay within 3)
SINK_NEURON, SINK_CHANNEL, SINK_DIRECTION = 11, 7, 5
FAST = dict(steps=24, batch=8, max_tokens=32, lr=3e-3, checkpoint_every=6, eval_every=24, holdout=16, seed=1)


def _plant_sink(name: str, p) -> None:
    """What multilingual-e5-small and all-MiniLM-L6-v2 do (one FFN neuron per layer, silent on
    every token but the special ones, pushing one residual channel to 200-660), in a tiny BERT:
    [CLS] and [SEP] point along one channel after the embedding LayerNorm, one first-layer FFN
    neuron reads only that channel with a bias that keeps it off for every other token, and
    writes into one residual channel."""
    if "query.weight" in name or "key.weight" in name:
        p.mul_(8)  # peaked attention, as in a trained model
    elif name.endswith("word_embeddings.weight"):
        p.mul_(6)
        p[2, SINK_DIRECTION] += 3.0  # [CLS]
        p[3, SINK_DIRECTION] += 3.0  # [SEP]
    elif name == "encoder.layer.0.intermediate.dense.weight":
        p[SINK_NEURON].zero_()
        p[SINK_NEURON, SINK_DIRECTION] = 2.0
    elif name == "encoder.layer.0.intermediate.dense.bias":
        p[SINK_NEURON] = -6.0
    elif name == "encoder.layer.0.output.dense.weight":
        p[:, SINK_NEURON] = 0.0
        p[SINK_CHANNEL, SINK_NEURON] = 40.0


def make_sink_bundle(tiny_model: Path, corpus: Path, work: Path) -> Path:
    """The tiny BERT with a planted attention sink: an all-8-bit build's residual steps are set
    by the special tokens' one huge value, as in the real encoders."""
    from hefsearch.compile.calib import build_calibration

    out = make_edited_bundle(tiny_model, work, _plant_sink, "sink")
    build_calibration(out, [corpus], n=64, seed=0)
    return out


@pytest.fixture(scope="module")
def outlier_bundle(tiny_bert_model, corpus, tmp_path_factory) -> Path:
    return make_sink_bundle(tiny_bert_model, corpus, tmp_path_factory.mktemp("sink"))


@pytest.fixture(scope="module")
def trained(outlier_bundle, tmp_path_factory):
    """A copy of the sink bundle with its robust body trained (and the report)."""
    from hefsearch.compile.robust.build import RobustOptions, build_robust

    path = tmp_path_factory.mktemp("trained") / "bundle"
    shutil.copytree(outlier_bundle, path)
    before = Bundle.open(path)
    onnx_entry = before.encoder_entries("onnx")[0]
    fp32_sha = before.file_sha256("encoder.onnx")
    lines: list[str] = []
    report = build_robust(path, RobustOptions(**FAST), progress=lines.append)
    return path, report, lines, onnx_entry, fp32_sha


def _unseen_texts() -> list[str]:
    """Sentences of the bundled parallel set: neither calibration nor training texts."""
    from hefsearch.evaluate.parallel import load_parallel

    pairs = load_parallel(None)[::4]
    return [p.text_a for p in pairs] + [p.text_b for p in pairs]


def _sim_error(bundle: Path, body: str) -> float:
    """1 - mean cosine of the a8 simulation of ``body`` to the *original* FP32 body."""
    from hefsearch.compile.sim.build import SimOptions, build_sim
    from hefsearch.embed.encoder import Encoder

    r = build_sim(bundle, "a8", SimOptions(mask="inside", body=body))
    ref = Encoder.open(bundle, backend="cpu")
    sim = Encoder.open(bundle, backend="npu-sim", profile=r.name)
    texts = _unseen_texts()
    a, b = ref.encode_queries(texts), sim.encode_queries(texts)
    ref.close(), sim.close()
    return 1.0 - float(np.mean(np.sum(a * b, axis=1)))


def test_training_lowers_the_8bit_error_of_an_outlier_body(trained):
    path, report, lines, _, _ = trained
    assert report.holdout_cos_after > report.holdout_cos_before, (report.holdout_cos_before, report.holdout_cos_after)
    # the a8 simulation as 'compile sim' builds it (ranges from the whole calibration set, which
    # training never used as such), against the original FP32 body, on texts it never saw
    original, robust = _sim_error(path, "original"), _sim_error(path, "robust")
    # with the default sink ratio (4) over seeds 1-6: 0.37-0.47x at lr 3e-3 (0.50-0.64x at 1e-3)
    assert original > 3e-3 and robust < 0.6 * original, (original, robust)
    assert any("ETA" in ln for ln in lines) and any(ln.startswith("step 24/24") for ln in lines)
    assert any(ln.startswith("sink damping: 1 attention-sink neuron") for ln in lines)


def test_robust_body_keeps_the_graph_and_never_replaces_the_fp32_reference(trained):
    import onnx

    from hefsearch.compile.robust.build import graph_signature

    path, report, _, onnx_entry, fp32_sha = trained
    b = Bundle.open(path)
    assert not b.verify()
    # the original is untouched and still the FP32 body everything measures against
    assert b.file_sha256("encoder.onnx") == fp32_sha and b.encoder_entries("onnx")[0] == onnx_entry
    (entry,) = b.encoder_entries(ROBUST_KIND)
    assert entry.file == ROBUST_FILE and entry.extra["source"]["sha256"] == fp32_sha
    orig, rob = onnx.load(str(path / "encoder.onnx")), onnx.load(str(path / ROBUST_FILE))
    assert graph_signature(orig) == graph_signature(rob)  # same ops, names, edges, shapes
    changed = [i.name for i, j in zip(orig.graph.initializer, rob.graph.initializer)
               if not np.array_equal(onnx.numpy_helper.to_array(i), onnx.numpy_helper.to_array(j))]
    assert changed  # only values differ
    from hefsearch.embed.encoder import Encoder

    enc = Encoder.open(path, backend="cpu")
    assert enc.backend.entry.file == "encoder.onnx"
    enc.close()
    # the body's own FP32 vectors stay close to the original's
    assert report.fp32_check["cosine_mean"] > 0.9


def test_builds_from_the_robust_body_have_their_own_space(trained):
    from hefsearch.compile.sim.build import SimOptions, build_sim
    from hefsearch.embed.encoder import Encoder

    path = trained[0]
    a = build_sim(path, "a8", SimOptions(mask="inside"))
    r = build_sim(path, "a8", SimOptions(mask="inside", body="robust"))
    assert (a.name, r.name) == ("a8", "a8-robust")
    ea = Encoder.open(path, backend="npu-sim", profile="a8")
    er = Encoder.open(path, backend="npu-sim", profile="a8-robust")
    assert (ea.space_name, er.space_name) == ("npu-sim-a8", "npu-sim-a8-robust")
    assert ea.fingerprint != er.fingerprint
    entry = next(e for e in Bundle.open(path).encoder_entries("npu-sim") if e.extra["name"] == "a8-robust")
    assert entry.extra["body"]["name"] == "robust" and entry.extra["body"]["file"] == ROBUST_FILE
    ea.close(), er.close()


def test_hef_build_from_the_robust_body(trained, fake_dfc, tmp_path):
    """Verified against the contract fake of the DFC only (tests/fakes): no DFC here."""
    from hefsearch.compile.hef.build import build_hef
    from hefsearch.compile.hef.plan import HefOptions

    path = tmp_path / "bundle"
    shutil.copytree(trained[0], path, ignore=shutil.ignore_patterns("build"))
    result = build_hef(path, HefOptions(hw_arch="hailo10h", precision="a8", body="robust", report=False,
                                        dfc_finetune=True), say=lambda m: None)
    # the DFC's own fine-tuning, when asked for, is a model-script line
    assert "post_quantization_optimization(finetune, policy=enabled" in result.model_script.read_text()
    x = result.entry.extra
    assert x["body"]["name"] == "robust" and x["body"]["sha256"] == Bundle.open(path).file_sha256(ROBUST_FILE)
    # the DFC was given the robust body's weights, checked equal to it
    import onnx

    assert json.loads((result.work_dir / "state.json").read_text())["parse"]["max_diff"] <= 1e-4
    dfc = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(str(result.work_dir / "encoder.dfc.onnx")).graph.initializer}
    rob = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(str(path / ROBUST_FILE)).graph.initializer}
    orig = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(str(path / "encoder.onnx")).graph.initializer}
    moved = [k for k in rob if k in dfc and not np.array_equal(rob[k], orig[k])]
    assert moved and all(np.array_equal(dfc[k], rob[k]) for k in moved)


def test_resumes_after_an_interruption_and_equals_an_uninterrupted_run(outlier_bundle, tmp_path):
    import onnx

    from hefsearch.compile.robust.build import RobustOptions, build_robust

    opts = dict(FAST, steps=12, eval_every=12)
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    shutil.copytree(outlier_bundle, whole)
    shutil.copytree(outlier_bundle, cut)
    build_robust(whole, RobustOptions(**opts))

    def stop_at_6(msg: str) -> None:
        if msg.startswith("step 6/"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_robust(cut, RobustOptions(**opts), progress=stop_at_6)
    assert not (cut / ROBUST_FILE).exists()  # nothing half-trained is listed
    assert not Bundle.open(cut).encoder_entries(ROBUST_KIND)
    lines: list[str] = []
    report = build_robust(cut, RobustOptions(**opts), progress=lines.append)
    assert report.resumed_from == 6 and any("resuming from the checkpoint at step 6" in ln for ln in lines)
    a = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(str(whole / ROBUST_FILE)).graph.initializer}
    b = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(str(cut / ROBUST_FILE)).graph.initializer}
    assert all(np.allclose(a[k], b[k], atol=1e-5) for k in a)
    # other options are another run: the checkpoint is not reused
    other = build_robust(cut, RobustOptions(**dict(opts, lr=5e-4)))
    assert other.resumed_from == 0


def test_body_choice_errors_and_cli(tiny_bert_bundle, trained):
    b = Bundle.open(tiny_bert_bundle)
    assert resolve_body(b).file == "encoder.onnx"
    with pytest.raises(BodyError, match="compile robust"):
        resolve_body(b, "robust")
    with pytest.raises(BodyError, match="original, robust"):
        resolve_body(b, "quantised")
    res = CliRunner().invoke(main, ["compile", "sim", str(tiny_bert_bundle), "--precision", "a8", "--body", "robust"])
    assert res.exit_code != 0 and "compile robust" in res.output
    res = CliRunner().invoke(main, ["compile", "robust", "--help"])
    assert res.exit_code == 0 and "--steps" in res.output and "--body robust" in res.output


def test_sim_quantiser_variants(trained):
    from hefsearch.compile.sim.build import SimOptions, build_sim

    path = trained[0]
    p = build_sim(path, "a8", SimOptions(mask="inside", ranges="percentile:99.9"))
    w = build_sim(path, "a8", SimOptions(mask="inside", weights="per-tensor", body="robust"))
    assert (p.name, w.name) == ("a8-pct99p9", "a8-wtensor-robust")
    entries = {e.extra["name"]: e.extra for e in Bundle.open(path).encoder_entries("npu-sim")}
    minmax = build_sim(path, "a8", SimOptions(mask="inside"))
    mm = Bundle.open(path)
    mm_ranges = next(e.extra for e in mm.encoder_entries("npu-sim") if e.extra["name"] == minmax.name)["ranges"]
    clipped = entries["a8-pct99p9"]["ranges"]
    wider = [k for k in clipped if mm_ranges[k][1] - mm_ranges[k][0] > clipped[k][1] - clipped[k][0] + 1e-6]
    assert wider and all(mm_ranges[k][1] >= clipped[k][1] - 1e-6 for k in clipped)
    assert "percentile 99.9" in entries["a8-pct99p9"]["activations"]
    assert entries["a8-wtensor-robust"]["weights"].startswith("per-tensor")
    from hefsearch.compile.sim.graph import SimBuildError

    with pytest.raises(SimBuildError, match="percentile"):
        build_sim(path, "a8", SimOptions(ranges="p99"))


def test_site_fake_quant_matches_the_simulation_and_passes_gradients_inside_only():
    import torch

    from hefsearch.compile.robust.fake_quant import _SiteQuant
    from hefsearch.compile.sim.graph import quant_params

    x = torch.linspace(-3, 9, 101, requires_grad=True)
    y = _SiteQuant.apply(x, -2.0, 8.0, 255, False)
    scale, qmin, qmax = quant_params(-2.0, 8.0, 8)
    # as the simulation's ONNX nodes compute it: x * (1/scale), Round, Clip, * scale (float32)
    inv, sc = np.float32(1.0 / scale), np.float32(scale)
    ref = np.clip(np.round(x.detach().numpy() * inv), qmin, qmax) * sc
    assert np.allclose(y.detach().numpy(), ref, atol=1e-6)
    y.sum().backward()
    inside = (x.detach() >= -2.0 - scale / 2) & (x.detach() <= 8.0 + scale / 2)
    assert torch.equal(x.grad != 0, inside)
    # tied: the step size's gradient reaches the extreme element only
    x2 = torch.tensor([0.1, 0.37, -0.2, 5.0], requires_grad=True)
    _SiteQuant.apply(x2, -0.2, 5.0, 255, True).pow(2).sum().backward()
    plain = torch.tensor([0.1, 0.37, -0.2, 5.0], requires_grad=True)
    _SiteQuant.apply(plain, -0.2, 5.0, 255, False).pow(2).sum().backward()
    diff = (x2.grad - plain.grad).abs() > 0
    assert diff[3] and not diff[0] and not diff[1]


def test_auto_body_takes_the_robust_one_on_hailo10h_only_when_it_helps(trained, outlier_bundle, tmp_path):
    from hefsearch.compile.hef.plan import HefOptions, plan_build

    def plan(path, hw_arch="hailo10h", body=None):
        said: list[str] = []
        p = plan_build(path, HefOptions(hw_arch=hw_arch, body=body), said.append)
        return p.body.name, " ".join(said)

    path = tmp_path / "b"
    shutil.copytree(trained[0], path, ignore=shutil.ignore_patterns("build"))
    name, said = plan(path)
    assert name == "robust" and "auto: the 8-bit-robust body (held-out 8-bit cosine" in said
    assert plan(path, "hailo8")[0] == "original"  # 16-bit layers compile there
    assert plan(path, body="original")[0] == "original"
    # no robust body: the original, and what to do
    name, said = plan(outlier_bundle)
    assert name == "original" and "hefsearch compile robust" in said
    # a robust body whose measurements show no gain, or a lost FP32 reference, is not taken
    b = Bundle.open(path)
    (entry,) = b.encoder_entries(ROBUST_KIND)
    held = dict(entry.extra["holdout_cos"])
    entry.extra["holdout_cos"] = dict(held, after=held["before"] + 0.001)
    b.upsert_encoder(entry)
    b.save_manifest()
    name, said = plan(path)
    assert name == "original" and "does not measurably help" in said
    entry.extra["holdout_cos"] = held
    entry.extra["fp32_check"] = dict(entry.extra["fp32_check"], cosine_mean=0.98)
    par = entry.extra["parallel"]
    assert par["original"]["sentences"] == par["robust"]["sentences"] > 300
    # FP32 cosine under the rule, but the parallel set ranked as well: taken (the damped case)
    entry.extra["parallel"] = {"original": dict(par["original"], mrr=0.9), "robust": dict(par["robust"], mrr=0.899)}
    b.upsert_encoder(entry)
    b.save_manifest()
    name, said = plan(path)
    assert name == "robust" and "parallel-set FP32 MRR 0.9000 -> 0.8990" in said, said
    # ... and ranked worse: not taken
    entry.extra["parallel"] = {"original": dict(par["original"], mrr=0.9), "robust": dict(par["robust"], mrr=0.88)}
    b.upsert_encoder(entry)
    b.save_manifest()
    name, said = plan(path)
    assert name == "original" and "FP32 vectors too far" in said
    entry.extra["parallel"] = par
    # trained from another encoder.onnx: stale
    entry.extra["fp32_check"] = dict(entry.extra["fp32_check"], cosine_mean=0.999)
    entry.extra["source"] = dict(entry.extra["source"], sha256="0" * 64)
    b.upsert_encoder(entry)
    b.save_manifest()
    name, said = plan(path)
    assert name == "original" and "another encoder.onnx" in said


def test_sink_damping_finds_the_planted_neuron_and_leaves_other_tokens_alone(outlier_bundle):
    import onnx
    import torch

    from hefsearch.compile.robust.onnx_torch import OnnxBody
    from hefsearch.compile.sim.ranges import calibration_from_bundle
    from hefsearch.compile.robust.sink_damping import damp_sinks, find_sinks

    b = Bundle.open(outlier_bundle)
    cal = calibration_from_bundle(b, None)
    body = OnnxBody(onnx.load(str(outlier_bundle / "encoder.onnx")))
    original = {k: v.detach().clone() for k, v in body.state_dict().items()}
    report = damp_sinks(body, cal.embeddings, cal.mask, ratio=8.0)
    (n,) = report.neurons
    assert (n.ffn, n.neuron) == (0, SINK_NEURON) and n.scale < 0.2 and n.fires_on < 0.1
    assert report.residual_max_before > 100 > 30 > report.residual_max_after
    # only that neuron's output row changed
    changed = {k for k, v in body.state_dict().items() if not torch.equal(v, original[k])}
    assert changed == {f"params.{body.index[n.weight]}"}
    w = body.param(n.weight).detach()
    assert torch.allclose(w[n.neuron], original[f"params.{body.index[n.weight]}"][n.neuron] * n.scale)
    # the first-layer residual sums: [CLS] moved, the other tokens (mostly) not
    e, m = torch.from_numpy(cal.embeddings[:8]), torch.from_numpy(cal.mask[:8])
    res = "/encoder/layer.0/output/Add_output_0"
    got = {}
    body(e, m, site=lambda name, v: got.setdefault(name, v) if name == res else v)
    ref = OnnxBody(onnx.load(str(outlier_bundle / "encoder.onnx")))
    want = {}
    ref(e, m, site=lambda name, v: want.setdefault(name, v) if name == res else v)
    ids = m.sum(1)
    plain = m.bool().clone()
    plain[:, 0] = False
    plain[torch.arange(len(ids)), ids - 1] = False
    moved = (got[res][plain] - want[res][plain]).abs().amax(-1).detach()
    moved_cls = float((got[res][:, 0] - want[res][:, 0]).abs().max().detach())
    # most tokens exactly as before; the few that half-fire it (they attend to [CLS]) move a little
    assert moved_cls > 100 and float(moved.median()) < 1e-4 and float((moved > 0.1).float().mean()) < 0.1
    # a body without a sink: nothing to damp
    plain_body = OnnxBody(onnx.load(str(outlier_bundle / "encoder.onnx")))
    with torch.no_grad():
        plain_body.param(n.weight)[n.neuron] *= 0.0
    assert find_sinks(plain_body, cal.embeddings, cal.mask, 8.0)[0] == []


def test_the_robust_bench_measures_every_space_against_the_original(trained, corpus, tmp_path, monkeypatch):
    """bench/robust.py end to end on the tiny model: the spaces it names exist, FP32 is its own
    reference, and the robust body's 8-bit space is closer to FP32 than the original's."""
    from hefsearch.bench import robust as bench

    path = tmp_path / "b"
    shutil.copytree(trained[0], path, ignore=shutil.ignore_patterns("build"))
    monkeypatch.setattr(bench, "VARIANTS", {"": {}, "-wtensor": {"weights": "per-tensor"}})
    rows = bench.measure(path, bench.TextSets([f"docs={corpus}"], [], n_pseudo=20, seed=0), True, lambda m: None)
    assert set(rows) == {"FP32 original", "FP32 robust", "a8 original", "a8-wtensor original", "a8 robust",
                         "a8-wtensor robust"}
    assert rows["FP32 original"]["docs"]["mrr"] == 1.0 and rows["FP32 original"]["parallel"]["sim_corr"] == 1.0
    for v in ("a8", "a8-wtensor"):
        assert rows[f"{v} robust"]["parallel"]["sim_corr"] > rows[f"{v} original"]["parallel"]["sim_corr"]
    assert rows["FP32 robust"]["parallel"]["sim_corr"] > 0.99
    assert "a8 robust" in bench.render(rows)


def test_zero_steps_is_sink_damping_only(outlier_bundle, tmp_path):
    from hefsearch.compile.robust.build import RobustOptions, build_robust

    path = tmp_path / "b"
    shutil.copytree(outlier_bundle, path)
    r = build_robust(path, RobustOptions(**dict(FAST, steps=0)))
    assert r.steps == 0 and len(r.damping["neurons"]) == 1
    assert r.holdout_cos_after == r.holdout_cos_damped > r.holdout_cos_before
    assert Bundle.open(path).encoder_entries(ROBUST_KIND)[0].extra["damping"]["neurons"][0]["neuron"] == SINK_NEURON
    from hefsearch.compile.body_choice import resolve_body, stale_builds
    from hefsearch.compile.sim.build import SimOptions, build_sim

    build_sim(path, "a8", SimOptions(mask="inside", body="robust"))
    build_sim(path, "a8", SimOptions(mask="inside"))
    res = CliRunner().invoke(main, ["compile", "robust", str(path), "--steps", "0", "--sink-ratio", "0", "--restart"])
    assert res.exit_code == 0, res.output
    b = Bundle.open(path)
    entry = b.encoder_entries(ROBUST_KIND)[0].extra
    assert entry["damping"]["neurons"] == [] and entry["training"]["sink_ratio"] == 0
    # the simulation of the damped body no longer shows the body now there; the original's does
    assert stale_builds(b, resolve_body(b, "robust")) == ["a8-robust"]
    assert stale_builds(b, resolve_body(b)) == []
    assert "previous 8-bit-robust body" in res.stderr and "a8-robust" in res.stderr
    build_sim(path, "a8", SimOptions(mask="inside", body="robust"))
    b = Bundle.open(path)
    assert stale_builds(b, resolve_body(b, "robust")) == []


def test_the_site_group_bench_names_every_group_and_sees_the_training(trained, tmp_path):
    """bench/site_groups.py on the tiny model: every simulated site sits in one group, the
    original body in FP32 is its own reference, rounding everything costs more than rounding
    weights only, and the robust body's all-8-bit vectors are closer to FP32 than the
    original's (the training's effect, measured by another code path than the simulation)."""
    from hefsearch.bench import site_groups as bench

    texts = _unseen_texts()
    rows = {body: bench.measure(str(trained[0]), body, texts, 16, lambda m: None) for body in ("original", "robust")}
    orig, robust = rows["original"], rows["robust"]
    assert orig["FP32"] == {"cosine": 1.0, "sim_corr": 1.0}
    assert orig["all 8-bit"]["sim_corr"] < orig["weights only"]["sim_corr"]
    assert robust["all 8-bit"]["sim_corr"] > orig["all 8-bit"]["sim_corr"]
    groups = [k for k in orig if "sites" in orig[k]]
    assert {"residual_add", "ffn_out", "LayerNorm variance"} <= set(groups)
    from hefsearch.compile.robust.train import make_student
    from hefsearch.embed.precision import load_profile

    single = [g for g in groups if g != "LayerNorm variance path"]  # that row is three groups together
    assert sum(orig[g]["sites"] for g in single) == len(make_student(Bundle.open(trained[0]), load_profile("a8")).sites)
    assert orig["LayerNorm variance path"]["sites"] == sum(
        orig[g]["sites"] for g in ("LayerNorm x - mean", "LayerNorm squared deviation", "LayerNorm variance"))
    text = bench.render(orig, "original", len(texts))
    assert all(g in text for g in groups)


def test_auto_damps_a_multilingual_bundle_without_a_robust_body_first(outlier_bundle, tmp_path, monkeypatch):
    """compile sim --precision a8 (body auto) on a multilingual bundle with no robust body:
    the damped body is made (compile robust --steps 0), recorded with its parallel-set
    ranking, and the simulation is built from it when it helps; a profile with 16-bit layers,
    or an English bundle, is built from the original and nothing is damped."""
    from hefsearch.compile import body_choice
    from hefsearch.compile.sim.build import SimOptions, build_sim

    english = tmp_path / "en"
    shutil.copytree(outlier_bundle, english, ignore=shutil.ignore_patterns("build", "encoder.robust.onnx"))
    said: list[str] = []
    assert build_sim(english, "a8", SimOptions(body="auto"), progress=said.append).name == "a8"
    assert not Bundle.open(english).encoder_entries(ROBUST_KIND)

    monkeypatch.setattr("hefsearch.embed.bundle.MULTILINGUAL_VOCAB", 100)  # the tiny vocabulary counts as multilingual
    # whatever the tiny body's damping gains on these held-out rows, take it: this test is
    # about the path (the rule itself: test_auto_body_takes_the_robust_one_...)
    monkeypatch.setattr(body_choice, "MIN_GAIN", -1.0)
    path = tmp_path / "multi"
    shutil.copytree(english, path)
    assert build_sim(path, "balanced", SimOptions(body="auto")).name == "balanced"  # 16-bit layers: no damping
    assert not Bundle.open(path).encoder_entries(ROBUST_KIND)
    said = []
    r = build_sim(path, "a8", SimOptions(body="auto"), progress=said.append)
    entry = Bundle.open(path).encoder_entries(ROBUST_KIND)[0].extra
    assert entry["training"]["steps"] == 0 and len(entry["damping"]["neurons"]) == 1
    assert set(entry["parallel"]) == {"original", "robust"}
    assert r.name == "a8-robust" and any("auto: the 8-bit-robust body" in m for m in said), said[:8]
    assert any("damping the attention sinks first" in m for m in said)


def test_cuda_device_is_refused_plainly_where_torch_sees_none(outlier_bundle, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has CUDA: the CPU/CUDA comparison below runs instead")
    from hefsearch.compile.robust.devices import CPU, resolve_device

    assert resolve_device("auto") == CPU and resolve_device(CPU) == CPU
    path = tmp_path / "b"
    shutil.copytree(outlier_bundle, path)
    res = CliRunner().invoke(main, ["compile", "robust", str(path), "--steps", "0", "--device", "cuda"])
    assert res.exit_code != 0 and "--device cuda:" in res.output and "--device cpu" in res.output
    assert "Traceback" not in res.output and not (path / "encoder.robust.onnx").exists()


def test_cuda_and_cpu_train_the_same_body(outlier_bundle, tmp_path):
    """Where torch sees a GPU: the same run on CUDA and on the CPU ends with the same weights
    to float tolerance (the random draws are made on the CPU for both)."""
    import onnx
    import torch
    from onnx import numpy_helper

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch here")
    from hefsearch.compile.robust.build import RobustOptions, build_robust

    weights = {}
    for device in ("cpu", "cuda"):
        path = tmp_path / device
        shutil.copytree(outlier_bundle, path)
        build_robust(path, RobustOptions(**dict(FAST, steps=10), device=device))
        m = onnx.load(str(path / "encoder.robust.onnx"))
        weights[device] = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    for name, w in weights["cpu"].items():
        assert np.allclose(w, weights["cuda"][name], atol=1e-4), name

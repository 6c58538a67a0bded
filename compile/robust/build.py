"""``hefsearch compile robust BUNDLE``: make a copy of the encoder body that survives 8 bits
(sink damping plus quantisation-aware distillation; needs torch and onnx: the compile extra).

An all-8-bit build (the only kind on record for Hailo-10H) rounds the residual stream with
per-tensor steps set by a few huge values, written by one FFN neuron per layer into the special
tokens' residual sums (the figures: docs/performance.md, "Training the encoder for 8 bits").
This step, in named stages:

- **data** (:mod:`.data`): the bundle's calibration pool plus the built-in multilingual sample
  texts, cut to ``max_tokens``, with the FP32 teacher's vectors; a tenth held out;
- **student**: the body's own ONNX graph run in torch (:mod:`.onnx_torch`);
- **damp** (:mod:`.sink_damping`): those attention-sink neurons' output rows
  scaled down until their push is at most ``sink_ratio`` times the layer's bulk (silent on every
  other token, so nothing else moves);
- **train** (:mod:`.train`): distillation from the original FP32 body,
  in FP32 and under 8-bit fake quantisation with a randomly drawn quantiser, so the result does
  not fit one quantiser only; resumable;
- **write**: only initializer values change: ``encoder.robust.onnx`` has exactly the ops, names
  and shapes of ``encoder.onnx`` (checked), so the DFC recipe, preflight and runtime apply;
- **check and record**: its FP32 vectors against the original's; the manifest entry (kind
  ``onnx-robust``) with the damping, the training and the held-out measurements.

``compile sim`` and ``compile hef`` use it with ``--body robust`` (its own file hash, hence its
own vector space). ``encoder.onnx`` is never touched: it stays the FP32 reference.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from hefsearch.base.atomic_write import write_atomic
from hefsearch.embed.bundle import Bundle, EncoderEntry
from hefsearch.embed.precision import load_profile

from hefsearch.compile.body_choice import ROBUST, ROBUST_FILE, ROBUST_KIND, resolve_body, stale_builds
from .devices import AUTO, describe, resolve_device
from .data import RobustError, TrainData, training_data

WORK_DIR = "build/robust"

__all__ = ["RobustError", "RobustOptions", "RobustReport", "build_robust", "graph_signature", "trained_model"]


@dataclass
class RobustOptions:
    steps: int = 300
    batch: int = 8
    lr: float = 5e-5
    #: texts are cut to this many tokens for training (the sinks and ranges of longer texts are alike)
    max_tokens: int = 64
    similarity_weight: float = 1.0
    #: damp attention-sink neurons to at most this many times their layer's bulk (0: no damping);
    #: 4 beat 8 on held-out 8-bit cosine (MiniLM 0.860 vs 0.830, e5 0.968 vs 0.966) and kept the
    #: body's own FP32 ranking closer (e5 MRR 0.99 / 0.95 vs 0.98 / 0.92 on two libraries)
    sink_ratio: float = 4.0
    #: weight of the FP32 pass's distillation against the 8-bit pass's (keeps the FP32 vectors)
    fp32_weight: float = 10.0
    #: weight of the penalty on residual sums above their damped peaks
    hinge_weight: float = 1.0
    randomise: bool = True
    precision: str = "a8"
    seed: int = 0
    #: torch threads: 1 by default; on a busy shared 2-core host, 2 threads were 10x slower per
    #: step (small elementwise ops wait on a descheduled sibling thread)
    threads: int = 1
    checkpoint_every: int = 20
    #: held-out rows for the 8-bit error report (at most this many)
    holdout: int = 64
    eval_every: int = 100
    calib_limit: int | None = None
    restart: bool = False
    #: torch device: "auto" (CUDA when torch sees a GPU, else the CPU), "cuda" or "cpu"; the
    #: same run gives the same body on either, to float tolerance (the random draws are made
    #: on the CPU)
    device: str = AUTO

    def key(self, source_sha: str, data_sha: str) -> str:
        """What a checkpoint depends on (not the number of steps: a run can be extended)."""
        d = asdict(self)
        for k in ("steps", "threads", "checkpoint_every", "eval_every", "restart", "device"):
            d.pop(k)
        return hashlib.sha256(json.dumps([d, source_sha, data_sha], sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class RobustReport:
    file: str
    steps: int
    resumed_from: int
    seconds: float
    rows: int
    holdout: int
    #: mean cosine to the FP32 teacher on held-out rows under 8-bit fake quantisation (ranges
    #: from training rows, set-wide as a build calibrates): the original body, after sink
    #: damping, after training
    holdout_cos_before: float
    holdout_cos_damped: float
    holdout_cos_after: float
    #: the same rows in FP32 after training (the original is 1 by definition)
    holdout_fp32_after: float
    #: the robust body in FP32 against the original on the built-in sample texts
    fp32_check: dict
    #: the bundled parallel set ranked in FP32 by the original and by the robust body
    #: (compile/self_check.py parallel_ranking): {"original": {...}, "robust": {...}}
    parallel: dict = field(default_factory=dict)
    damping: dict = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    #: builds (npu-sim, hef) made from the previous robust body: no longer what this one gives
    stale: list[str] = field(default_factory=list)


# -- writing the trained body ----------------------------------------------------------------------
def trained_model(student):
    """The original ONNX model with the trained initializer values; same ops, names, shapes."""
    import onnx
    from onnx import numpy_helper

    m = onnx.ModelProto.FromString(student.model.SerializeToString())
    values = student.body.initializers()
    for init in m.graph.initializer:
        if init.name in values:
            init.CopyFrom(numpy_helper.from_array(values[init.name].reshape(tuple(init.dims)), init.name))
    same_graph(student.model, m)
    onnx.checker.check_model(m)
    return m


def graph_signature(model) -> list:
    """Ops, names, edges, attributes and initializer shapes/types: everything but the values."""
    g = model.graph
    return [
        [(n.op_type, n.name, list(n.input), list(n.output), [a.SerializeToString() for a in n.attribute])
         for n in g.node],
        [(i.name, list(i.dims), i.data_type) for i in g.initializer],
        [i.SerializeToString() for i in g.input], [o.SerializeToString() for o in g.output],
    ]


def same_graph(a, b) -> None:
    if graph_signature(a) != graph_signature(b):  # pragma: no cover - trained_model only changes values
        raise RobustError("The trained body's graph differs from encoder.onnx.", "Please report this.")


def record_robust(bundle: Bundle, opts: RobustOptions, data: TrainData, report: RobustReport) -> None:
    """Lists the written body (already in ``files``: ``add_file`` hashed it) as ``onnx-robust``."""
    src = resolve_body(bundle)
    bundle.upsert_encoder(EncoderEntry(
        kind=ROBUST_KIND, file=ROBUST_FILE, seq_len=None, hw_arch=None,
        extra={
            "label": "8-bit-robust body (sink damping + quantisation-aware distillation)",
            "source": {"file": src.file, "sha256": src.sha256},
            "damping": report.damping,
            "training": {
                "steps": report.steps, "batch": opts.batch, "lr": opts.lr, "max_tokens": opts.max_tokens,
                "precision": opts.precision, "randomise": opts.randomise, "fp32_weight": opts.fp32_weight,
                "hinge_weight": opts.hinge_weight, "similarity_weight": opts.similarity_weight,
                "sink_ratio": opts.sink_ratio, "seed": opts.seed,
                "rows": report.rows, "holdout": report.holdout, "data": data.source,
                "seconds": round(report.seconds, 1),
            },
            # held-out rows, cosine to the original FP32 vectors: an 8-bit simulation of the
            # original, of the damped body, of the trained body; the trained body in FP32
            "holdout_cos": {"before": report.holdout_cos_before, "damped": report.holdout_cos_damped,
                            "after": report.holdout_cos_after, "fp32_after": report.holdout_fp32_after},
            "fp32_check": report.fp32_check,
            "parallel": report.parallel,
        },
    ))
    bundle.save_manifest()


def build_robust(bundle: Bundle | str | Path, opts: RobustOptions | None = None,
                 progress: Callable[[str], None] | None = None) -> RobustReport:
    """Train ``encoder.robust.onnx`` and list it in the manifest.

    Stages: data (pool + samples, teacher vectors) -> student (the body in torch, the sites) ->
    damp (attention-sink neurons; on a fresh start) -> train (resumable) -> write (same graph,
    new values) -> check (FP32 vs the original) -> manifest.
    """
    try:
        import onnx  # noqa: F401
        import torch
    except ImportError:
        raise RobustError("Training the robust body needs torch and onnx.", "pip install 'hefsearch[compile]'") from None
    say = progress or (lambda m: None)
    opts = opts or RobustOptions()
    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, opts.threads))
    try:
        return _build_robust(bundle, opts, say, t0)
    finally:
        torch.set_num_threads(threads)


def damped_body_maker(say: Callable[[str], None] | None = None):
    """For ``choose_body``: writes the damped body (``compile robust --steps 0``: sink damping,
    no training; ~25 s for multilingual-e5-small on an idle x86 core, 2 min loaded) into a
    bundle that has no robust body. Without torch/onnx it says so and the original is built."""
    say = say or (lambda m: None)

    def make(bundle: Bundle) -> None:
        say("no 8-bit-robust body: damping the attention sinks first (compile robust --steps 0) ...")
        try:
            build_robust(bundle, RobustOptions(steps=0), progress=lambda m: say(f"  {m}"))
        except RobustError as e:
            say(f"  the damped body could not be made ({e.message}); building from the original")

    return make


def _fresh_start(student, data: TrainData, opts: RobustOptions, say):
    """Before step 1 of a new run: the original's held-out 8-bit error, sink damping, the
    damped body's, the hinge caps. Returns what the checkpoint keeps for a resumed run."""
    from .train import Fresh, holdout_cosines, residual_caps
    from .sink_damping import DampingReport, damp_sinks

    before, _ = holdout_cosines(student, data)
    say(f"held-out 8-bit cosine to FP32, the original body: {before:.4f}")
    if opts.sink_ratio > 0:
        pick = data.train_rows[:: max(1, len(data.train_rows) // 64)][:64]
        damping = damp_sinks(student.body, data.emb[pick], data.mask[pick], opts.sink_ratio)
        damped, _ = holdout_cosines(student, data)
        say(f"sink damping: {damping.describe()}; held-out 8-bit cosine {damped:.4f}")
    else:
        damping, damped = DampingReport(ratio=0.0, rows=0), before
    history = [{"step": 0, "holdout_a8": round(damped, 5), "holdout_a8_original": round(before, 5)}]
    return Fresh(history, {"damping": damping.to_dict(), "caps": residual_caps(student, data)})


def _build_robust(bundle, opts: RobustOptions, say, t0: float) -> RobustReport:
    import onnx

    from .train import STATE_FILE, Checkpoint, TrainSettings, holdout_cosines, make_student, train
    from hefsearch.compile.self_check import parallel_ranking, self_check

    b = bundle if isinstance(bundle, Bundle) else Bundle.open(bundle)
    profile = load_profile(opts.precision)
    src = resolve_body(b)
    device = resolve_device(opts.device)
    data = training_data(b, opts.max_tokens, opts.holdout, opts.seed, opts.calib_limit, say)
    student = make_student(b, profile, device)
    say(f"student: {len(student.sites)} activation sites, {len(student.weight_bits)} weights "
        f"({profile.describe()}); {opts.steps} steps of {opts.batch} on {describe(device, opts.threads)}")
    work = b.path / WORK_DIR
    work.mkdir(parents=True, exist_ok=True)
    cfg = TrainSettings(opts.steps, opts.batch, opts.lr, opts.seed, opts.randomise, opts.fp32_weight,
                        opts.similarity_weight, opts.hinge_weight, opts.checkpoint_every, opts.eval_every)
    checkpoint = Checkpoint(work / STATE_FILE, opts.key(src.sha256, data.sha), opts.restart)
    resumed, history, extra = train(student, data, cfg, checkpoint, say, lambda: _fresh_start(student, data, opts, say))
    before, damped = history[0]["holdout_a8_original"], history[0]["holdout_a8"]
    last = history[-1]
    after, fp32_after = ((last["holdout_a8"], last["holdout_fp32"]) if "holdout_fp32" in last
                         else holdout_cosines(student, data))
    m = trained_model(student)
    write_atomic(b.path / ROBUST_FILE, lambda tmp: onnx.save(m, tmp))
    b.add_file(ROBUST_FILE)
    check = self_check(b, ROBUST_FILE)
    t = time.perf_counter()
    parallel = {"original": parallel_ranking(b, src.file), "robust": parallel_ranking(b, ROBUST_FILE)}
    say(f"parallel set in FP32, MRR: original {parallel['original']['mrr']:.4f}, this body "
        f"{parallel['robust']['mrr']:.4f} ({time.perf_counter() - t:.0f} s)")
    report = RobustReport(ROBUST_FILE, max(opts.steps, resumed), resumed, time.perf_counter() - t0, len(data.train_rows),
                          len(data.holdout_rows), round(before, 5), round(damped, 5), round(after, 5),
                          round(fp32_after, 5), check, parallel, extra.get("damping", {}), history)
    record_robust(b, opts, data, report)
    report.stale = stale_builds(b, resolve_body(b, ROBUST))
    say(f"held-out 8-bit cosine to FP32: original {before:.4f}, damped {damped:.4f}, trained {after:.4f}; "
        f"its FP32 vectors vs the original: cosine {check['cosine_mean']:.4f} (min {check['cosine_min']:.4f})")
    return report

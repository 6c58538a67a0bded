"""``hefsearch compile robust BUNDLE``: train a copy of the encoder body to survive 8 bits
(quantisation-aware distillation; needs torch and onnx: the compile extra).

An all-8-bit build (the only kind on record for Hailo-10H) rounds the residual stream with
per-tensor steps set by a few outlier channels, and its vectors lose a third of FP32's top-1
answers. This step fine-tunes a copy of the body so that its vectors *under 8-bit fake
quantisation* match the FP32 original's:

- teacher: the FP32 ``encoder.onnx``; its sentence vectors of every training text are computed
  once (ONNX Runtime) and kept;
- student: the same graph run node by node in torch (:mod:`hefsearch.compile.onnx_torch`), with
  straight-through fake quantisation at every site the 8-bit simulation rounds (the same site
  list, the same LayerNorm decomposition, the precision profile's bits, the mask inside softmax)
  and on every dense weight; ranges are min/max over the batch's real tokens, the statistic the
  build uses, with the LSQ step-size gradient (:mod:`hefsearch.compile.fake_quant`);
- loss: 1 - cosine to the teacher's vector, plus the mean squared difference of the batch's
  cosine-similarity matrix from the teacher's;
- each step draws its quantiser (min/max, widened, percentile ranges; per-channel or per-tensor
  weights; rounding noise; some steps unquantised, so the body's FP32 vectors stay the
  original's) and its texts (a random length bucket of the pool), so the result does not fit one
  quantiser only;
- data: the bundle's calibration pool (``compile calib --from DOCS``: your own documents) plus
  the built-in multilingual sample texts; a tenth is held out to report the 8-bit error.

Only initializer values change: ``encoder.robust.onnx`` has exactly the ops, names and shapes
of ``encoder.onnx`` (checked before it is written), so the DFC recipe, the preflight and the
runtime apply unchanged. It is listed in the manifest as kind ``onnx-robust``; ``compile sim``
and ``compile hef`` use it with ``--body robust``, and every build from it has its own file
hash, hence its own vector space. ``encoder.onnx`` is never touched: it stays the FP32
reference (``cpu-fp32``, every quality baseline).

Progress with an ETA; a checkpoint every ``checkpoint_every`` steps under
``build/robust/`` (and on Ctrl-C), so a re-run continues; each step's texts and quantiser are
drawn from (seed, step), so a resumed run computes what an uninterrupted one would.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from hefsearch.embed.atomic_write import write_atomic
from hefsearch.embed.bundle import Bundle, EncoderEntry
from hefsearch.embed.errors import HefsearchError
from hefsearch.embed.precision import PrecisionProfile, load_profile

from .bodies import ROBUST_FILE, ROBUST_KIND, resolve_body

log = logging.getLogger("hefsearch.compile")

WORK_DIR = "build/robust"
STATE_FILE = "state.pt"


class RobustError(HefsearchError):
    title = "robust training error"


@dataclass
class RobustOptions:
    steps: int = 300
    batch: int = 8
    lr: float = 5e-5
    #: texts are cut to this many tokens for training (the ranges of longer texts are alike)
    max_tokens: int = 64
    similarity_weight: float = 1.0
    #: share of steps run without quantisation (keeps the body's own FP32 vectors)
    fp32_share: float = 0.15
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

    def key(self, source_sha: str, data_sha: str) -> str:
        """What a checkpoint depends on (not the number of steps: a run can be extended)."""
        d = asdict(self)
        for k in ("steps", "threads", "checkpoint_every", "eval_every", "restart"):
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
    #: mean cosine to the FP32 teacher on held-out rows under nominal 8-bit fake quantisation
    holdout_cos_before: float
    holdout_cos_after: float
    #: the robust body in FP32 against the original on the built-in sample texts
    fp32_check: dict
    history: list[dict] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


# -- data -------------------------------------------------------------------------------------
@dataclass
class TrainData:
    emb: np.ndarray  # [N, S, H] float32, S <= max_tokens
    mask: np.ndarray  # [N, S] int64
    lengths: np.ndarray  # [N]
    teacher: np.ndarray  # [N, H] the FP32 body's normalised sentence vectors
    source: str
    sha: str
    train_rows: np.ndarray  # indices
    holdout_rows: np.ndarray


def training_data(bundle: Bundle, opts: RobustOptions, say: Callable[[str], None]) -> TrainData:
    """Consumes the bundle's calibration pool and the built-in samples; produces the training
    rows, cut to ``max_tokens``, with the FP32 teacher's vectors."""
    from .calib import sample_texts
    from .sim_ranges import calibration_from_bundle, calibration_from_texts

    parts = []
    calib = calibration_from_bundle(bundle, opts.calib_limit)
    notices = []
    if calib is None:
        notices.append("no calibration pool (hefsearch compile calib BUNDLE --from DOCS)")
    else:
        parts.append(calib)
    samples = calibration_from_texts(bundle, sample_texts(), "built-in multilingual samples")
    parts.append(samples)
    s = min(opts.max_tokens, max(p.embeddings.shape[1] for p in parts))
    emb = np.concatenate([_fit(p.embeddings, s) for p in parts]).astype(np.float32)
    mask = np.concatenate([_fit(p.mask, s) for p in parts]).astype(np.int64)
    lengths = mask.sum(1)
    keep = lengths > 0
    emb, mask, lengths = emb[keep], mask[keep], lengths[keep]
    if len(emb) < 16:
        raise RobustError(f"Only {len(emb)} training texts.",
                          f"Build a calibration pool first: hefsearch compile calib {bundle.path} --from ~/Documents")
    say(f"training texts: {len(emb)} ({'; '.join(p.source for p in parts)}), cut to {s} tokens")
    teacher = teacher_vectors(bundle, emb, mask, lengths)
    rng = np.random.default_rng(opts.seed)
    order = rng.permutation(len(emb))
    n_hold = min(opts.holdout, len(emb) // 10)
    sha = hashlib.sha256(emb.tobytes() + mask.tobytes()).hexdigest()[:16]
    source = "; ".join(p.source for p in parts)
    if notices:
        source += " (" + ", ".join(notices) + ")"
    return TrainData(emb, mask, lengths, teacher, source, sha, np.sort(order[n_hold:]), np.sort(order[:n_hold]))


def _fit(a: np.ndarray, s: int) -> np.ndarray:
    """Cut (or zero-pad) the token axis (axis 1) to ``s``."""
    if a.shape[1] >= s:
        return a[:, :s]
    pad = [(0, 0)] * a.ndim
    pad[1] = (0, s - a.shape[1])
    return np.pad(a, pad)


def pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    m = mask[..., None].astype(np.float32)
    v = (hidden * m).sum(1) / np.maximum(m.sum(1), 1.0)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def teacher_vectors(bundle: Bundle, emb, mask, lengths, batch: int = 16) -> np.ndarray:
    from hefsearch.embed.backends.cpu import make_session

    sess = make_session(str(resolve_body(bundle).path(bundle)))
    out = np.zeros((len(emb), emb.shape[2]), np.float32)
    for i in range(0, len(emb), batch):
        sl = slice(i, i + batch)
        s = max(1, int(lengths[sl].max()))
        h = sess.run(["last_hidden_state"], {"embeddings": emb[sl, :s], "attention_mask": mask[sl, :s]})[0]
        out[sl] = pooled(h, mask[sl, :s])
    return out


def length_buckets(lengths: np.ndarray, rows: np.ndarray, batch: int) -> list[np.ndarray]:
    """Rows sorted by length, cut into batches: little padding, and similar texts together."""
    srt = rows[np.argsort(lengths[rows], kind="stable")]
    return [srt[i : i + batch] for i in range(0, len(srt), batch) if len(srt[i : i + batch]) >= 2]


# -- the student --------------------------------------------------------------------------------
@dataclass
class Student:
    body: object  # OnnxBody
    sites: dict[str, int]
    weight_bits: dict[str, int]
    model: object  # the original onnx.ModelProto
    #: sites of the outlier-carrying residual stream (residual adds, FFN outputs, LayerNorm
    #: x - mean and squared deviation): their step sizes get the LSQ gradient
    tie: frozenset = frozenset()


def make_student(bundle: Bundle, profile: PrecisionProfile) -> Student:
    """The FP32 body as a trainable torch module, with the 8-bit simulation's site list."""
    import onnx

    from hefsearch.embed.precision import classify_onnx_node

    from .onnx_torch import OnnxBody
    from .sim_graph import prepare_graph

    model = onnx.load(str(resolve_body(bundle).path(bundle)))
    sim = prepare_graph(model, profile, mask_mode="softmax", mask_value=-10000.0,
                        bundle_mask_value=bundle.mask_value)
    sites = {s.tensor: profile.bits_for(s.group) for s in sim.sites}
    body = OnnxBody(model)
    weight_bits = {w: profile.bits_for(classify_onnx_node(body.nodes[k].op_type, body.nodes[k].name))
                   for k, w in body.dense.items()}
    tie = frozenset(s.tensor for s in sim.sites if s.group in ("residual_add", "ffn_out")
                    or s.tensor.endswith(("/xmu", "/sq")))
    return Student(body, sites, weight_bits, model, tie)


def _forward(student: Student, emb, mask, variant, gen):
    import torch

    from .fake_quant import Quantiser

    e = torch.from_numpy(np.ascontiguousarray(emb))
    m = torch.from_numpy(np.ascontiguousarray(mask))
    q = Quantiser(student.sites, student.weight_bits, variant, m.bool(), gen, student.tie)
    if variant.quantised:  # calibrate on this batch in FP32, as the build calibrates
        with torch.no_grad():
            student.body(e, m, site=q.record)
    h = student.body(e, m, site=q.site, weight=q.weight)
    mf = m[..., None].to(h.dtype)
    v = (h * mf).sum(1) / mf.sum(1).clamp_min(1.0)
    return torch.nn.functional.normalize(v, dim=-1)


def distillation_loss(u, t, similarity_weight: float):
    cos = (u * t).sum(-1)
    loss = (1 - cos).mean()
    if similarity_weight and len(u) > 1:
        loss = loss + similarity_weight * ((u @ u.T - t @ t.T) ** 2).mean()
    return loss


def holdout_cosine(student: Student, data: TrainData, batch: int = 16) -> float:
    """Mean cosine to the teacher on the held-out rows under the nominal 8-bit quantiser."""
    import torch

    from .fake_quant import NOMINAL

    rows = data.holdout_rows
    if not len(rows):
        return float("nan")
    cos = []
    with torch.no_grad():
        for b in length_buckets(data.lengths, rows, batch) or [rows]:
            s = int(data.lengths[b].max())
            u = _forward(student, data.emb[b, :s], data.mask[b, :s], NOMINAL, None)
            cos += (u * torch.from_numpy(data.teacher[b])).sum(-1).tolist()
    return float(np.mean(cos))


# -- checkpoints ----------------------------------------------------------------------------------
def _save_state(path: Path, key: str, step: int, student: Student, opt, history: list) -> None:
    import torch

    state = {"key": key, "step": step, "params": student.body.state_dict(), "opt": opt.state_dict(),
             "history": history}
    write_atomic(path, lambda tmp: torch.save(state, tmp))


def _load_state(path: Path, key: str):
    import torch

    if not path.is_file():
        return None
    try:
        state = torch.load(path, weights_only=False)
    except Exception as e:  # a torn or foreign file: start over, saying so
        log.warning("ignoring unreadable checkpoint %s (%s)", path, e)
        return None
    return state if state.get("key") == key else None


# -- the training loop ------------------------------------------------------------------------------
def _lr_at(step: int, opts: RobustOptions) -> float:
    warm = max(1, opts.steps // 20)
    if step < warm:
        return opts.lr * (step + 1) / warm
    return opts.lr * max(0.1, 1 - (step - warm) / max(1, opts.steps - warm))


def train(student: Student, data: TrainData, opts: RobustOptions, work: Path, key: str,
          say: Callable[[str], None], baseline: Callable[[], float]) -> tuple[int, list[dict]]:
    """Consumes the student and the data; trains in place, checkpointing; returns (the step it
    resumed from, the history, whose first entry is step 0: ``baseline()``, measured on a fresh
    start only)."""
    import torch

    from .fake_quant import draw_variant

    opt = torch.optim.AdamW(student.body.parameters(), lr=opts.lr, weight_decay=0.0)
    path = work / STATE_FILE
    state = None if opts.restart else _load_state(path, key)
    if state is None:
        start, history = 0, [{"step": 0, "holdout_cos": round(baseline(), 5)}]
        say(f"held-out 8-bit cosine to FP32 before training: {history[0]['holdout_cos']:.4f}")
    else:
        student.body.load_state_dict(state["params"])
        opt.load_state_dict(state["opt"])
        start, history = int(state["step"]), list(state["history"])
        say(f"resuming from the checkpoint at step {start}/{opts.steps}")
    batches = length_buckets(data.lengths, data.train_rows, opts.batch)
    t0, done_here, recent = time.perf_counter(), 0, []
    completed, saved = start, start  # steps applied to the weights / in the checkpoint
    try:
        for step in range(start, opts.steps):
            gen = torch.Generator().manual_seed(opts.seed * 1_000_003 + step)
            b = batches[int(torch.randint(len(batches), (1,), generator=gen))]
            variant = draw_variant(gen, opts.randomise, opts.fp32_share)
            s = int(data.lengths[b].max())
            for g in opt.param_groups:
                g["lr"] = _lr_at(step, opts)
            u = _forward(student, data.emb[b, :s], data.mask[b, :s], variant, gen)
            loss = distillation_loss(u, torch.from_numpy(data.teacher[b]), opts.similarity_weight)
            opt.zero_grad(set_to_none=True)
            if not torch.isfinite(loss):  # a degenerate draw: skip it rather than poison the weights
                continue
            loss.backward()
            torch.nn.utils.clip_grad_norm_(student.body.parameters(), 1.0)
            opt.step()
            done_here += 1
            completed = step + 1
            recent.append(float(loss.detach()))
            if (step + 1) % opts.checkpoint_every == 0 or step + 1 == opts.steps:
                entry = {"step": step + 1, "loss": round(float(np.mean(recent)), 5)}
                if (step + 1) % opts.eval_every == 0 or step + 1 == opts.steps:
                    entry["holdout_cos"] = round(holdout_cosine(student, data), 5)
                history.append(entry)
                recent = []
                _save_state(path, key, step + 1, student, opt, history)
                saved = step + 1
                per = (time.perf_counter() - t0) / done_here
                left = per * (opts.steps - step - 1)
                extra = f", held-out 8-bit cosine {entry['holdout_cos']:.4f}" if "holdout_cos" in entry else ""
                say(f"step {step + 1}/{opts.steps}: loss {entry['loss']:.4f}{extra}; "
                    f"{per:.1f} s/step, ETA {_fmt_s(left)}")
    except KeyboardInterrupt:
        if completed > saved:
            _save_state(path, key, completed, student, opt, history)
        say(f"interrupted: checkpoint at step {max(completed, saved)}; run the same command again to continue")
        raise
    return start, history


def _fmt_s(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


# -- writing the trained body ----------------------------------------------------------------------
def trained_model(student: Student):
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
    bundle.add_file(ROBUST_FILE)
    src = resolve_body(bundle)
    bundle.upsert_encoder(EncoderEntry(
        kind=ROBUST_KIND, file=ROBUST_FILE, seq_len=None, hw_arch=None,
        extra={
            "label": "8-bit-robust body (quantisation-aware distillation)",
            "source": {"file": src.file, "sha256": src.sha256},
            "training": {
                "steps": report.steps, "batch": opts.batch, "lr": opts.lr, "max_tokens": opts.max_tokens,
                "precision": opts.precision, "randomise": opts.randomise, "fp32_share": opts.fp32_share,
                "similarity_weight": opts.similarity_weight, "seed": opts.seed,
                "rows": report.rows, "holdout": report.holdout, "data": data.source,
                "seconds": round(report.seconds, 1),
            },
            "holdout_cos": {"before": report.holdout_cos_before, "after": report.holdout_cos_after},
            "fp32_check": report.fp32_check,
        },
    ))
    bundle.save_manifest()


def build_robust(bundle: Bundle | str | Path, opts: RobustOptions | None = None,
                 progress: Callable[[str], None] | None = None) -> RobustReport:
    """Train ``encoder.robust.onnx`` and list it in the manifest.

    Stages: data (pool + samples, teacher vectors) -> student (the body in torch, the sites) ->
    train (resumable) -> write (same graph, new values) -> check (FP32 vs the original) -> manifest.
    """
    try:
        import onnx  # noqa: F401
        import torch  # noqa: F401
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


def _build_robust(bundle, opts: RobustOptions, say, t0: float) -> RobustReport:
    import onnx

    from .self_check import self_check

    b = bundle if isinstance(bundle, Bundle) else Bundle.open(bundle)
    profile = load_profile(opts.precision)
    src = resolve_body(b)
    data = training_data(b, opts, say)
    student = make_student(b, profile)
    say(f"student: {len(student.sites)} activation sites, {len(student.weight_bits)} weights "
        f"({profile.describe()}); {opts.steps} steps of {opts.batch}")
    work = b.path / WORK_DIR
    work.mkdir(parents=True, exist_ok=True)
    key = opts.key(src.sha256, data.sha)
    resumed, history = train(student, data, opts, work, key, say, lambda: holdout_cosine(student, data))
    before = history[0]["holdout_cos"]
    after = history[-1]["holdout_cos"] if len(history) > 1 and "holdout_cos" in history[-1] else holdout_cosine(student, data)
    m = trained_model(student)
    write_atomic(b.path / ROBUST_FILE, lambda tmp: onnx.save(m, tmp))
    b.add_file(ROBUST_FILE)
    check = self_check(b, ROBUST_FILE)
    report = RobustReport(ROBUST_FILE, opts.steps, resumed, time.perf_counter() - t0, len(data.train_rows),
                          len(data.holdout_rows), round(before, 5), round(after, 5), check, history)
    record_robust(b, opts, data, report)
    say(f"held-out 8-bit cosine to FP32: {before:.4f} -> {after:.4f}; FP32 vs the original: "
        f"cosine {check['cosine_mean']:.4f} (min {check['cosine_min']:.4f})")
    return report

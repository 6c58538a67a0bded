"""The training of ``compile robust`` (needs torch and onnx: the compile extra).

One step, on a batch of training texts cut to ``max_tokens``:

1. the **teacher** (a frozen copy of the original FP32 body) gives every token's final hidden
   state and every LayerNorm output on the way;
2. the **student in FP32** (the body being trained, no rounding) is distilled towards it at all
   of those places (token-level, so its own FP32 vectors stay the original's), and its pass
   measures every site's range on the batch under the step's quantiser variant, as a build
   calibrates; the residual sums are held under the peaks they had after sink damping (a hinge),
   so the outliers that damping removed do not grow back;
3. the **student under 8-bit fake quantisation** (the simulation's sites and LayerNorm
   decomposition, those ranges, straight-through rounding; :mod:`hefsearch.compile.robust.fake_quant`)
   is distilled towards the teacher's sentence vectors (cosine plus the batch's similarity
   matrix): the 8-bit build's vectors are trained to be the original's.

``fp32_weight`` sets how much the FP32 pass counts against the 8-bit one: the default keeps the
FP32 vectors the original's, which library rankings need (figures: docs/performance.md).

Each step's texts and quantiser variant are drawn from (seed, step), and a checkpoint holds the
weights, the optimiser and the hinge caps, so a resumed run computes what an uninterrupted one
would.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from hefsearch.base.atomic_write import write_atomic
from hefsearch.embed.bundle import Bundle
from hefsearch.embed.precision import PrecisionProfile, classify_onnx_node

from hefsearch.compile.body_choice import resolve_body
from .devices import CPU
from .fake_quant import NOMINAL, Quantiser, Variant, draw_variant
from .data import TrainData, length_buckets

log = logging.getLogger("hefsearch.compile")

STATE_FILE = "state.pt"


@dataclass
class TrainSettings:
    steps: int
    batch: int
    lr: float
    seed: int
    randomise: bool
    fp32_weight: float
    similarity_weight: float
    hinge_weight: float
    checkpoint_every: int
    eval_every: int


@dataclass
class Student:
    body: object  # OnnxBody being trained
    teacher: object  # OnnxBody: a frozen copy of the original
    sites: dict[str, int]
    weight_bits: dict[str, int]
    model: object  # the original onnx.ModelProto
    #: sites of the outlier-carrying residual stream, whose step sizes get the LSQ gradient
    tie: frozenset
    #: every LayerNorm output (the residual stream between sublayers): token-level targets
    stream: tuple[str, ...]
    #: the residual sums (inputs of the LayerNorms after each sublayer): the hinge's tensors
    residuals: tuple[str, ...]
    #: torch device the body and teacher run on (compile/robust/devices.py)
    device: str = CPU

    def tensor(self, a: np.ndarray) -> torch.Tensor:
        """A batch of the training data on the student's device."""
        return torch.from_numpy(np.ascontiguousarray(a)).to(self.device)


def make_student(bundle: Bundle, profile: PrecisionProfile, device: str = CPU) -> Student:
    """The FP32 body as a trainable torch module, with the 8-bit simulation's site list."""
    import onnx

    from .onnx_torch import OnnxBody
    from hefsearch.compile.sim.graph import prepare_graph

    model = onnx.load(str(resolve_body(bundle).path(bundle)))
    sim = prepare_graph(model, profile, mask_mode="softmax", mask_value=-10000.0,
                        bundle_mask_value=bundle.mask_value)
    sites = {s.tensor: profile.bits_for(s.group) for s in sim.sites}
    body = OnnxBody(model).to(device)
    teacher = copy.deepcopy(body).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    weight_bits = {w: profile.bits_for(classify_onnx_node(body.nodes[k].op_type, body.nodes[k].name))
                   for k, w in body.dense.items()}
    tie = frozenset(s.tensor for s in sim.sites if s.group in ("residual_add", "ffn_out")
                    or s.tensor.endswith(("/xmu", "/sq")))
    stream = tuple(n.output[0] for n in body.nodes if n.op_type == "LayerNormalization")
    residuals = tuple(n.output[0] for n in body.nodes
                      if classify_onnx_node(n.op_type, n.name) == "residual_add")
    return Student(body, teacher, sites, weight_bits, model, tie, stream, residuals, device)


# -- passes and losses ---------------------------------------------------------------------------
def _capture(store: dict, names, inner=None):
    def hook(name, v):
        if inner is not None:
            v = inner(name, v)
        if name in names:
            store[name] = v
        return v
    return hook


def sentence_vectors(h: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    mf = m[..., None].to(h.dtype)
    v = (h * mf).sum(1) / mf.sum(1).clamp_min(1.0)
    return torch.nn.functional.normalize(v, dim=-1)


def vector_loss(u: torch.Tensor, t: torch.Tensor, similarity_weight: float) -> torch.Tensor:
    """1 - cosine to the teacher's vectors, plus the batch's similarity matrix against the teacher's."""
    loss = (1 - (u * t).sum(-1)).mean()
    if similarity_weight and len(u) > 1:
        loss = loss + similarity_weight * ((u @ u.T - t @ t.T) ** 2).mean()
    return loss


def token_loss(h: torch.Tensor, t: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Squared error of every real token's vector, relative to the teacher's (scale-free)."""
    d = ((h - t) ** 2).sum(-1) / (t ** 2).sum(-1).clamp_min(1e-6)
    mf = m.to(h.dtype)
    return (d * mf).sum() / mf.sum().clamp_min(1.0)


def hinge_loss(values: dict[str, torch.Tensor], caps: dict[str, float], m: torch.Tensor) -> torch.Tensor:
    """How far the residual sums go past their caps (relative, squared, per real token)."""
    real = m.to(torch.float32).sum().clamp_min(1.0)
    total = torch.zeros((), device=m.device)
    for name, v in values.items():
        cap = caps.get(name)
        if cap:
            total = total + torch.relu(v.abs() - cap).pow(2).sum() / (cap * cap * real)
    return total


@dataclass
class Batch:
    """One step's texts: embeddings [N,S,H], the 0/1 mask [N,S] and the teacher's sentence
    vectors [N,H]."""

    emb: torch.Tensor
    mask: torch.Tensor
    teacher_vec: torch.Tensor


@dataclass
class Checkpoint:
    """Where training keeps its state (``path``), the key a state must carry to be resumed (what
    the training depends on), and whether to ignore a saved state and start over."""

    path: Path
    key: str
    restart: bool = False


def step_loss(student: Student, batch: Batch, variant: Variant, gen, caps: dict[str, float],
              cfg: TrainSettings) -> tuple[torch.Tensor, dict]:
    """The three passes of one step and the loss to minimise (with its parts, for the log)."""
    e, m, teacher_vec = batch.emb, batch.mask, batch.teacher_vec
    names = set(student.stream) | set(student.residuals)
    with torch.no_grad():
        want = {}
        th = student.teacher(e, m, site=_capture(want, set(student.stream)))
    q = Quantiser(student.sites, student.weight_bits, variant, m.bool(), gen, student.tie)
    got: dict[str, torch.Tensor] = {}
    hf = student.body(e, m, site=_capture(got, names, q.record if variant.quantised else None))
    fp = vector_loss(sentence_vectors(hf, m), teacher_vec, cfg.similarity_weight) + token_loss(hf, th, m)
    fp = fp + sum(token_loss(got[k], want[k], m) for k in want) / max(1, len(want))
    hinge = hinge_loss({k: got[k] for k in student.residuals if k in got}, caps, m)
    loss = cfg.fp32_weight * fp + cfg.hinge_weight * hinge
    parts = {"fp32": float(fp.detach()), "hinge": float(hinge.detach())}
    if variant.quantised:
        hq = student.body(e, m, site=q.site, weight=q.weight)
        q8 = vector_loss(sentence_vectors(hq, m), teacher_vec, cfg.similarity_weight)
        loss = loss + q8
        parts["a8"] = float(q8.detach())
    return loss, parts


def residual_caps(student: Student, data: TrainData, rows: int = 32) -> dict[str, float]:
    """Each residual sum's largest |value| on some training rows (after damping): the hinge's caps."""
    pick = data.train_rows[np.linspace(0, len(data.train_rows) - 1, min(rows, len(data.train_rows))).astype(int)]
    caps: dict[str, float] = {}
    with torch.no_grad():
        for b in length_buckets(data.lengths, pick, 8) or [pick]:
            s = int(data.lengths[b].max())
            m = student.tensor(data.mask[b, :s])
            got: dict[str, torch.Tensor] = {}
            student.body(student.tensor(data.emb[b, :s]), m, site=_capture(got, set(student.residuals)))
            real = m.bool()
            for k, v in got.items():
                caps[k] = max(caps.get(k, 0.0), float(v[real].abs().max()))
    return caps


# -- what the training reports: the held-out rows under a build's set-wide ranges ------------------
def set_ranges(student: Student, data: TrainData, rows: np.ndarray, batch: int = 8) -> dict[str, tuple[float, float]]:
    """Min/max of every site over ``rows`` in FP32, as a build calibrates on its whole set."""
    ranges: dict[str, tuple[float, float]] = {}
    with torch.no_grad():
        for b in length_buckets(data.lengths, rows, batch) or [rows]:
            s = int(data.lengths[b].max())
            m = student.tensor(data.mask[b, :s])
            q = Quantiser(student.sites, student.weight_bits, NOMINAL, m.bool())
            student.body(student.tensor(data.emb[b, :s]), m, site=q.record)
            for k, (lo, hi) in q.ranges.items():
                a, c = ranges.get(k, (np.inf, -np.inf))
                ranges[k] = (min(a, lo), max(c, hi))
    return ranges


def holdout_cosines(student: Student, data: TrainData, batch: int = 16) -> tuple[float, float]:
    """Mean cosine to the teacher on the held-out rows: (8-bit with set-wide ranges from the
    training rows, the nominal quantiser; FP32)."""
    rows = data.holdout_rows
    if not len(rows):
        return float("nan"), float("nan")
    calib = data.train_rows[np.linspace(0, len(data.train_rows) - 1, min(64, len(data.train_rows))).astype(int)]
    ranges = set_ranges(student, data, calib)
    q8, f32 = [], []
    with torch.no_grad():
        for b in length_buckets(data.lengths, rows, batch) or [rows]:
            s = int(data.lengths[b].max())
            e, m = student.tensor(data.emb[b, :s]), student.tensor(data.mask[b, :s])
            t = student.tensor(data.teacher[b])
            q = Quantiser(student.sites, student.weight_bits, NOMINAL, m.bool())
            q.ranges = dict(ranges)
            q8 += (sentence_vectors(student.body(e, m, site=q.site, weight=q.weight), m) * t).sum(-1).tolist()
            f32 += (sentence_vectors(student.body(e, m), m) * t).sum(-1).tolist()
    return float(np.mean(q8)), float(np.mean(f32))


# -- checkpoints ------------------------------------------------------------------------------------
def save_state(path: Path, key: str, step: int, student: Student, opt, history: list, extra: dict) -> None:
    state = {"key": key, "step": step, "params": student.body.state_dict(), "opt": opt.state_dict(),
             "history": history, **extra}
    write_atomic(path, lambda tmp: torch.save(state, tmp))


def load_state(path: Path, key: str):
    if not path.is_file():
        return None
    try:
        state = torch.load(path, weights_only=False, map_location=CPU)
    except Exception as e:  # a torn or foreign file: start over, saying so
        log.warning("ignoring unreadable checkpoint %s (%s)", path, e)
        return None
    return state if state.get("key") == key else None


# -- the loop ---------------------------------------------------------------------------------------
def lr_at(step: int, cfg: TrainSettings) -> float:
    warm = max(1, cfg.steps // 20)
    if step < warm:
        return cfg.lr * (step + 1) / warm
    return cfg.lr * max(0.1, 1 - (step - warm) / max(1, cfg.steps - warm))


def fmt_seconds(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


@dataclass
class Fresh:
    """What a fresh start computes before step 1 and a checkpoint keeps for a resumed run."""

    history: list
    extra: dict  # e.g. the damping report and the hinge caps


def train(student: Student, data: TrainData, cfg: TrainSettings, checkpoint: Checkpoint,
          say: Callable[[str], None], fresh: Callable[[], Fresh]) -> tuple[int, list[dict], dict]:
    """Trains ``student`` in place, checkpointing to ``checkpoint.path``; returns (the step it
    resumed from, the history, the checkpoint's extra data). ``fresh()`` runs on a new start only
    (damping, the first measurements); a resumed run takes its results from the checkpoint."""
    path, key = checkpoint.path, checkpoint.key
    opt = torch.optim.AdamW(student.body.parameters(), lr=cfg.lr, weight_decay=0.0)
    state = None if checkpoint.restart else load_state(path, key)
    if state is None:
        start = 0
        f = fresh()
        history, extra = f.history, f.extra
    else:
        student.body.load_state_dict(state["params"])
        opt.load_state_dict(state["opt"])
        start, history = int(state["step"]), list(state["history"])
        extra = {k: v for k, v in state.items() if k not in ("key", "step", "params", "opt", "history")}
        say(f"resuming from the checkpoint at step {start}/{cfg.steps}")
    caps = extra.get("caps", {})
    batches = length_buckets(data.lengths, data.train_rows, cfg.batch)
    t0, done_here, recent = time.perf_counter(), 0, []
    completed, saved = start, start  # steps applied to the weights / in the checkpoint
    try:
        for step in range(start, cfg.steps):
            gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
            b = batches[int(torch.randint(len(batches), (1,), generator=gen))]
            variant = draw_variant(gen, cfg.randomise, 0.0)
            s = int(data.lengths[b].max())
            for g in opt.param_groups:
                g["lr"] = lr_at(step, cfg)
            batch = Batch(student.tensor(data.emb[b, :s]), student.tensor(data.mask[b, :s]),
                          student.tensor(data.teacher[b]))
            loss, parts = step_loss(student, batch, variant, gen, caps, cfg)
            opt.zero_grad(set_to_none=True)
            if not torch.isfinite(loss):  # a degenerate draw: skip it rather than poison the weights
                continue
            loss.backward()
            torch.nn.utils.clip_grad_norm_(student.body.parameters(), 1.0)
            opt.step()
            done_here += 1
            completed = step + 1
            recent.append(parts)
            if done_here == 1 and cfg.steps - step > 1:  # the cost, known after one step
                per = time.perf_counter() - t0
                say(f"step {step + 1}/{cfg.steps}: {per:.1f} s/step, ETA {fmt_seconds(per * (cfg.steps - step - 1))}")
            if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps:
                entry = {"step": step + 1}
                for k in ("fp32", "a8", "hinge"):
                    vals = [p[k] for p in recent if k in p]
                    if vals:
                        entry[k] = round(float(np.mean(vals)), 5)
                if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
                    q8, f32 = holdout_cosines(student, data)
                    entry["holdout_a8"], entry["holdout_fp32"] = round(q8, 5), round(f32, 5)
                history.append(entry)
                recent = []
                save_state(path, key, step + 1, student, opt, history, extra)
                saved = step + 1
                per = (time.perf_counter() - t0) / done_here
                left = per * (cfg.steps - step - 1)
                held = (f", held-out cosine to FP32: 8-bit {entry['holdout_a8']:.4f}, FP32 {entry['holdout_fp32']:.4f}"
                        if "holdout_a8" in entry else "")
                say(f"step {step + 1}/{cfg.steps}: loss FP32 {entry.get('fp32', 0):.4f}, "
                    f"8-bit {entry.get('a8', 0):.4f}{held}; {per:.1f} s/step, ETA {fmt_seconds(left)}")
    except KeyboardInterrupt:
        if completed > saved:
            save_state(path, key, completed, student, opt, history, extra)
        say(f"interrupted: checkpoint at step {max(completed, saved)}; run the same command again to continue")
        raise
    return start, history, extra

"""Straight-through fake quantisation in torch, and the quantiser variants training draws from
(needs torch: the compile extra).

The rounding is the NPU simulation's (:mod:`hefsearch.compile.sim.graph`): per-tensor asymmetric
unsigned integers for activations, symmetric integers for weights, ranges from min/max over the
real (unpadded) tokens. Here the range is computed from the batch itself, differentiably, and
the step size gets the LSQ gradient (Esser et al. 2019): the network is told how its extreme
values coarsen everyone else's steps, which is what lets it shrink outlier channels rather than
only learn to live with the noise. The rounding itself is straight-through.

A :class:`Variant` is one guess at what the real compiler does: min/max ranges, ranges widened
(a larger calibration set sees larger extremes), percentile-clipped ranges, per-channel or
per-tensor weights, round-to-nearest or uniform rounding noise, or no quantisation at all
(keeps the body's own FP32 vectors on the original's).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


class _FakeQuant(torch.autograd.Function):
    """y = (clamp(round(x / s) + z, 0, L) - z) * s; STE for round, LSQ gradient for s."""

    @staticmethod
    def forward(ctx, x, scale, zp, levels: int, noise: torch.Tensor | None):
        v = x / scale + zp
        r = torch.round(v) if noise is None else v + noise
        q = torch.clamp(r, 0, levels)
        ctx.save_for_backward(x, scale, zp)
        ctx.levels = levels
        ctx.noise = noise
        return (q - zp) * scale

    @staticmethod
    def backward(ctx, g):
        x, scale, zp = ctx.saved_tensors
        # an 8-bit variance that rounded to zero sends 1/sqrt(eps)-sized values down some
        # paths; their gradients overflow and carry no information: drop them
        g = torch.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0)
        v = x / scale + zp
        r = torch.round(v) if ctx.noise is None else v + ctx.noise
        inside = (r >= 0) & (r <= ctx.levels)
        q = torch.clamp(r, 0, ctx.levels)
        gx = torch.where(inside, g, torch.zeros_like(g))
        gs = torch.nan_to_num(g * torch.where(inside, q - v, q - zp), nan=0.0, posinf=0.0, neginf=0.0)
        return gx, _sum_to(gs, scale.shape), None, None, None


def _sum_to(t: torch.Tensor, shape) -> torch.Tensor:
    if t.shape == shape:
        return t
    while t.dim() > len(shape):
        t = t.sum(0)
    for i, n in enumerate(shape):
        if n == 1 and t.shape[i] != 1:
            t = t.sum(i, keepdim=True)
    return t


class _SiteQuant(torch.autograd.Function):
    """An activation site: fixed range [lo, hi] from the FP32 pass; STE for the rounding (the
    in-range mask is all the backward keeps). With ``tie``, the LSQ gradient of the step size
    goes to the tensor's own extreme elements (the range moves with them), added inside this
    backward so no full-size buffers are made for it. Few elementwise passes: on a busy 2-core
    host they, not the MatMuls, are the cost of a step."""

    @staticmethod
    def forward(ctx, x, lo: float, hi: float, levels: int, tie: bool):
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        scale = max((hi - lo) / levels, 1e-8)
        zp = float(min(max(round(-lo / scale), 0), levels))
        r = torch.round(x * (1.0 / scale))
        inside = (r >= -zp) & (r <= levels - zp)
        ctx.args = (lo, hi, scale, zp, levels, tie)
        if tie:
            flat = x.detach().reshape(-1)
            ctx.extremes = (int(torch.argmin(flat)), int(torch.argmax(flat)))
            ctx.save_for_backward(inside, x)
        else:
            ctx.save_for_backward(inside)
        return r.clamp_(-zp, levels - zp).mul_(scale)

    @staticmethod
    def backward(ctx, g):
        inside = ctx.saved_tensors[0]
        lo, hi, scale, zp, levels, tie = ctx.args
        # an 8-bit variance that rounded to zero sends 1/sqrt(eps)-sized values down some
        # paths; their gradients overflow and carry no information: drop them
        g = torch.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0)
        gx = g * inside
        if tie:
            x = ctx.saved_tensors[1]
            v = x * (1.0 / scale)
            q = torch.round(v).clamp_(-zp, levels - zp)
            # d y / d scale: q - v inside the range (LSQ), the clamped level outside
            gs = float(torch.nan_to_num((g * torch.where(inside, q - v, q)).sum()))
            flat = gx.view(-1)
            xf = x.detach().reshape(-1)
            i_lo, i_hi = ctx.extremes
            # scale = (hi - lo) / levels and hi = recorded hi * x[i_hi] / x[i_hi] (value 1)
            if hi > 0 and float(xf[i_hi]) > 0:
                flat[i_hi] += gs / levels * hi / float(xf[i_hi])
            if lo < 0 and float(xf[i_lo]) < 0:
                flat[i_lo] -= gs / levels * lo / float(xf[i_lo])
        return gx, None, None, None, None


def fake_quant_weight(w: torch.Tensor, bits: int, per_channel: bool, stochastic: bool = False,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """Symmetric fake quantisation of a [in, out] MatMul weight, per output column or per tensor;
    ``stochastic``: each weight rounded up or down at random (a stand-in for the compiler's own
    weight-rounding choices, e.g. AdaRound, instead of round-to-nearest)."""
    qmax = 2 ** (bits - 1) - 1
    amax = w.abs().amax(dim=0, keepdim=True) if per_channel else w.abs().amax()
    scale = torch.clamp(amax / qmax, min=1e-12)
    zp = torch.full_like(scale, float(qmax)).detach()
    noise = None
    if stochastic:  # floor(v + u) = v + (u - frac(v)) ... as an offset added to v before clamping
        v = (w.detach() / scale.detach()) + zp
        # drawn on the CPU whatever the device: the same stream gives the same rounding on CUDA
        noise = torch.floor(v + torch.rand(w.shape, generator=generator).to(v.device)) - v
    return _FakeQuant.apply(w, scale, zp, 2 * qmax, noise)


@dataclass(frozen=True)
class Variant:
    ranges: str = "minmax"  # "minmax" | "wide" | "percentile" | "none" (FP32)
    widen: float = 1.0  # "wide": the range times this
    percentile: float = 99.99  # "percentile": clip at this percentile of the site's values
    per_channel: bool = True  # weights per output channel, else per tensor
    noise: bool = False  # weights rounded stochastically instead of to nearest

    @property
    def quantised(self) -> bool:
        return self.ranges != "none"

    def describe(self) -> str:
        if not self.quantised:
            return "fp32"
        r = {"minmax": "min/max", "wide": f"min/max x{self.widen:.2f}",
             "percentile": f"p{self.percentile:g}"}[self.ranges]
        return f"{r}, {'per-channel' if self.per_channel else 'per-tensor'} weights, " \
               f"{'stochastic' if self.noise else 'nearest'} weight rounding"


NOMINAL = Variant()


def draw_variant(gen: torch.Generator, randomise: bool, fp32_share: float) -> Variant:
    """One training step's quantiser: mostly min/max as the build does, the rest perturbed."""
    u = torch.rand(6, generator=gen).tolist()
    if u[0] < fp32_share:
        return Variant(ranges="none")
    if not randomise:
        return NOMINAL
    ranges = "minmax" if u[1] < 0.5 else ("wide" if u[1] < 0.8 else "percentile")
    return Variant(ranges=ranges, widen=1.0 + 0.3 * u[2], percentile=(99.9, 99.99, 99.999)[int(u[3] * 3) % 3],
                   per_channel=u[4] < 0.6, noise=u[5] < 0.2)


class Quantiser:
    """The two :class:`~hefsearch.compile.robust.onnx_torch.OnnxBody` hooks for one forward pass.

    ``sites`` maps a site tensor to its bits; ``real`` is the [N, S] boolean token mask (ranges
    are taken over real query tokens, as the simulation's calibration does).

    Two passes per step, as a build calibrates: :meth:`record` (an FP32 pass, no gradient)
    measures every site's range on the batch; :meth:`site` then rounds with those ranges. A
    range measured on the *quantised* pass would follow its errors (a LayerNorm whose variance
    rounded to zero makes 1e6-sized values) instead of clipping them as the build does. The
    step size still gets a gradient: it is tied, with value 1, to the quantised pass's own
    extremes (LSQ), so the network learns what its outliers cost the other values.
    """

    PERCENTILE_SAMPLE = 1 << 16

    def __init__(self, sites: dict[str, int], weight_bits: dict[str, int], variant: Variant,
                 real: torch.Tensor, generator: torch.Generator | None = None, tie: frozenset = frozenset()):
        self.sites, self.weight_bits, self.variant, self.real = sites, weight_bits, variant, real
        #: sites whose step size is tied to their own extremes (the outlier-carrying ones)
        self.tie = tie
        self.gen = generator
        self.ranges: dict[str, tuple[float, float]] = {}
        self.all_real = bool(real.all())

    def _real_values(self, v: torch.Tensor) -> torch.Tensor:
        if self.all_real:
            return v
        n, s = self.real.shape
        if v.dim() == 3 and v.shape[:2] == (n, s):
            return v[self.real]
        if v.dim() == 4 and v.shape[0] == n and v.shape[2] == s:
            return v.transpose(1, 2)[self.real]
        return v

    def record(self, name: str, v: torch.Tensor) -> torch.Tensor:
        """Hook of the FP32 pass: the site's range under this variant's estimator."""
        if name not in self.sites or not self.variant.quantised:
            return v
        vals = self._real_values(v.detach())
        var = self.variant
        if var.ranges == "percentile":
            flat = vals.reshape(-1)
            if flat.numel() > self.PERCENTILE_SAMPLE:
                flat = flat[torch.randint(flat.numel(), (self.PERCENTILE_SAMPLE,), generator=self.gen).to(flat.device)]
            # the tails by top-k, not a sort of the sample (torch.quantile made this 20% of a step)
            k = max(1, int(round((1.0 - var.percentile / 100.0) * flat.numel())))
            hi = float(torch.topk(flat, k).values[-1])
            lo = float(-torch.topk(-flat, k).values[-1])
        else:
            mn, mx = torch.aminmax(vals)
            lo, hi = float(mn), float(mx)
            if var.ranges == "wide":
                lo, hi = lo * var.widen, hi * var.widen
        self.ranges[name] = (lo, hi)
        return v

    def site(self, name: str, v: torch.Tensor) -> torch.Tensor:
        bits = self.sites.get(name)
        if bits is None or not self.variant.quantised or name not in self.ranges:
            return v
        lo, hi = self.ranges[name]
        # the range follows the tensor's own extremes only when every token is real (padded
        # rows hold values the ranges never see); length-bucketed batches mostly are
        tie = self.all_real and v.requires_grad and name in self.tie
        return _SiteQuant.apply(v, lo, hi, 2**bits - 1, tie)

    def weight(self, name: str, w: torch.Tensor) -> torch.Tensor:
        bits = self.weight_bits.get(name)
        if bits is None or not self.variant.quantised:
            return w
        return fake_quant_weight(w, bits, self.variant.per_channel, self.variant.noise, self.gen)

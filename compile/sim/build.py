"""Build the NPU simulation: a fake-quantised copy of ``encoder.onnx`` (needs the ``onnx`` package).

``hefsearch compile sim BUNDLE --precision a8|balanced|FILE`` rewrites the FP32 encoder body
into ``encoder.npu-sim.<name>.onnx``, a graph that still runs on plain ONNX Runtime but rounds
every tensor an 8-bit NPU would store in 8 (or 16) bits, and lists it in the manifest as an
encoder of kind ``npu-sim``. The runtime backend (:mod:`hefsearch.embed.backends.npu_sim`)
only runs that file, so the Pi and a laptop need no ``onnx`` package.

What it rounds (the site groups of ``compile hef``, :mod:`hefsearch.embed.precision`): the weights
of every dense layer per output channel (int8, int16 in 16-bit groups), and per tensor, with
min/max ranges from calibration data, every activation an NPU stores: the embeddings input, the
LayerNorm internals, Q/K/V, scores, softmax, context, dense outputs, GELU, the residual adds and
the last hidden state. The mask goes inside softmax (the DFC's ``set_input_mask_to_softmax()``,
as HEF modes ``keys01`` and ``scores01``) or is ``additive`` and quantised with the scores (a
-10000 mask swamps the 8-bit score range; about -50 does not). It predicts what a build choice
costs, not a HEF's exact numbers: ranges are plain min/max, rounding is to nearest, biases and
LayerNorm gamma/beta stay in float.

The work is split by stage: :mod:`hefsearch.compile.sim.graph` rewrites the graph (LayerNorms
decomposed, weights rounded, mask rescaled, sites listed; then the fake-quant nodes),
:mod:`hefsearch.compile.sim.ranges` picks the calibration texts and measures the ranges, and
this module names the variant, runs the stages, checks the result against FP32 and writes the
file and the manifest entry.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from hefsearch.base.atomic_write import write_atomic
from hefsearch.embed.bundle import Bundle, EncoderEntry
from hefsearch.base.errors import ExportError
from hefsearch.embed.precision import PrecisionProfile, load_profile
from hefsearch.embed.samples import VERIFY_TEXTS
from hefsearch.embed import space_names

from hefsearch.compile.body_choice import Body, choose_body
from hefsearch.compile.self_check import self_check

from .graph import SimBuildError, SimGraph, insert_fake_quant, prepare_graph, with_site_outputs
from .ranges import (
    DEFAULT_CALIB_LIMIT, Calibration, calibration_from_bundle, calibration_from_texts, measure_ranges, parse_ranges,
)

log = logging.getLogger("hefsearch.compile")

#: mask value of the "softmax" mode: applied after quantisation, in float, so it only has to
#: drive exp() to zero
_SOFTMAX_MASK = -10000.0
SIM_KIND = space_names.NPU_SIM


# -- naming --------------------------------------------------------------------------------
def parse_mask(spec: str | None, profile: PrecisionProfile, bundle_mask_value: float) -> tuple[str, float]:
    """``None`` (the profile's own), ``inside``/``softmax`` (also the HEF mask modes ``keys01`` and
    ``scores01``, which apply the mask inside softmax), ``additive`` or ``additive:-10000`` ->
    (mode, value). The value of ``additive`` defaults to the bundle's export value."""
    if spec is None:
        mode, value = profile.mask, None
    else:
        s = spec.strip().lower()
        head, _, tail = s.partition(":")
        if head in ("inside", "softmax", "keys01", "scores01"):
            if tail:
                raise SimBuildError(f"Mask {spec!r}: the inside-softmax mode takes no value.",
                                    "Use --mask inside, or --mask additive:-10000.")
            mode, value = "softmax", None
        elif head == "additive":
            mode = "additive"
            try:
                value = float(tail) if tail else None
            except ValueError:
                raise SimBuildError(f"Mask {spec!r}: {tail!r} is not a number.",
                                    "Write e.g. --mask additive:-10000 or --mask additive:-50.") from None
        else:
            raise SimBuildError(f"Mask {spec!r} is unknown.",
                                "Use inside (= keys01, scores01), additive or additive:VALUE (e.g. -50).")
    if mode == "softmax":
        return "softmax", _SOFTMAX_MASK
    value = bundle_mask_value if value is None else value
    if not value < 0:
        raise SimBuildError(f"An additive mask value must be negative, not {value:g}.")
    return "additive", float(value)


def sim_name(profile: PrecisionProfile, mask_mode: str, mask_value: float, bundle_mask_value: float) -> str:
    """File-safe name of a simulation variant: ``a8``, ``balanced``, ``a8-additive10000``."""
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in profile.name)
    if mask_mode == profile.mask and (mask_mode == "softmax" or mask_value == bundle_mask_value):
        return name
    if mask_mode == "softmax":
        return f"{name}-inside"
    return f"{name}-additive{abs(mask_value):g}".replace(".", "p")


def variant_suffix(percentile: float | None, per_channel_weights: bool, body: Body) -> str:
    """What sets a build apart from the default quantiser and body: ``-pct99p99``, ``-wtensor``,
    ``-robust`` (appended to :func:`sim_name`)."""
    out = ""
    if percentile is not None:
        out += f"-pct{percentile:g}".replace(".", "p")
    if not per_channel_weights:
        out += "-wtensor"
    return out + body.suffix


def sim_label(name: str) -> str:
    return f"NPU simulation ({name})"


# -- the command's work --------------------------------------------------------------------
@dataclass
class SimReport:
    name: str
    label: str
    file: str
    profile: dict
    mask: dict
    calibration: str
    sites: int
    weights: int
    check: dict = field(default_factory=dict)
    seconds: float = 0.0
    notices: list[str] = field(default_factory=list)


@dataclass
class SimPlan:
    """What to build: the bundle, the profile, the mask and the variant's name and file."""

    bundle: Bundle
    profile: PrecisionProfile
    mask_mode: str
    mask_value: float
    name: str
    source: Path  # the body the simulation is built from
    body: Body
    percentile: float | None = None  # None: min/max ranges
    per_channel_weights: bool = True

    @property
    def file(self) -> str:
        return f"encoder.npu-sim.{self.name}.onnx"

    @property
    def mask_info(self) -> dict:
        return {"mode": self.mask_mode, "value": self.mask_value}


@dataclass(frozen=True)
class SimOptions:
    """The choices of one ``compile sim`` build (its flags): the ``mask`` (None: the profile's),
    the ``body`` (original, robust, auto), the range estimator (None: min/max;
    ``percentile:P``), the ``weights`` granularity, extra calibration ``texts`` and the rows of
    the calibration set used (``calib_limit``), and a ``name`` that replaces the derived one (a
    bench's variant with its own calibration subset)."""

    mask: str | None = None
    body: str | None = "original"
    ranges: str | None = None
    weights: str = "per-channel"
    texts: Sequence[str] = ()
    calib_limit: int | None = DEFAULT_CALIB_LIMIT
    name: str | None = None


def plan_sim(bundle: Bundle | str | Path, precision, options: SimOptions = SimOptions(),
             progress: Callable[[str], None] | None = None) -> SimPlan:
    """Consumes the command's arguments; produces the :class:`SimPlan` (stops on a bad mask,
    range estimator or weight granularity, or a missing body). ``body`` ``auto`` (the
    command's default) chooses as ``compile hef --body auto`` does for an all-8-bit build
    (:func:`~hefsearch.compile.body_choice.choose_body`, damping a multilingual bundle's body first
    when it has no robust one); None is the original."""
    mask, body, ranges, weights = options.mask, options.body, options.ranges, options.weights
    if not isinstance(bundle, Bundle):
        bundle = Bundle.open(bundle)
    profile = load_profile(precision)
    mode, value = parse_mask(mask, profile, bundle.mask_value)
    percentile = parse_ranges(ranges)
    if weights not in ("per-channel", "per-tensor"):
        raise SimBuildError(f"Weight granularity {weights!r} is unknown.", "Use per-channel or per-tensor.")
    say = progress or (lambda m: None)
    maker = None
    if (body or "").strip().lower() == "auto" and profile.is_all_8bit:
        from hefsearch.compile.robust.build import damped_body_maker

        maker = damped_body_maker(say)
    src, why = choose_body(bundle, body or "original", None, profile.is_all_8bit, maker)
    say(f"encoder body: {src.file} ({why})")
    per_channel = weights == "per-channel"
    name = sim_name(profile, mode, value, bundle.mask_value) + variant_suffix(percentile, per_channel, src)
    return SimPlan(bundle, profile, mode, value, name, src.path(bundle), src, percentile, per_channel)


def choose_calibration(bundle: Bundle, texts: Sequence[str], calib_limit: int | None
                       ) -> tuple[Calibration, list[str]]:
    """The bundle's calibration set, else the built-in sample texts plus ``texts``; returns it
    with the notices telling the user which one was used."""
    notices: list[str] = []
    calib = calibration_from_bundle(bundle, calib_limit)
    if calib is None:
        calib = calibration_from_texts(
            bundle, list(VERIFY_TEXTS) + list(texts),
            f"built-in sample texts ({len(VERIFY_TEXTS)})" + (f" + {len(texts)} given texts" if texts else ""),
        )
        notices.append(
            "The bundle has no calibration set (hefsearch compile calib); activation ranges come from "
            f"{calib.source}. A HEF build calibrates on your documents; run 'compile calib' for a closer match."
        )
    elif texts:
        notices.append("Given texts were not used: the bundle's calibration set is.")
    return calib, notices


def write_sim_model(plan: SimPlan, final) -> str:
    """Saves the simulated model next to the FP32 body (atomically); returns its file name."""
    import onnx

    rel = plan.file
    write_atomic(plan.bundle.path / rel, lambda tmp: onnx.save(final, tmp))
    return rel


def record_sim(plan: SimPlan, calib: Calibration, sim: SimGraph, ranges: dict, check: dict) -> None:
    """Lists the written simulation in the manifest as an encoder of kind ``npu-sim``."""
    bundle, profile, name = plan.bundle, plan.profile, plan.name
    by_group: dict[str, int] = {}
    for s in sim.sites:
        by_group[s.group] = by_group.get(s.group, 0) + 1
    bundle.add_file(plan.file)
    bundle.upsert_encoder(EncoderEntry(
        kind=SIM_KIND, file=plan.file, seq_len=None, hw_arch=None,
        extra={
            "name": name,
            "label": sim_label(name),
            "precision": profile.to_dict(),
            "mask": plan.mask_info,
            "body": {"name": plan.body.name, "file": plan.body.file, "sha256": plan.body.sha256},
            "weights": f"{'per-channel' if plan.per_channel_weights else 'per-tensor'} symmetric "
                       "(int8; int16 in 16-bit groups)",
            "activations": "per-tensor asymmetric "
                           + ("min/max" if plan.percentile is None else f"percentile {plan.percentile:g}")
                           + " (uint8; uint16 in 16-bit groups)",
            "calibration": {"source": calib.source, "texts": int(len(calib.embeddings)),
                            "seq_len": int(calib.embeddings.shape[1])},
            "sites_per_group": by_group,
            "ranges": {s.tensor: [round(ranges[s.tensor][0], 6), round(ranges[s.tensor][1], 6), s.group]
                       for s in sim.sites},
            "check": check,
        },
    ))
    bundle.save_manifest()


def build_sim(
    bundle: Bundle | str | Path,
    precision: str | Path | PrecisionProfile | None = "balanced",
    options: SimOptions = SimOptions(),
    progress: Callable[[str], None] | None = None,
) -> SimReport:
    """Write ``encoder.npu-sim.<name>.onnx`` into the bundle and list it in the manifest.

    Stages: plan -> calibration texts -> graph rewrite -> ranges -> fake quantisation -> write
    -> check against FP32 -> manifest.
    """
    try:
        import onnx
    except ImportError:
        raise ExportError("Building the NPU simulation needs the onnx package.",
                          "pip install 'hefsearch[compile]'") from None
    t0 = time.perf_counter()
    say = progress or (lambda m: None)
    plan = plan_sim(bundle, precision, options, progress=say)
    if options.name:  # e.g. a bench's variant with its own calibration subset
        plan.name = "".join(c if c.isalnum() or c in "-_" else "-" for c in options.name)
    profile, mode, value = plan.profile, plan.mask_mode, plan.mask_value
    calib, notices = choose_calibration(plan.bundle, options.texts, options.calib_limit)
    sixteen = ", ".join(profile.sixteen_bit) or "none"
    say(f"simulating {profile.name} (16-bit: {sixteen}) with the mask {'inside softmax' if mode == 'softmax' else f'additive {value:g}'}")

    sim = prepare_graph(onnx.load(str(plan.source)), profile, mask_mode=mode, mask_value=value,
                        bundle_mask_value=plan.bundle.mask_value, per_channel_weights=plan.per_channel_weights)
    ranges = measure_ranges(with_site_outputs(sim), calib, sim.sites, progress=say, percentile=plan.percentile)
    rel = write_sim_model(plan, insert_fake_quant(sim, ranges, profile))
    check = self_check(plan.bundle, rel)
    record_sim(plan, calib, sim, ranges, check)
    return SimReport(
        name=plan.name, label=sim_label(plan.name), file=rel, profile=profile.to_dict(), mask=plan.mask_info,
        calibration=calib.source, sites=len(sim.sites), weights=len(sim.weights), check=check,
        seconds=time.perf_counter() - t0, notices=notices,
    )

"""The plan of a ``compile hef`` build: the options checked, the chip's recipe, the fallback ladder.

:func:`plan_build` is the build's first stage and loads no SDK: it stops a bad ``--hw-arch``,
``--seq-len`` or ``--mask`` at once and returns the :class:`HefPlan` every later stage reads,
with the chip's recipe on record (Hailo-10H: the public report's mask ``keys01`` and model
script; Hailo-8/8L: the zoo MiniLM's ``scores01``) and the ladder of precision profiles to try
in turn (:func:`build_ladder`) when a profile hits one of the walls (:mod:`.errors`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from hefsearch.embed.bundle import Bundle
from hefsearch.embed.mask_layout import HEF_MASK_MODES, hef_mask_mode
from hefsearch.embed.precision import PrecisionProfile, fallback_ladder, load_profile

from hefsearch.compile.body_choice import Body, choose_body
from .errors import CompileError
from .model_script import (DFC_FINETUNE_LINE, RECIPE_HAILO10H, REPORT_BATCH, REPORT_CALIBSET, read_extra_lines,
                           recipe_for)

#: the chips ``compile hef`` builds for
HW_ARCHS = ("hailo10h", "hailo8", "hailo8l")
#: the precision profile a build starts from when none is asked for (the ladder steps down)
DEFAULT_PRECISION = "balanced"
#: per chip: on Hailo-10H the one 16-bit rung with Hailo-10H evidence beside the mask command (a16 on the
#: input and the residual adds, no a16 conv: Hailo's Qwen2 recipe), then the report's 8-bit script;
#: docs/compiling.md says why, and why not zoo-a16 (a16 convs) first
DEFAULT_PRECISION_FOR = {"hailo10h": "residual-a16"}
#: the name of the Hailo-10H ladder's last rung: the public report's 8-bit script, exactly
REPORT_RUNG = "a8"
#: the HEF mask mode on record for each chip (compile/hef/build.py's docstring has the sources)
DEFAULT_MASK = {"hailo10h": "keys01", "hailo8": "scores01", "hailo8l": "scores01"}


@dataclass
class HefOptions:
    hw_arch: str
    seq_len: int | None = None
    #: a profile name or file; None = DEFAULT_PRECISION
    precision: str | Path | PrecisionProfile | None = None
    #: MZ uses 0 for every transformer text encoder; 2 is the DFC's default (wants a GPU)
    optimization_level: int = 0
    compression_level: int = 0
    alls_extra: str | Path | None = None
    #: step down on the known walls; None = on
    fallback: bool | None = None
    report: bool = True
    calib: str | Path | None = None  # an .npz with embeddings/mask; default: the bundle's set
    #: calibration batch; None = the recipe's (16 in the Hailo-10H report and the zoo's BERT, 8 in its MiniLM)
    calib_batch_size: int | None = None
    work_dir: str | Path | None = None
    restart: bool = False  # ignore saved stages
    #: a HEF mask mode (keys01, scores01, additive; embed/mask_layout.py) or None: the chip's default
    mask: str | None = None
    #: which encoder body to compile: "original" (encoder.onnx), "robust" (compile robust) or
    #: "auto"/None: the robust one on Hailo-10H when its recorded measurements say it helps
    body: str | None = None
    #: the DFC's own quantisation-aware fine-tuning (QFT) after quantisation; wants a GPU
    dfc_finetune: bool = False


@dataclass
class HefPlan:
    """The checked options, before any SDK is loaded: what to build and the profiles to try."""

    bundle: Bundle
    seq: int
    requested: PrecisionProfile
    ladder: list[PrecisionProfile]  # the requested profile, then its fallbacks with --fallback
    extra_lines: list[str]
    mask_mode: str  # a HEF mask mode: keys01, scores01, additive
    mask_explicit: bool  # --mask was given (else the chip's default, which a missing command may change)
    recipe: str  # model_script.RECIPE_HAILO10H or RECIPE_ZOO
    fallback: bool
    body: Body | None = None  # the encoder body compiled (None: the original)
    #: the last rung writes the public Hailo-10H report's script exactly (no --alls-extra lines,
    #: optimisation and compression level 0, calibration batch 16), whatever the options
    report_rung: bool = False
    #: any failure of a rung before the last, whatever its exception, steps down (Hailo-10H, where
    #: those rungs are 16-bit or carry the user's own options); elsewhere only the known walls do
    step_down_on_any: bool = False

    @property
    def mask_command(self) -> bool:
        return hef_mask_mode(self.mask_mode).softmax_command

    def calibration(self, rows: int, batch_size: int | None) -> tuple[int, int]:
        """(calibset_size, batch_size) for ``rows`` calibration rows: the report's 1024 / 16 on
        Hailo-10H, the zoo's batch (8 for MiniLM, 16 for BERT) elsewhere."""
        if batch_size is None:
            batch_size = REPORT_BATCH if self.recipe == RECIPE_HAILO10H or self.mask_mode == "additive" else 8
        return min(rows, REPORT_CALIBSET), min(int(batch_size), rows)


def build_ladder(requested: PrecisionProfile, hw_arch: str, fallback: bool,
                 own_settings: bool = False) -> list[PrecisionProfile]:
    """The profiles to try in turn. Hailo-10H: the requested one (by default ``residual-a16``, no
    a16 conv), then straight to the public report's 8-bit script, the one build on record for that
    chip (the report and community thread 19530 saw 16-bit builds fail in ways no intermediate rung
    is known to avoid, and each attempt costs up to an hour of CPU), so a HEF comes by the second
    attempt at the latest; ``own_settings`` (extra lines, other levels) makes even
    an all-8-bit request a rung of its own before it. Other chips: one site group at a time
    (embed/precision.py ``fallback_ladder``)."""
    if not fallback:
        return [requested]
    if hw_arch == "hailo10h":
        a8 = PrecisionProfile(REPORT_RUNG, {}, requested.mask)
        if not requested.same_bits(a8):
            return [requested, a8]
        return [replace(requested, name=f"{requested.name}+options"), a8] if own_settings else [requested]
    return fallback_ladder(requested)


def plan_build(bundle: Bundle | str | Path, opts: HefOptions, say: Callable[[str], None]) -> HefPlan:
    """Consumes the bundle and the options; produces the :class:`HefPlan` (stops on a bad
    --hw-arch, --seq-len or --mask before anything slow)."""
    if not isinstance(bundle, Bundle):
        bundle = Bundle.open(bundle)
    if opts.hw_arch not in HW_ARCHS:
        raise CompileError(f"Unknown --hw-arch {opts.hw_arch!r}.", f"Use one of: {', '.join(HW_ARCHS)}.")
    seq = int(opts.seq_len or bundle.seq_len)
    if not 8 <= seq <= bundle.seq_len:
        raise CompileError(f"--seq-len {seq} is outside 8..{bundle.seq_len} (the bundle's window).",
                           "Re-export the bundle with a longer --seq-len to compile a longer window.")
    requested = load_profile(opts.precision or DEFAULT_PRECISION_FOR.get(opts.hw_arch, DEFAULT_PRECISION))
    try:
        mode = hef_mask_mode(opts.mask or DEFAULT_MASK[opts.hw_arch])
    except ValueError:
        raise CompileError(f"Unknown --mask {opts.mask!r}.", f"Use one of: {', '.join(HEF_MASK_MODES)}.") from None
    if opts.mask and DEFAULT_MASK[opts.hw_arch] != mode.name:
        say(f"note: mask mode {mode.name} follows {mode.source}; it is shown for {mode.shown_on}, not for "
            f"{opts.hw_arch}'s default ({DEFAULT_MASK[opts.hw_arch]}).")
    requested = replace(requested, mask=mode.profile_mask)
    fallback = True if opts.fallback is None else bool(opts.fallback)
    extra = read_extra_lines(opts.alls_extra)
    if opts.dfc_finetune:
        say("note: --dfc-finetune runs the DFC's quantisation-aware fine-tuning, which wants a GPU (TensorFlow; "
            "at any optimisation level: the zoo's Hailo-10H CLIP text encoder fine-tunes at level 0); "
            "'hefsearch compile robust' does the same job on any CPU, before the DFC.")
        extra = [DFC_FINETUNE_LINE, *extra]
    recipe = recipe_for(opts.hw_arch)
    report_rung = fallback and recipe == RECIPE_HAILO10H and mode.name == "keys01"
    own = any(ln.strip() for ln in extra) or opts.optimization_level != 0 or opts.compression_level != 0 \
        or (opts.calib_batch_size not in (None, REPORT_BATCH))
    ladder = build_ladder(requested, opts.hw_arch, fallback, own_settings=own and report_rung)
    if requested.attention_sixteen_bit:
        say(f"warning: profile {requested.name} puts 16 bits on the attention path "
            f"({', '.join(requested.attention_sixteen_bit)}); DFC 5.3.0 failed to allocate exactly that.")
    from hefsearch.compile.robust.build import damped_body_maker

    body, why = choose_body(bundle, opts.body, opts.hw_arch, requested.is_all_8bit, damped_body_maker(say))
    say(f"encoder body: {body.file} ({why})")
    return HefPlan(bundle, seq, requested, ladder, extra, mode.name, bool(opts.mask), recipe, fallback, body,
                   report_rung=report_rung,
                   step_down_on_any=opts.hw_arch == "hailo10h")



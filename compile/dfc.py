"""The Dataflow Compiler driver: bundle + calibration -> HEF, in stages that resume.

    parse     DFC-facing ONNX (compile/dfc_onnx.py) -> translate_onnx_model -> parsed.har
    preflight calibration arrays vs the parsed input layers (compile/preflight.py)
    optimize  model script from the precision profile -> optimize(calib) -> optimized-<key>.har
    report    SDK_NATIVE vs SDK_QUANTIZED on the bundled sentences (compile/emulator_report.py)
    compile   runner.compile() -> encoder.<hw_arch>[.s<SEQ>].hef, manifest updated

Each stage is one function (``parse_stage``, ``preflight_stage``, ``optimize_stage``,
``report_stage``, ``compile_stage``; ``plan_build`` checks the options first) that returns a
small dataclass for the next; :func:`build_hef` only runs them and walks the fallback ladder.
Every stage saves its result in the work folder (default ``BUNDLE/build/<hw_arch>.s<SEQ>/``)
keyed by what it depends on, so a re-run skips what is done: a failed compile never redoes an
optimisation that took hours. ``hailo_sdk_client`` is imported only here, at call time.

Verified against the contract fake in ``tests/fakes/hailo_sdk_client`` only (written from Hailo's
public scripts and a public user report); no real Dataflow Compiler has run this code.

Defaults per chip (what is on record; docs/hailo-facts.md has the sources):

- ``hailo10h``: the one sentence-encoder HEF on record for that chip (a user report,
  ``shared/reference/seeds/000_0bd7e697973448cf.txt``, DFC 5.3.0): mask mode ``keys01``
  (:mod:`hefsearch.embed.mask_layout`) and that report's model script
  (:data:`model_script.RECIPE_HAILO10H`). The ladder is on: the first rung is ``balanced``
  (16 bits off the attention path only), and on either wall that report hit it goes straight to
  the report's 8-bit script, since the report found the mere presence of an a16 layer to crash
  the allocator (intermediate rungs would cost another optimisation each for the same crash).
- ``hailo8`` / ``hailo8l``: the model zoo's all_minilm_l6_v2 recipe (mask mode ``scores01``,
  the zoo's script) on DFC 3.34+, where the zoo uses ``set_input_mask_to_softmax()``; on other
  DFC 3.x the command is probed on the parsed network and, when it is missing and no ``--mask``
  was given, the build switches to the zoo's BERT recipe (``additive``). The ladder steps down
  group by group (FFN output projections, LayerNorm internals, residual adds, a8).

Known failure modes and what happens:

- no DFC: :class:`DfcUnavailable` with how to get it (x86_64 Linux, Python 3.10-3.12, the
  Hailo AI Software Suite or the DFC wheel from Hailo's Developer Zone);
- calibration of the wrong rank/shape: stopped by the preflight before ``optimize()`` (the
  SDK would raise an ``IndexError`` inside LayerNorm decomposition);
- the two walls of the Hailo-10H report, recognised by name (also wrapped in another
  exception, or named only in a message): ``NegativeSlopeExponentNonFixable`` in optimize() and
  ``BackendAllocatorException`` in compile() (or optimize()). With the ladder (the default) the
  build steps down, re-optimising only for profiles not optimised before; without it, or at the
  last rung, the wall is explained. Every attempt is recorded in the work folder's
  ``build-report.json`` and in the manifest, which also records the profile the HEF finally has.
"""

from __future__ import annotations

import hashlib
import json
import logging
import platform
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from hefsearch.embed.atomic_write import write_bytes_atomic, write_json_atomic
from hefsearch.embed.bundle import Bundle, EncoderEntry, sha256_file
from hefsearch.embed.errors import BackendUnavailable, HefsearchError
from hefsearch.embed.hef_contract import HefContract, check_contract
from hefsearch.embed.mask_layout import HEF_MASK_MODES, MaskLayout, hef_mask_mode
from hefsearch.embed.versions import major_version
from hefsearch.embed.precision import PrecisionProfile, fallback_ladder, load_profile

from . import calib as calib_mod
from .bodies import Body, resolve_body
from .dfc_onnx import EMBEDDINGS, MASK, OUTPUT, make_dfc_onnx, verify_dfc_onnx
from .model_script import (DFC_FINETUNE_LINE, MASK_COMMAND, RECIPE_HAILO10H, REPORT_BATCH, REPORT_CALIBSET,
                           build_model_script, read_extra_lines, recipe_for, site_layers)
from .preflight import calibration_dict, input_layers, preflight

log = logging.getLogger("hefsearch.compile")

HW_ARCHS = ("hailo10h", "hailo8", "hailo8l")
NET_NAME = "hefsearch_encoder"  # no dots: the DFC turns them into "_" in layer names
STATE_FILE = "state.json"
_STATE_VERSION = 1


class DfcUnavailable(BackendUnavailable):
    """The Hailo Dataflow Compiler (hailo_sdk_client) cannot be imported."""

    title = "Dataflow Compiler not installed"


class CompileError(HefsearchError):
    title = "compile error"


class AllocatorCrash(CompileError):
    """The DFC allocator could not place the network (BackendAllocatorException)."""

    title = "allocator failure"


class NegativeExponentWall(CompileError):
    """optimize() could not fix a negative slope exponent (NegativeSlopeExponentNonFixable)."""

    title = "quantisation failure"


class MaskCommandMissing(CompileError):
    """The DFC refused set_input_mask_to_softmax() on the parsed network."""


@dataclass
class Sdk:
    ClientRunner: type
    InferenceContext: object
    Dims: object | None
    version: str


def load_sdk() -> Sdk:
    """Import the DFC now; a missing SDK becomes a plain :class:`DfcUnavailable`."""
    try:
        import hailo_sdk_client
        from hailo_sdk_client import ClientRunner
        from hailo_sdk_client.exposed_definitions import InferenceContext
    except ImportError as e:
        here = f"{platform.system()} {platform.machine()}, Python {sys.version_info.major}.{sys.version_info.minor}"
        raise DfcUnavailable(
            f"The Hailo Dataflow Compiler (Python package hailo_sdk_client) is not installed here "
            f"({here}; import failed: {e}).",
            "Compiling a HEF needs an x86_64 Linux host (Ubuntu 22.04/24.04) with Python 3.10-3.12 and "
            "either the Hailo AI Software Suite (Docker image) or the Dataflow Compiler wheel "
            "(hailo_dataflow_compiler-<ver>-py3-none-linux_x86_64.whl) from Hailo's Developer Zone "
            "(free account). DFC 5.x builds for Hailo-10H, DFC 3.x for Hailo-8/8L. Everything else "
            "(export, calibration, search) works without it.",
        ) from None
    try:
        from hailo_sdk_client.exposed_definitions import Dims
    except ImportError:
        Dims = None
    return Sdk(ClientRunner, InferenceContext, Dims, str(getattr(hailo_sdk_client, "__version__", "unknown")))


#: the precision profile a build starts from when none is asked for (the ladder steps down)
DEFAULT_PRECISION = "balanced"
#: the HEF mask mode on record for each chip (see the module docstring)
DEFAULT_MASK = {"hailo10h": "keys01", "hailo8": "scores01", "hailo8l": "scores01"}
#: the first DFC 3.x with set_input_mask_to_softmax() in a public recipe (model zoo v2.19 MiniLM)
DFC3_MASK_COMMAND = (3, 34)


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
    #: which encoder body to compile: "original" (encoder.onnx) or "robust" (compile robust)
    body: str | None = None
    #: the DFC's own quantisation-aware fine-tuning (QFT) after quantisation; wants a GPU
    dfc_finetune: bool = False


@dataclass
class Attempt:
    profile: str
    sixteen_bit: list[str]
    optimize: str = "not run"  # "ran", "reused", "negative_exponent", "allocator", "failed"
    compile: str = "not run"  # "ok", "reused", "allocator", "failed"
    error: str | None = None
    seconds: dict = field(default_factory=dict)
    model_script: str | None = None  # the file name of the script this attempt optimised with
    wall: str | None = None  # the known wall it hit: "allocator" or "negative_exponent"


@dataclass
class HefResult:
    hef: Path
    entry: EncoderEntry
    profile: PrecisionProfile
    attempts: list[Attempt]
    report: dict | None
    skipped: list[str]
    model_script: Path
    work_dir: Path


def hef_filename(hw_arch: str, seq_len: int, bundle_seq_len: int) -> str:
    """``encoder.<hw_arch>.hef``, with ``.s<SEQ>`` when SEQ differs from the bundle's window."""
    return f"encoder.{hw_arch}{'' if seq_len == bundle_seq_len else f'.s{seq_len}'}.hef"


#: DFC major version -> the chips it builds for (zoo base_parsers.py on master vs v2.18)
DFC_TARGETS = {5: ("hailo10h", "hailo15h", "hailo15m", "hailo15l"), 3: ("hailo8", "hailo8l", "hailo8r")}


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in str(version).split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def dfc_has_mask_command(version: str) -> bool | None:
    """Whether this DFC line is known to have set_input_mask_to_softmax(): True for 5.x and for
    3.34+ (the zoo's MiniLM), None where only the probe on the parsed network can tell."""
    v = _version_tuple(version)
    if not v:
        return None
    if v[0] >= 5 or (v[0] == 3 and v[:2] >= DFC3_MASK_COMMAND):
        return True
    return None


def check_dfc_target(version: str, hw_arch: str, mask_mode: str) -> list[str]:
    """Stop before parsing when this DFC cannot build for ``hw_arch``.

    Returns notes: a DFC line hefsearch does not know is tried; on a DFC 3.x older than 3.34 the
    mask command is probed on the parsed network (a user report found it absent in 3.33).
    """
    major = major_version(version)
    if major is None or major not in DFC_TARGETS:
        return [f"warning: Dataflow Compiler {version} is not a line hefsearch knows (3.x builds for Hailo-8/8L, "
                "5.x for Hailo-10H); trying anyway."]
    if hw_arch not in DFC_TARGETS[major]:
        need = next(m for m, archs in DFC_TARGETS.items() if hw_arch in archs)
        chips = "Hailo-10H" if major == 5 else "Hailo-8/8L"
        raise CompileError(
            f"Dataflow Compiler {version} builds for {chips} only; --hw-arch {hw_arch} needs DFC {need}.x.",
            f"Install the DFC {need}.x wheel (or the matching Hailo AI Software Suite) in another venv for "
            f"{hw_arch}; keep DFC {major}.x for {', '.join(DFC_TARGETS[major][:1])}.")
    if hef_mask_mode(mask_mode).softmax_command and not dfc_has_mask_command(version):
        return [f"note: Dataflow Compiler {version} predates the model zoo's first use of {MASK_COMMAND} (DFC 3.34); "
                "probing it on the parsed network."]
    return []


def probe_mask_command(runner, mask_mode: str) -> None:
    """Load the mask command alone into a parsed runner: a DFC without it fails here, in
    seconds, instead of at optimize()."""
    try:
        runner.load_model_script(MASK_COMMAND + "\n")
    except Exception as e:
        raise MaskCommandMissing(
            f"The Dataflow Compiler refused {MASK_COMMAND} (needed by the {mask_mode} mask mode) on the parsed "
            f"network: {type(e).__name__}: {e}",
            "Compile with --mask additive (the zoo's BERT recipe: the additive mask goes in as an input), or use a "
            "DFC that has the command (3.34+ for Hailo-8/8L, 5.x for Hailo-10H).") from e


#: the DFC failures the public Hailo-10H report hit, by the exception name it printed
WALLS = {"BackendAllocatorException": "allocator", "NegativeSlopeExponentNonFixable": "negative_exponent"}


def known_wall(exc: BaseException) -> str | None:
    """"allocator" or "negative_exponent" when ``exc`` is one of the report's walls, also when it is
    wrapped in another exception (as cause or context) or only named in a message; else None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        names = [c.__name__ for c in type(exc).__mro__]
        for marker, wall in WALLS.items():
            if any(marker in n for n in names) or marker in str(exc):
                return wall
        exc = exc.__cause__ or exc.__context__
    return None


def is_allocator_crash(exc: BaseException) -> bool:
    """True for the DFC's BackendAllocatorException, also when wrapped in another exception."""
    return known_wall(exc) == "allocator"


def _key(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


class _State:
    """The work folder's record of finished stages (state.json)."""

    def __init__(self, folder: Path, restart: bool):
        self.folder = folder
        self.path = folder / STATE_FILE
        self.data = {"version": _STATE_VERSION, "parse": None, "optimized": {}, "compiled": {}, "walls": {}}
        if self.path.is_file() and not restart:
            try:
                loaded = json.loads(self.path.read_text())
                if loaded.get("version") == _STATE_VERSION:
                    self.data = loaded
            except (OSError, json.JSONDecodeError):
                pass

    def save(self) -> None:
        write_json_atomic(self.path, self.data)


def _explain_wall(wall: str, profile: PrecisionProfile, work: Path, fallback: bool) -> CompileError:
    if wall == "allocator":
        return _explain_allocator(profile, work, fallback)
    why = (f"optimize() failed with profile {profile.describe()}: NegativeSlopeExponentNonFixable. The model "
           "script's negative_exponent line cannot be met with an 8-bit softmax (the public Hailo-10H report hit "
           "exactly this on DFC 5.3.0: 'Desired shift is 8.0, but op has only 8 data bits').")
    hint = ("Remove model_optimization_config(negative_exponent, ...) from your --alls-extra lines; hefsearch writes "
            "it only for a 16-bit softmax. " if profile.bits_for("softmax") != 16 else
            "Use a profile without a 16-bit softmax, or --fallback to step down. ")
    hint += f"Finished stages are kept in {work}; a re-run resumes there."
    return NegativeExponentWall(why, hint)


def _explain_allocator(profile: PrecisionProfile, work: Path, fallback: bool) -> AllocatorCrash:
    attention = profile.attention_sixteen_bit
    why = (
        f"The Dataflow Compiler's allocator could not place the network with precision profile "
        f"{profile.describe()} (BackendAllocatorException). 16-bit (a16_w16) layers need twice the "
        "on-chip memory and not every layer can be placed at 16 bits"
    )
    why += (f"; 16 bits on the attention path ({', '.join(attention)}) is known to fail this way on DFC 5.3.0."
            if attention else ".")
    hint = ("Re-run with --fallback to step down to 8 bits, or choose --precision a8. " if not fallback else "")
    hint += f"Finished stages are kept in {work}; a re-run resumes there."
    return AllocatorCrash(why, hint)


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

    @property
    def mask_command(self) -> bool:
        return hef_mask_mode(self.mask_mode).softmax_command

    def calibration(self, rows: int, batch_size: int | None) -> tuple[int, int]:
        """(calibset_size, batch_size) for ``rows`` calibration rows: the report's 1024 / 16 on
        Hailo-10H, the zoo's batch (8 for MiniLM, 16 for BERT) elsewhere."""
        if batch_size is None:
            batch_size = REPORT_BATCH if self.recipe == RECIPE_HAILO10H or self.mask_mode == "additive" else 8
        return min(rows, REPORT_CALIBSET), min(int(batch_size), rows)


def build_ladder(requested: PrecisionProfile, hw_arch: str, fallback: bool) -> list[PrecisionProfile]:
    """The profiles to try in turn. Hailo-10H: the requested one, then straight to a8 (the public
    report found every a16 build to crash the allocator, whatever the layers); other chips: one
    site group at a time (embed/precision.py ``fallback_ladder``)."""
    if not fallback:
        return [requested]
    if hw_arch == "hailo10h":
        a8 = PrecisionProfile("a8", {}, requested.mask)
        return [requested] if requested.same_bits(a8) else [requested, a8]
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
    requested = load_profile(opts.precision or DEFAULT_PRECISION)
    try:
        mode = hef_mask_mode(opts.mask or DEFAULT_MASK[opts.hw_arch])
    except ValueError:
        raise CompileError(f"Unknown --mask {opts.mask!r}.", f"Use one of: {', '.join(HEF_MASK_MODES)}.") from None
    if opts.mask and DEFAULT_MASK[opts.hw_arch] != mode.name:
        say(f"note: mask mode {mode.name} follows {mode.source}; it is shown for {mode.shown_on}, not for "
            f"{opts.hw_arch}'s default ({DEFAULT_MASK[opts.hw_arch]}).")
    requested = replace(requested, mask=mode.profile_mask)
    fallback = True if opts.fallback is None else bool(opts.fallback)
    ladder = build_ladder(requested, opts.hw_arch, fallback)
    if requested.attention_sixteen_bit:
        say(f"warning: profile {requested.name} puts 16 bits on the attention path "
            f"({', '.join(requested.attention_sixteen_bit)}); DFC 5.3.0 failed to allocate exactly that.")
    extra = read_extra_lines(opts.alls_extra)
    if opts.dfc_finetune:
        say("note: --dfc-finetune runs the DFC's quantisation-aware fine-tuning, which wants a GPU (TensorFlow) "
            "and optimisation level 1+; 'hefsearch compile robust' does the same job on any CPU, before the DFC.")
        extra = [DFC_FINETUNE_LINE, *extra]
    return HefPlan(bundle, seq, requested, ladder, extra, mode.name, bool(opts.mask),
                   recipe_for(opts.hw_arch), fallback, resolve_body(bundle, opts.body))


@dataclass
class _Build:
    """What every stage of one build reads: the plan, the options, the SDK, the work folder."""

    plan: HefPlan
    opts: HefOptions
    sdk: Sdk
    work: Path
    state: _State
    say: Callable[[str], None]
    skipped: list[str] = field(default_factory=list)  # stages reused from an earlier run

    @property
    def bundle(self) -> Bundle:
        return self.plan.bundle

    @property
    def seq(self) -> int:
        return self.plan.seq

    def runner(self, har: Path):
        return _runner(self.sdk, self.opts.hw_arch, har)


@dataclass
class Parsed:
    """The parse stage's result: the parsed network and how its inputs are laid out."""

    key: str  # what the parse depends on; every later stage's key starts from it
    har: Path
    hn: dict
    layers: list  # preflight.InputLayer per network input
    layout: MaskLayout


@dataclass
class Calibrated:
    """The preflight's result: the calibration arrays by input layer, checked against them."""

    calib: dict
    rows: int
    info: dict  # the calibration set as load_calibration describes it (file, sha256, rows, ...)


@dataclass
class Optimized:
    """One profile's optimize stage: the quantised network and where it is kept."""

    runner: object
    key: str
    script: str
    har: Path
    record: dict  # its entry in state.json ("har", "profile", "report")


class _StepDown(Exception):
    """This profile did not fit; the ladder has a next one to try."""


def parse_stage(b: _Build) -> Parsed:
    """Consumes the bundle's encoder.onnx; produces parsed.har (or reuses it when its key
    matches), reads the parsed inputs and, for the softmax mask, probes the mask command."""
    opts, sdk, say, mask_mode = b.opts, b.sdk, b.say, b.plan.mask_mode
    body = b.plan.body or resolve_body(b.bundle)
    parse_key = _key(body.sha256, b.seq, opts.hw_arch, sdk.version, b.bundle.mask_value,
                     NET_NAME, mask_mode)
    parsed_har = b.work / "parsed.har"
    st = b.state.data["parse"]
    if st and st.get("key") == parse_key and parsed_har.is_file():
        say(f"parse: reusing {parsed_har}")
        b.skipped.append("parse")
        runner = b.runner(parsed_har)
    else:
        runner = _parse(b, parse_key, parsed_har)
    hn = runner.get_hn_dict()
    layers = input_layers(hn)
    say("parsed inputs: " + ", ".join(f"{x.name} ({x.role}) {list(x.shape)}" for x in layers))
    heads = int(b.bundle.model.get("heads") or 1)
    layout = MaskLayout.for_mode(mask_mode, b.seq, heads, b.bundle.mask_value)
    if b.plan.mask_command:
        probe_mask_command(runner, mask_mode)
    return Parsed(parse_key, parsed_har, hn, layers, layout)


def _parse(b: _Build, parse_key: str, parsed_har: Path):
    """Write the DFC-facing ONNX, translate it, save parsed.har; a new parse voids later stages."""
    opts, sdk, say, state = b.opts, b.sdk, b.say, b.state
    t0 = time.perf_counter()
    src = (b.plan.body or resolve_body(b.bundle)).path(b.bundle)
    dfc = make_dfc_onnx(b.bundle, b.work / "encoder.dfc.onnx", b.seq, b.plan.mask_mode, source=src)
    diff = verify_dfc_onnx(b.bundle, dfc, source=src)
    say(f"parse: DFC-facing model {dfc.path.name} (mask input {dfc.mask_shape}, {dfc.layout.describe()}; "
        f"max |diff| vs encoder.onnx {diff:.2g})")
    runner = sdk.ClientRunner(hw_arch=opts.hw_arch)
    # start at the two inputs (the zoo names its graph inputs as start nodes: embedding, masked_fill)
    kwargs = dict(start_node_names=[EMBEDDINGS, MASK], end_node_names=[OUTPUT], net_input_shapes=dfc.input_shapes)
    if sdk.Dims is not None:
        kwargs["net_input_format"] = input_formats(sdk.Dims, b.plan.mask_mode)
    try:
        runner.translate_onnx_model(str(dfc.path), NET_NAME, **kwargs)
    except Exception as e:
        raise CompileError(f"The DFC could not parse {dfc.path}: {type(e).__name__}: {e}",
                           "Please report this with the DFC version and the bundle's manifest.json.") from e
    runner.save_har(str(parsed_har))
    state.data["parse"] = {"key": parse_key, "har": parsed_har.name, "max_diff": diff,
                           "seconds": round(time.perf_counter() - t0, 2)}
    state.data["optimized"], state.data["compiled"], state.data["walls"] = {}, {}, {}
    state.save()
    say(f"parse: done in {time.perf_counter() - t0:.1f} s -> {parsed_har}")
    return runner


def preflight_stage(b: _Build, parsed: Parsed, emb, mask, info: dict) -> Calibrated:
    """Consumes the calibration arrays; produces them keyed by parsed input layer, checked
    against the layers' shapes (always before any optimize)."""
    calib = calibration_dict(parsed.layers, emb, mask, parsed.layout)
    rows = preflight(parsed.layers, calib, parsed.layout)["rows"]
    b.say(f"preflight: calibration {rows} rows fits the parsed inputs")
    return Calibrated(calib, rows, info)


def _wall_step(b: _Build, e: BaseException, profile: PrecisionProfile, att: Attempt, stage: str,
               last: bool, key: str) -> None:
    """Turn one of the report's walls into a step down the ladder (not at the last rung) or an
    explanation; anything else is left to the caller. The wall is kept in state.json under the
    optimised model's key, so a re-run does not spend another hour on the same crash."""
    wall = known_wall(e)
    if wall is None:
        return
    att.wall = wall
    att.error = f"{type(e).__name__}: {e}"
    setattr(att, stage, wall)
    b.state.data.setdefault("walls", {})[key] = {"stage": stage, "wall": wall, "error": att.error[:2000]}
    b.state.save()
    what = "BackendAllocatorException" if wall == "allocator" else "NegativeSlopeExponentNonFixable"
    b.say(f"{stage}: {what} with profile {profile.describe()}")
    if not last:
        raise _StepDown from e
    if wall == "allocator" and profile.is_all_8bit and stage == "compile":
        raise AllocatorCrash(
            f"The Dataflow Compiler's allocator could not place the network on {b.opts.hw_arch} even at "
            f"8 bits (BackendAllocatorException): it does not fit at SEQ {b.seq}.",
            "Try a shorter --seq-len (and 'hefsearch compile calib --seq-len'), or a larger chip. "
            f"Finished stages are kept in {b.work}.") from e
    raise _explain_wall(wall, profile, b.work, b.plan.fallback) from e


def optimize_stage(b: _Build, parsed: Parsed, cal: Calibrated, sites: dict, profile: PrecisionProfile,
                   att: Attempt, last: bool) -> Optimized:
    """Consumes the parsed network and the calibration; produces optimized-<key>.har for
    ``profile`` (or reuses it). One of the report's walls steps down the ladder unless ``last``."""
    opts, say, state = b.opts, b.say, b.state
    calibset, batch = b.plan.calibration(cal.rows, opts.calib_batch_size)
    script = build_model_script(
        profile, parsed.hn, calibset_size=calibset, batch_size=batch,
        optimization_level=opts.optimization_level, compression_level=opts.compression_level,
        extra_lines=b.plan.extra_lines, recipe=b.plan.recipe, mask_command=b.plan.mask_command)
    skey = _key(parsed.key, script, cal.info.get("sha256", ""))
    script_path = b.work / f"model-{skey}.alls"
    script_path.write_text(script, encoding="utf-8")
    att.model_script = script_path.name
    opt_har = b.work / f"optimized-{skey}.har"
    rec = state.data["optimized"].get(skey)
    seen = state.data.get("walls", {}).get(skey)
    if seen and not last:  # an earlier run hit a wall with exactly this network, script and calibration
        att.wall, att.error = seen["wall"], seen["error"]
        setattr(att, seen["stage"], f"{seen['wall']} (earlier run)")
        say(f"{seen['stage']}: profile {profile.name} hit {seen['error'].split(':')[0]} in an earlier run; "
            "stepping down (--restart tries it again)")
        b.skipped.append(f"wall:{profile.name}")
        raise _StepDown
    try:
        if rec and opt_har.is_file():
            say(f"optimize: reusing {opt_har.name} (profile {profile.name})")
            att.optimize = "reused"
            b.skipped.append(f"optimize:{profile.name}")
            runner = b.runner(opt_har)
        else:
            n16 = sum(len(sites[g]) for g in profile.sixteen_bit)
            say(f"optimize: profile {profile.describe()}, {n16} layers at 16 bits, "
                f"optimization level {opts.optimization_level} (this can take a long time)")
            t0 = time.perf_counter()
            runner = b.runner(parsed.har)
            runner.load_model_script(str(script_path))
            try:
                runner.optimize(cal.calib)
            finally:
                att.seconds["optimize"] = round(time.perf_counter() - t0, 2)
            runner.save_har(str(opt_har))
            att.optimize = "ran"
            rec = {"har": opt_har.name, "profile": profile.to_dict(), "report": None}
            state.data["optimized"][skey] = rec
            state.save()
            say(f"optimize: done in {att.seconds['optimize']:.1f} s -> {opt_har}")
    except Exception as e:
        _wall_step(b, e, profile, att, "optimize", last, skey)
        if isinstance(e, HefsearchError):
            raise
        att.optimize, att.error = "failed", f"{type(e).__name__}: {e}"
        raise CompileError(
            f"optimize() failed with profile {profile.name}: {type(e).__name__}: {e}",
            f"The model script is {script_path}; the parsed model is kept in {parsed.har}.") from e
    return Optimized(runner, skey, script, opt_har, rec)


def report_stage(b: _Build, parsed: Parsed, opt: Optimized, att: Attempt) -> dict | None:
    """Consumes the optimised network; produces the emulator report (SDK_NATIVE vs
    SDK_QUANTIZED), computed once per optimised model and kept in state.json. A failing report
    is recorded and the build goes on."""
    report = opt.record.get("report")
    if b.opts.report and report is None:
        from .emulator_report import emulator_report

        t0 = time.perf_counter()
        try:
            report = emulator_report(opt.runner, b.sdk.InferenceContext, b.bundle, parsed.layers, b.seq,
                                     parsed.layout, b.say)
        except Exception as e:  # the report informs; it must not stop a build
            report = {"error": f"{type(e).__name__}: {e}"}
            b.say(f"warning: the emulator report failed ({report['error']}); compiling anyway")
        att.seconds["report"] = round(time.perf_counter() - t0, 2)
        opt.record["report"] = report
        b.state.save()
    elif b.opts.report and "error" not in report:
        from .emulator_report import format_report

        for line in format_report(report).splitlines():
            b.say(line)
    return report


def compile_stage(b: _Build, profile: PrecisionProfile, opt: Optimized, att: Attempt, last: bool) -> Path:
    """Consumes the optimised network; produces encoder.<hw_arch>[.s<SEQ>].hef in the bundle (or
    keeps the one already built from it). An allocator failure steps down unless ``last``."""
    opts, say, state, seq = b.opts, b.say, b.state, b.seq
    hef_name = hef_filename(opts.hw_arch, seq, b.bundle.seq_len)
    hef_path = b.bundle.path / hef_name
    done = state.data["compiled"].get(opt.key)
    if done and hef_path.is_file() and sha256_file(hef_path) == done.get("sha256"):
        say(f"compile: {hef_name} is already built from this optimised model")
        att.compile = "reused"
        b.skipped.append("compile")
        return hef_path
    say(f"compile: allocating for {opts.hw_arch} (this can take a long time)")
    t0 = time.perf_counter()
    try:
        hef_bytes = opt.runner.compile()
    except Exception as e:
        att.seconds["compile"] = round(time.perf_counter() - t0, 2)
        _wall_step(b, e, profile, att, "compile", last, opt.key)
        att.compile, att.error = "failed", f"{type(e).__name__}: {e}"
        raise CompileError(
            f"compile() failed: {type(e).__name__}: {e}",
            f"The optimised model is kept in {opt.har}; a re-run resumes at compile.") from e
    if not isinstance(hef_bytes, (bytes, bytearray)) or not hef_bytes:
        raise CompileError(f"compile() returned {type(hef_bytes).__name__}, not the HEF bytes.",
                           "Please report this with the DFC version.")
    att.seconds["compile"] = round(time.perf_counter() - t0, 2)
    write_bytes_atomic(hef_path, bytes(hef_bytes))
    att.compile = "ok"
    state.data["compiled"][opt.key] = {"file": hef_name, "sha256": hashlib.sha256(hef_bytes).hexdigest()}
    state.save()
    say(f"compile: done in {att.seconds['compile']:.1f} s -> {hef_path} ({len(hef_bytes)} bytes)")
    return hef_path


BUILD_REPORT = "build-report.json"


def write_build_report(b: _Build, attempts: list[Attempt], outcome: dict) -> Path:
    """The work folder's record of this build: what was planned, every attempt of the ladder
    (stage outcomes, the wall it hit, seconds, the script it used) and how it ended. Written
    after every attempt, so an interrupted build leaves what it learned."""
    path = b.work / BUILD_REPORT
    write_json_atomic(path, {
        "bundle": str(b.bundle.path),
        "hw_arch": b.opts.hw_arch,
        "seq_len": b.seq,
        "dfc_version": b.sdk.version,
        "mask_mode": b.plan.mask_mode,
        "recipe": b.plan.recipe,
        "ladder": [p.name for p in b.plan.ladder],
        "attempts": [asdict(a) for a in attempts],
        **outcome,
    })
    return path


def build_hef(bundle: Bundle | str | Path, opts: HefOptions, say: Callable[[str], None] | None = None,
              sdk: Sdk | None = None) -> HefResult:
    """Compile ``bundle``'s encoder body to a HEF for ``opts.hw_arch``; see the module docstring.

    The stages run in order: plan, SDK and target check, calibration, parse, preflight, then per
    profile of the ladder optimize, report and compile; the first profile that compiles is
    recorded in the manifest.
    """
    say = say or (lambda m: log.info(m))
    plan = plan_build(bundle, opts, say)
    bundle, seq = plan.bundle, plan.seq

    sdk = sdk or load_sdk()
    say(f"Dataflow Compiler {sdk.version}, target {opts.hw_arch}, SEQ {seq}, mask {plan.mask_mode}, "
        f"profiles to try: {' -> '.join(p.name for p in plan.ladder)}")
    for warning in check_dfc_target(sdk.version, opts.hw_arch, plan.mask_mode):
        say(warning)
    emb, mask, calib_info = calib_mod.load_calibration(bundle, seq, opts.calib)
    if emb.ndim and emb.shape[0] < calib_mod.MIN_ROWS:
        say(f"warning: only {emb.shape[0]} calibration rows (fewer than {calib_mod.MIN_ROWS}).")

    work = Path(opts.work_dir).expanduser() if opts.work_dir else bundle.path / "build" / f"{opts.hw_arch}.s{seq}"
    work.mkdir(parents=True, exist_ok=True)
    b = _Build(plan, opts, sdk, work, _State(work, opts.restart), say)

    try:
        parsed = parse_stage(b)
    except MaskCommandMissing as e:
        if plan.mask_explicit:
            raise
        say(f"note: {e.message.splitlines()[0]} Switching to the zoo's BERT recipe (--mask additive).")
        b.plan = plan = replace(plan, mask_mode="additive", requested=replace(plan.requested, mask="additive"),
                                ladder=[replace(p, mask="additive") for p in plan.ladder])
        parsed = parse_stage(b)
    cal = preflight_stage(b, parsed, emb, mask, calib_info)
    sites = site_layers(parsed.hn)
    attempts: list[Attempt] = []
    for i, profile in enumerate(plan.ladder):
        att = Attempt(profile.name, list(profile.sixteen_bit))
        attempts.append(att)
        if i:
            say(f"fallback: trying profile {profile.describe()}")
        last = i + 1 == len(plan.ladder)
        try:
            opt = optimize_stage(b, parsed, cal, sites, profile, att, last)
            report = report_stage(b, parsed, opt, att)
            hef_path = compile_stage(b, profile, opt, att, last)
        except _StepDown:
            write_build_report(b, attempts, {"result": "in progress"})
            continue
        except BaseException as e:
            write_build_report(b, attempts, {"result": "failed", "error": f"{type(e).__name__}: {e}"})
            raise
        streams = compiled_streams(hef_path, opt.runner, parsed.layers, parsed.layout, seq, bundle.hidden, say)
        result = _record(b, parsed, cal, profile, attempts, report, streams, opt.script, hef_path)
        write_build_report(b, attempts, {"result": "ok", "hef": hef_path.name, "profile": profile.name,
                                         "model_script": result.model_script.name})
        return result
    raise AssertionError("unreachable: the ladder ends in a return or a raise")  # pragma: no cover


def _runner(sdk: Sdk, hw_arch: str, har: Path):
    runner = sdk.ClientRunner(hw_arch=hw_arch)
    runner.load_har(str(har))
    return runner


def input_formats(dims, mask_mode: str) -> dict:
    """``net_input_format`` as the public recipes give it: the embeddings NWC (lifted to
    [-1,1,S,H]); the keys01 mask NHWC like the Hailo-10H report's ``/Mul`` ([N,1,1,S] ->
    [-1,1,1,S]); the scores01 mask NGWC like the zoo MiniLM's ``masked_fill`` ([N,heads,S,S] ->
    [-1,1,S,heads*S]); the additive mask with no format, like the zoo BERT's (NCHW: [N,1,1,S] ->
    [-1,1,S,1])."""
    formats = {EMBEDDINGS: [dims.BATCH, dims.WIDTH, dims.CHANNELS]}
    layout = hef_mask_mode(mask_mode).layout
    if layout == "keys01":
        formats[MASK] = [dims.BATCH, dims.HEIGHT, dims.WIDTH, dims.CHANNELS]
    elif layout == "scores":
        groups = getattr(dims, "GROUPS", None)
        if groups is None:
            raise CompileError("This Dataflow Compiler's Dims has no GROUPS, needed for the NGWC mask input.",
                               "Compile with --mask keys01 or --mask additive, or update the DFC.")
        formats[MASK] = [dims.BATCH, groups, dims.WIDTH, dims.CHANNELS]
    return formats


def _stream_dict(spec) -> dict:
    d = {"name": spec.name, "shape": [int(x) for x in spec.shape], "order": spec.order, "type": spec.type}
    if spec.flags and spec.flags.upper() != "NONE":
        d["flags"] = spec.flags
    return d


def compiled_streams(hef_path: Path, runner, layers, layout: MaskLayout, seq: int, hidden: int, say) -> dict:
    """The streams the compiled HEF really has, by role (embeddings, attention_mask,
    last_hidden_state), for the manifest: read from the HEF with HailoRT when this environment has
    it (the Hailo AI Software Suite does), else from the compiled runner's network, where the
    output streams are named after the layer that feeds each output layer (after LayerNorm
    decomposition, which renames layers) and the input shapes are the parsed ones (the allocator
    may still fold them; the runtime matches by element count)."""
    try:
        from hefsearch.embed.backends.hailo import read_hef

        hef = read_hef(hef_path)
    except Exception as e:  # no HailoRT here, or it cannot read this HEF
        log.info("reading %s with HailoRT failed (%s); taking the streams from the compiled network", hef_path, e)
        hef = None
    by_role = {x.role: x for x in layers}
    if hef is not None:
        # which stream is which: the runtime's own matching (recorded name, else element count)
        contract = HefContract(seq, hidden, by_role[EMBEDDINGS].name, by_role[MASK].name, mask=layout)
        check = check_contract(contract, hef.inputs, hef.outputs, hef.sorted_outputs)
        inputs = {role: _stream_dict(spec) for role, spec in
                  ((EMBEDDINGS, check.embeddings), (MASK, check.attention_mask)) if spec is not None}
        order = [o.name for o in check.outputs]
        outputs = {OUTPUT: {"names": order, "shape": [1, int(seq), int(hidden)],
                            "streams": [_stream_dict(o) for o in check.outputs]}}
        say("compiled streams (from the HEF): " + ", ".join(
            [f"{r} {d['name']} {d['shape']}" for r, d in inputs.items()] + [f"output {n}" for n in order]))
        return {"inputs": inputs, "outputs": outputs, "source": "hef"}
    hn = runner.get_hn_dict()
    inputs = {role: {"name": x.name, "shape": [int(d) for d in x.sample_shape]} for role, x in by_role.items()}
    out_layers = hn.get("net_params", {}).get("output_layers_order") or \
        [n for n, l in hn["layers"].items() if l.get("type") == "output_layer"]
    net = hn.get("name", NET_NAME)
    names = []
    for name in out_layers:
        feeding = (hn["layers"].get(name, {}).get("input") or [name])[0]
        names.append(feeding if "/" in feeding else f"{net}/{feeding}")
    outputs = {OUTPUT: {"names": names, "shape": [1, int(seq), int(hidden)]}}
    say("compiled streams (from the compiled network; HailoRT not installed here): "
        + ", ".join([f"{r} {d['name']}" for r, d in inputs.items()] + [f"output {n}" for n in names]))
    return {"inputs": inputs, "outputs": outputs, "source": "compiled network"}


def _record(b: _Build, parsed: Parsed, cal: Calibrated, profile: PrecisionProfile, attempts: list[Attempt],
            report: dict | None, streams: dict, script: str, hef_path: Path) -> HefResult:
    """Consumes the built HEF; writes its model script next to it and its entry in the manifest."""
    opts, sdk, seq, calib_info, hn = b.opts, b.sdk, b.seq, cal.info, parsed.hn
    requested, layout, work, skipped = b.plan.requested, parsed.layout, b.work, b.skipped
    # A fresh manifest (calibration may have changed it), read without Bundle.open's size checks:
    # the HEF just written may replace one the manifest still describes.
    bundle = Bundle(b.bundle.path, json.loads((b.bundle.path / "manifest.json").read_text(encoding="utf-8")))
    hef_name = hef_path.name
    script_name = hef_name[: -len(".hef")] + ".alls"
    write_bytes_atomic(bundle.path / script_name, script.encode("utf-8"))
    bundle.add_file(hef_name)
    bundle.add_file(script_name)
    calib_summary = {k: calib_info[k] for k in ("file", "sha256", "rows", "seed", "user_rows", "sample_rows",
                                                "ks_distance") if k in calib_info}
    extra = {
        "precision": profile.to_dict(),
        "mask": profile.mask,
        "mask_mode": b.plan.mask_mode,
        "model_script_recipe": b.plan.recipe,
        "mask_value": bundle.mask_value,
        "mask_input": layout.to_dict(),
        "dfc_version": sdk.version,
        "model_script": script_name,
        "optimization_level": opts.optimization_level,
        "compression_level": opts.compression_level,
        "calibration": calib_summary,
        "quality": report,
        "attempts": [asdict(a) for a in attempts],
        "inputs": streams["inputs"],
        "outputs": streams["outputs"],
        "streams_from": streams["source"],
        "network_name": hn.get("name", NET_NAME),
    }
    if b.plan.body is not None:
        extra["body"] = {"name": b.plan.body.name, "file": b.plan.body.file, "sha256": b.plan.body.sha256}
    if not profile.same_bits(requested):
        extra["precision_requested"] = requested.to_dict()
    entry = EncoderEntry(kind="hef", file=hef_name, seq_len=seq, hw_arch=opts.hw_arch, extra=extra)
    bundle.upsert_encoder(entry)
    bundle.save_manifest()
    return HefResult(hef_path, entry, profile, attempts, report, skipped, bundle.path / script_name, work)

"""The Dataflow Compiler driver: bundle + calibration -> HEF, in stages that resume.

    parse     DFC-facing ONNX (compile/hef/dfc_onnx.py) -> translate_onnx_model -> parsed.har
    preflight calibration arrays vs the parsed input layers (compile/hef/preflight.py)
    optimize  model script from the precision profile -> optimize(calib) -> optimized-<key>.har
    report    SDK_NATIVE vs SDK_QUANTIZED on the bundled sentences (compile/hef/emulator_report.py)
    compile   runner.compile() -> encoder.<hw_arch>[.s<SEQ>].hef, manifest updated
              (a rung before the last compiles first and runs the report only once it compiled)

Each stage is one function (``parse_stage`` ... ``compile_stage``; ``plan_build`` checks the
options first) that returns a small dataclass for the next; :func:`build_hef` only runs them and
walks the fallback ladder. Every stage saves its result in the work folder (default
``BUNDLE/build/<hw_arch>.s<SEQ>/``) keyed by what it depends on, so a failed compile never
redoes an optimisation that took hours. Beside this driver: the plan and ladder (:mod:`.plan`),
the DFC and its version (:mod:`.sdk`, the only importer of ``hailo_sdk_client``), errors and walls
(:mod:`.errors`), ``state.json`` and ``build-report.json`` (:mod:`.build_record`), the model
script (:mod:`.model_script`) and the compiled HEF's streams (:mod:`.streams`).

Each chip gets the recipe on record for it (Hailo-10H: the public report's ``keys01`` mask and
8-bit script, after a 16-bit rung; Hailo-8/8L: the zoo MiniLM's ``scores01`` recipe, stepping
down group by group). A missing DFC, calibration of the wrong shape and the report's walls each
end in an error that says what to do; every attempt is recorded in ``build-report.json`` and the
manifest. Verified against the contract fake (``tests/fakes/hailo_sdk_client``) only; no real
DFC has run this code. Recipes, ladder and walls: docs/compiling.md; sources: docs/hailo-facts.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from hefsearch.base.atomic_write import write_bytes_atomic
from hefsearch.embed.bundle import Bundle, EncoderEntry, sha256_file
from hefsearch.base.errors import HefsearchError
from hefsearch.embed.mask_layout import MaskLayout, hef_mask_mode
from hefsearch.embed.precision import PrecisionProfile
from hefsearch.embed.runtime_pairing import hailort_pair

from hefsearch.compile import calib as calib_mod
from hefsearch.compile.body_choice import resolve_body
from .build_record import (Attempt, BuildState, clear_all_running, clear_running, mark_running, stage_key,
                           take_unfinished, write_build_report)
from .errors import (NOT_A_DFC_FAILURE, SIXTEEN_BIT_COST, AllocatorCrash, BuildContext, CompileError, MaskCommandMissing,
                     explain_wall, known_wall, message_of, report_script_failed)
from .dfc_onnx import EMBEDDINGS, MASK, NET_NAME, OUTPUT, make_dfc_onnx, verify_dfc_onnx
from .sdk import Sdk, check_dfc_target, load_sdk, probe_mask_command
from .plan import HefOptions, HefPlan, plan_build
from .streams import compiled_streams
from .model_script import ScriptSettings, build_model_script, site_layers
from .preflight import calibration_dict, input_layers, preflight

log = logging.getLogger("hefsearch.compile")


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


@dataclass
class _Build:
    """What every stage of one build reads: the plan, the options, the SDK, the work folder."""

    plan: HefPlan
    opts: HefOptions
    sdk: Sdk
    work: Path
    state: BuildState
    say: Callable[[str], None]
    skipped: list[str] = field(default_factory=list)  # stages reused from an earlier run

    @property
    def bundle(self) -> Bundle:
        return self.plan.bundle

    @property
    def seq(self) -> int:
        return self.plan.seq

    @property
    def context(self) -> BuildContext:
        return BuildContext(self.opts.hw_arch, self.seq, self.sdk.version, self.work)

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


@dataclass
class Rung:
    """The profile of the ladder being tried, its record in the build report, and whether it is
    the last rung (no step down after it)."""

    profile: PrecisionProfile
    attempt: Attempt
    last: bool


@dataclass
class Built:
    """What a rung that compiled leaves for the manifest: the HEF, the model script that made it,
    the emulator's quality report and the HEF's streams."""

    profile: PrecisionProfile
    hef_path: Path
    script: str
    report: dict | None
    streams: dict


class _StepDown(Exception):
    """This profile did not fit; the ladder has a next one to try."""


def parse_stage(b: _Build) -> Parsed:
    """Consumes the bundle's encoder.onnx; produces parsed.har (or reuses it when its key
    matches), reads the parsed inputs and, for the softmax mask, probes the mask command."""
    opts, sdk, say, mask_mode = b.opts, b.sdk, b.say, b.plan.mask_mode
    body = b.plan.body or resolve_body(b.bundle)
    parse_key = stage_key(body.sha256, b.seq, opts.hw_arch, sdk.version, b.bundle.mask_value,
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


def _failed(b: _Build, e: BaseException, rung: Rung, stage: str, key: str, seconds: float) -> None:
    """Any failure of optimize() or compile(), whatever its exception: recorded in the attempt
    (stage, exception class, message, seconds, time). Then a step down the ladder (not at the last
    rung) when it is one of the report's walls, or on Hailo-10H any failure (every rung before
    the last there is a 16-bit one or your own options; the last is the report's script);
    else the error that stops the build. A failure that stepped down is kept in state.json under
    the optimised model's key, so a re-run does not spend another hour on the same crash."""
    profile, att, last = rung.profile, rung.attempt, rung.last
    wall = known_wall(e)
    message = message_of(e)
    att.wall = wall
    att.error = f"{type(e).__name__}: {message}"
    att.failure = {"stage": stage, "exception": type(e).__name__, "message": message[:4000], "seconds": seconds,
                   "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    setattr(att, stage, wall or "failed")
    steps = not last and (wall is not None or b.plan.step_down_on_any)
    if wall is not None or steps:
        b.state.data.setdefault("walls", {})[key] = {"stage": stage, "wall": wall, "error": att.error[:2000],
                                                      "failure": att.failure}
        b.state.save()
    first = (message.strip().splitlines() or [""])[0][:300]
    b.say(f"{stage}: {type(e).__name__} with profile {profile.describe()}: {first}")
    if steps:
        raise _StepDown from e
    if last and b.plan.report_rung:
        raise report_script_failed(stage, e, wall, att.model_script, b.context) from e
    if wall is None:
        return
    if wall == "allocator" and profile.is_all_8bit and stage == "compile":
        raise AllocatorCrash(
            f"The Dataflow Compiler's allocator could not place the network on {b.opts.hw_arch} even at "
            f"8 bits (BackendAllocatorException): it does not fit at SEQ {b.seq}.",
            "Try a shorter --seq-len (and 'hefsearch compile calib --seq-len'), or a larger chip. "
            f"Finished stages are kept in {b.work}.") from e
    raise explain_wall(wall, profile, b.work, b.plan.fallback) from e


def optimize_stage(b: _Build, parsed: Parsed, cal: Calibrated, sites: dict, rung: Rung) -> Optimized:
    """Consumes the parsed network and the calibration; produces optimized-<key>.har for the
    rung's profile (or reuses it). One of the report's walls steps down the ladder unless it is
    the last rung."""
    profile, att, last = rung.profile, rung.attempt, rung.last
    opts, say, state = b.opts, b.say, b.state
    report = last and b.plan.report_rung  # the report's script exactly, whatever the options
    level = 0 if report else opts.optimization_level
    calibset, batch = b.plan.calibration(cal.rows, None if report else opts.calib_batch_size)
    script = build_model_script(profile, parsed.hn, ScriptSettings(
        calibset_size=calibset, batch_size=batch, optimization_level=level,
        compression_level=0 if report else opts.compression_level,
        extra_lines=() if report else b.plan.extra_lines, recipe=b.plan.recipe, mask_command=b.plan.mask_command))
    skey = stage_key(parsed.key, script, cal.info.get("sha256", ""))
    script_path = b.work / f"model-{skey}.alls"
    write_bytes_atomic(script_path, script.encode("utf-8"))
    att.model_script = script_path.name
    opt_har = b.work / f"optimized-{skey}.har"
    rec = state.data["optimized"].get(skey)
    _count_unfinished(b, skey, profile)
    seen = state.data.get("walls", {}).get(skey)
    if seen and not last:  # an earlier run failed with exactly this network, script and calibration
        att.wall, att.error = seen["wall"], seen["error"]
        att.failure = {**(seen.get("failure") or {"stage": seen["stage"]}), "earlier_run": True}
        setattr(att, seen["stage"], f"{seen['wall'] or 'failed'} (earlier run)")
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
            if n16 and b.plan.step_down_on_any and not last:
                say(SIXTEEN_BIT_COST)
            say(f"optimize: profile {profile.describe()}, {n16} layers at 16 bits, "
                f"optimization level {level} (this can take a long time)")
            t0 = time.perf_counter()
            marker = mark_running(b.work, skey, "optimize", profile.name)
            try:
                runner = b.runner(parsed.har)
                runner.load_model_script(str(script_path))
                runner.optimize(cal.calib)
            finally:  # came back, with a result or an exception: not an attempt that never returned
                clear_running(marker)
                att.seconds["optimize"] = round(time.perf_counter() - t0, 2)
            runner.save_har(str(opt_har))
            att.optimize = "ran"
            rec = {"har": opt_har.name, "profile": profile.to_dict(), "report": None}
            state.data["optimized"][skey] = rec
            state.save()
            say(f"optimize: done in {att.seconds['optimize']:.1f} s -> {opt_har}")
    except BaseException as e:  # whatever the SDK raises, even outside Exception: the ladder decides
        if isinstance(e, (HefsearchError, *NOT_A_DFC_FAILURE)):
            raise
        _failed(b, e, rung, "optimize", skey, att.seconds.get("optimize", 0.0))
        raise CompileError(
            f"optimize() failed with profile {profile.name}: {type(e).__name__}: {message_of(e)}",
            f"The model script is {script_path}; the parsed model is kept in {parsed.har}.") from e
    return Optimized(runner, skey, script, opt_har, rec)


#: what an attempt whose process died without a Python exception is recorded as
UNFINISHED = "UnfinishedAttempt"


def _count_unfinished(b: _Build, skey: str, profile: PrecisionProfile) -> None:
    """An earlier run left the marker of this very attempt (same network, script and calibration):
    its optimize() or compile() never came back. Count it as a failure of that stage, kept in
    state.json like any other, so a rung before the last steps down instead of dying again."""
    dead = take_unfinished(b.work, skey)
    if dead is None:
        return
    stage = dead.get("stage") if dead.get("stage") in ("optimize", "compile") else "optimize"
    message = (f"the previous {stage}() of profile {profile.name} (started {dead.get('at', '?')}, process "
               f"{dead.get('pid', '?')}) ended without a result: the process was killed (out of memory?), crashed "
               "in native code, or the machine stopped")
    b.say(f"{stage}: {message}")
    failure = {"stage": stage, "exception": UNFINISHED, "message": message, "seconds": None,
               "at": dead.get("at"), "unfinished": True}
    b.state.data.setdefault("walls", {})[skey] = {"stage": stage, "wall": None, "error": f"{UNFINISHED}: {message}",
                                                   "failure": failure}
    b.state.save()


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


def compile_stage(b: _Build, rung: Rung, opt: Optimized) -> Path:
    """Consumes the optimised network; produces encoder.<hw_arch>[.s<SEQ>].hef in the bundle (or
    keeps the one already built from it). An allocator failure steps down unless ``last``."""
    profile, att, last = rung.profile, rung.attempt, rung.last
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
    marker = mark_running(b.work, opt.key, "compile", profile.name)
    try:
        hef_bytes = opt.runner.compile()
    except BaseException as e:  # whatever the SDK raises, even outside Exception: the ladder decides
        if isinstance(e, NOT_A_DFC_FAILURE):
            raise
        att.seconds["compile"] = round(time.perf_counter() - t0, 2)
        _failed(b, e, rung, "compile", opt.key, att.seconds["compile"])
        raise CompileError(
            f"compile() failed: {type(e).__name__}: {message_of(e)}",
            f"The optimised model is kept in {opt.har}; a re-run resumes at compile.") from e
    finally:
        clear_running(marker)
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
    pair = hailort_pair(sdk.version)
    say(f"the HEF will need HailoRT {pair['release']}.x on the Pi ({pair['source']}); check there with "
        "'hailortcli --version'" if pair["release"] else f"note: {pair['source']}: check on the Pi that its "
        "HailoRT reads this DFC's HEFs ('hefsearch doctor')")
    emb, mask, calib_info = calib_mod.load_calibration(bundle, seq, opts.calib)
    if emb.ndim and emb.shape[0] < calib_mod.MIN_ROWS:
        say(f"warning: only {emb.shape[0]} calibration rows (fewer than {calib_mod.MIN_ROWS}).")

    work = Path(opts.work_dir).expanduser() if opts.work_dir else bundle.path / "build" / f"{opts.hw_arch}.s{seq}"
    work.mkdir(parents=True, exist_ok=True)
    b = _Build(plan, opts, sdk, work, BuildState(work, opts.restart), say)
    if opts.restart:
        clear_all_running(work)

    try:
        parsed = parse_stage(b)
    except MaskCommandMissing as e:
        if plan.mask_explicit:
            raise
        say(f"note: {e.message.splitlines()[0]} Switching to the zoo's BERT recipe (--mask additive).")
        b.plan = plan = replace(plan, mask_mode="additive", requested=replace(plan.requested, mask="additive"),
                                ladder=[replace(p, mask="additive") for p in plan.ladder], report_rung=False)
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
            rung = Rung(profile, att, last)
            opt = optimize_stage(b, parsed, cal, sites, rung)
            if last:  # the report informs even when the last compile() fails: it goes upstream with it
                report = report_stage(b, parsed, opt, att)
                hef_path = compile_stage(b, rung, opt)
            else:  # a rung that may step down spends no emulation on a network that does not compile
                hef_path = compile_stage(b, rung, opt)
                report = report_stage(b, parsed, opt, att)
        except _StepDown:
            write_build_report(b, attempts, {"result": "in progress"})
            continue
        except BaseException as e:
            write_build_report(b, attempts, {"result": "failed", "error": f"{type(e).__name__}: {e}"})
            raise
        streams = compiled_streams(hef_path, opt.runner, parsed.layers, parsed.layout, seq, bundle.hidden, say)
        result = _record(b, parsed, cal, Built(profile, hef_path, opt.script, report, streams), attempts)
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


def _record(b: _Build, parsed: Parsed, cal: Calibrated, built: Built, attempts: list[Attempt]) -> HefResult:
    """Consumes the built HEF; writes its model script next to it and its entry in the manifest."""
    profile, hef_path, script, report, streams = built.profile, built.hef_path, built.script, built.report, built.streams
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
        "hailort_pair": hailort_pair(sdk.version),
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

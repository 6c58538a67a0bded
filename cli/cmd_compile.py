"""``hefsearch compile ...``: model -> bundle -> calibration -> HEF, and the two CPU-side builds
(an NPU simulation, an int8 encoder). Every subverb is here, in the order a user runs them; the
heavy work (onnx, torch, the Dataflow Compiler) is imported inside each command, so listing
them stays cheap."""

from __future__ import annotations

import click

from hefsearch.compile.profiles import PROFILE_NAMES
from hefsearch.compile.robust.devices import DEVICES


_BODY_HELP = ("Which encoder body to build from: original (encoder.onnx, the FP32 export) or robust "
              "(encoder.robust.onnx, damped or trained for 8 bits by 'hefsearch compile robust'). Builds from "
              "the robust body get their own names and vector spaces; the original stays the FP32 reference.")
_AUTO_HELP = (" auto: for an all-8-bit build, the robust body when the measurements 'compile robust' "
              "recorded say it helps (held-out 8-bit cosine up by 0.005 or more, and its own FP32 vectors "
              "at cosine 0.995 or more to the original or ranking the bundled parallel set at least as "
              "well), else the original. A multilingual bundle without a robust body gets the damped one "
              "first ('compile robust --steps 0': sink damping, no training; about 2 minutes for "
              "multilingual-e5-small on a loaded laptop).")


@click.group("compile")
def compile_group() -> None:
    """Build a model bundle and compile it for a Hailo NPU.

    \b
    export    Hugging Face model -> bundle (tokenizer, embedding tables, FP32 encoder body)
    calib     calibration set from your documents (4-D arrays for the DFC)
    hef       bundle + calibration -> HEF with the Hailo Dataflow Compiler (x86_64 Linux)
    sim       8-bit NPU simulation of the bundle on ONNX Runtime (any CPU; not a HEF)
    robust    train a copy of the encoder body to survive an all-8-bit build (torch)
    cpu-int8  int8 encoder for CPUs without an NPU (faster, its own vector space)
    """


@compile_group.command("export")
@click.argument("model")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Bundle folder to write.")
@click.option("--seq-len", type=click.IntRange(8, 8192), default=None,
              help="Token window incl. special tokens. Default: the model's sentence-transformers "
                   "max_seq_length, else 256.")
@click.option("--query-prefix", default=None,
              help='Text put before every query (e5 models: "query: "). Default: the model\'s '
                   'sentence-transformers "query" prompt, else none; "" for none.')
@click.option("--passage-prefix", default=None,
              help='Text put before every passage (e5 models: "passage: "). Default: the model\'s '
                   'sentence-transformers "passage"/"document" prompt, else none; "" for none.')
@click.option("--overwrite", is_flag=True, help="Replace an existing bundle in --out.")
def export_cmd(model, out, seq_len, query_prefix, passage_prefix, overwrite):
    """Export MODEL (a local folder or a Hugging Face id) to a bundle.

    An id is taken from the local Hugging Face cache; when it is not there, only the files
    export needs are downloaded (unless HF_HUB_OFFLINE is set; an unreachable hub fails within
    seconds). The export verifies itself: the bundle's
    pipeline must match the full model (cosine >= 0.9999) on built-in multilingual texts.
    Needs the compile extra: pip install 'hefsearch[compile]'.
    """
    from hefsearch.compile.export.bundle import ExportOptions, export_bundle

    options = ExportOptions(seq_len=seq_len, query_prefix=query_prefix, passage_prefix=passage_prefix,
                            overwrite=overwrite)
    report = export_bundle(model, out, options, progress=lambda m: click.echo(m, err=True))
    click.echo(
        f"{report.bundle}: {report.model_id}, seq_len {report.seq_len}, pooling {report.pooling}"
        f"{' + L2' if report.normalize else ''}; verified on {len(report.cosines)} texts, "
        f"min cosine {report.min_cosine:.6f}"
    )


@compile_group.command("calib")
@click.argument("bundle", type=click.Path(file_okay=False))
@click.option("--from", "roots", multiple=True, required=True, type=click.Path(exists=True),
              help="A folder (or file) with your documents; repeat for several. Read and chunked exactly "
                   "as 'hefsearch index' does.")
@click.option("--n", "n", type=click.IntRange(1, 100_000), default=1024, show_default=True,
              help="Rows in the calibration set (chunks of your documents plus the bundled samples).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed: same seed + same documents = same set.")
@click.option("--seq-len", type=click.IntRange(8, 8192), default=None,
              help="The HEF's token window (SEQ). Default: the bundle's seq_len.")
def calib_cmd(bundle, roots, n, seed, seq_len):
    """Build the calibration set that 'hefsearch compile hef' quantises with.

    Draws chunks of your documents at random (seeded), mixes in the bundled multilingual sample
    texts (at most a quarter of the rows asked), embeds them with the bundle's own host pipeline and
    saves 4-D arrays in BUNDLE/calib/calib_s<SEQ>.npz: embeddings [N,1,SEQ,H] float32 and the
    0/1 mask [N,1,1,SEQ] float32 (the shapes the DFC's parsed network takes). Runs anywhere;
    no Dataflow Compiler needed.

    The file holds your text in recoverable form: do not share the bundle with its calib/ folder.
    """
    from hefsearch.compile.calib import build_calibration, format_summary

    summary = build_calibration(bundle, list(roots), n=n, seed=seed, seq_len=seq_len,
                                progress=lambda m: click.echo(m, err=True))
    click.echo(format_summary(summary))
    for note in summary.notes:
        click.echo(f"note: {note}", err=True)
    for w in summary.warnings:
        click.secho(f"warning: {w}", fg="yellow", err=True)


@compile_group.command("hef")
@click.argument("bundle", type=click.Path(file_okay=False, exists=True))
@click.option("--hw-arch", required=True, type=click.Choice(["hailo10h", "hailo8", "hailo8l"]),
              help="Target chip: hailo10h (AI HAT+ 2, DFC 5.x) or hailo8 / hailo8l (AI Kit / AI HAT+, DFC 3.x).")
@click.option("--seq-len", type=click.IntRange(8, 8192), default=None,
              help="Fixed token window of the HEF (SEQ). Default: the bundle's seq_len. Needs a calibration "
                   "set for the same SEQ.")
@click.option("--precision", default=None,
              help=f"Precision profile: {', '.join(PROFILE_NAMES)}, or a JSON/TOML file mapping site groups to 8/16 "
                   "bits, e.g. {\"bits\": {\"residual_add\": 16, \"layernorm\": 16, \"ffn_out\": 8}}. Default: "
                   "residual-a16 on hailo10h (16 bits on the input, the residual adds and the LayerNorm internals, no "
                   "conv: Hailo's own Hailo-10H Qwen2 recipe; any failure steps down to a8), balanced elsewhere. --precision a8 on hailo10h goes straight to the model script of "
                   "the one public Hailo-10H report, skipping a 16-bit attempt that may cost an hour of CPU.")
@click.option("--mask", type=click.Choice(["keys01", "scores01", "additive", "softmax"]), default=None,
              help="How the HEF takes the attention mask. keys01 (default on hailo10h; the public Hailo-10H report, "
                   "DFC 5.3.0): one 0/1 value per token, fed to the score adds, applied inside softmax "
                   "(set_input_mask_to_softmax), SEQ bytes per frame. scores01 (default on hailo8/hailo8l; the model "
                   "zoo's all_minilm_l6_v2, DFC 3.34): the same 0/1 mask fed score-shaped, heads x SEQ values per "
                   "token. additive (the zoo's bert_base_uncased, DFC 3.33): one additive value per token, added to "
                   "the 8-bit scores, no mask command; chosen by itself on a DFC 3.x without the command. softmax is "
                   "the old name of scores01.")
@click.option("--optimization-level", type=click.IntRange(0, 4), default=0, show_default=True,
              help="DFC optimisation effort (0 = the model zoo's choice for text encoders; 1+ wants a GPU).")
@click.option("--compression-level", type=click.IntRange(0, 5), default=0, show_default=True,
              help="DFC 4-bit weight compression (0 = none).")
@click.option("--alls-extra", type=click.Path(dir_okay=False, exists=True), default=None,
              help="A file of extra model-script lines appended verbatim.")
@click.option("--calib", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Use this .npz (arrays 'embeddings' and 'mask') instead of the bundle's calibration set.")
@click.option("--fallback/--no-fallback", default=True, show_default=True,
              help="Step down and try again: on hailo10h after any failure, whatever the error, straight to a8 "
                   "(exactly the public report's script); elsewhere on a known compiler wall "
                   "(BackendAllocatorException, NegativeSlopeExponentNonFixable) one 16-bit group at a time (FFN "
                   "projections, LayerNorm internals, residual adds, then a8). Stages already done are reused; "
                   "every attempt (stage, exception, message, time) is recorded in the work folder's "
                   "build-report.json.")
@click.option("--no-report", is_flag=True, help="Skip the emulator quality report before compiling.")
@click.option("--work-dir", type=click.Path(file_okay=False), default=None,
              help="Where stages are saved for resuming. Default: BUNDLE/build/<hw-arch>.s<SEQ>/ (not needed "
                   "on the Pi).")
@click.option("--restart", is_flag=True, help="Ignore saved stages and start again from the parse.")
@click.option("--body", type=click.Choice(["auto", "original", "robust"]), default="auto", show_default=True,
              help=_BODY_HELP + " All-8-bit: hailo10h builds, or an all-8-bit --precision." + _AUTO_HELP)
@click.option("--dfc-finetune", is_flag=True,
              help="Add the DFC's own quantisation-aware fine-tuning to the model script "
                   "(post_quantization_optimization(finetune, ...)); wants a GPU, at any --optimization-level (the "
                   "zoo's Hailo-10H CLIP text encoder fine-tunes at level 0). "
                   "'hefsearch compile robust' does this before the DFC, on any CPU.")
def hef_cmd(bundle, hw_arch, seq_len, precision, mask, optimization_level, compression_level, alls_extra, calib,
            fallback, no_report, work_dir, restart, body, dfc_finetune):
    """Compile BUNDLE's encoder for a Hailo NPU (x86_64 Linux with the Dataflow Compiler).

    \b
    With no options it builds the recipe on record for the chip:
      hailo10h   the public Hailo-10H report (DFC 5.3.0): mask keys01, its model script
                 (calibration 1024/16, equalization, optimisation level 0, mask command);
                 residual-a16 first (no a16 conv), then that report's all-8-bit
                 script on any failure (or when the first attempt never came back)
      hailo8/8l  the model zoo's all_minilm_l6_v2 (DFC 3.34): mask scores01, the zoo's script

    \b
    Stages (each saved, so a re-run resumes where it stopped):
      parse      the encoder body cut where the recipe cuts it (embeddings NWC; the mask
                 after the mask Mul, NHWC / NGWC score-shaped / additive per token)
      preflight  the calibration arrays against the parsed input layers
      optimize   quantise with the model script written from --precision
      report     FP32 vs quantised emulation on multilingual sentences (basis-independent)
      compile    write BUNDLE/encoder.<hw-arch>[.s<SEQ>].hef and update manifest.json

    Make the calibration set first: hefsearch compile calib BUNDLE --from ~/Documents
    """
    from hefsearch.compile.hef.build import build_hef
    from hefsearch.compile.hef.plan import HefOptions

    opts = HefOptions(hw_arch=hw_arch, seq_len=seq_len, precision=precision, mask=mask,
                      optimization_level=optimization_level, compression_level=compression_level,
                      alls_extra=alls_extra, fallback=fallback, report=not no_report, calib=calib,
                      work_dir=work_dir, restart=restart, body=body, dfc_finetune=dfc_finetune)
    result = build_hef(bundle, opts, say=lambda m: click.echo(m, err=True))
    for a in result.attempts:
        click.echo(f"attempt {a.profile}: optimize {a.optimize}, compile {a.compile}"
                   + (f" ({a.error.splitlines()[0][:120]})" if a.error else ""))
    click.echo(f"build report: {result.work_dir / 'build-report.json'}")
    click.echo(f"{result.hef}: {hw_arch}, SEQ {result.entry.seq_len}, precision {result.profile.describe()}")
    if result.profile.name != result.attempts[0].profile:
        click.secho(f"note: the HEF has profile {result.profile.name}, not the requested "
                    f"{result.attempts[0].profile} (fallback)", fg="yellow")


@compile_group.command("sim")
@click.argument("bundle", type=click.Path(file_okay=False))
@click.option("--precision", "precision", default="a8", show_default=True,
              help="Precision profile, as for 'compile hef': a8 (everything 8-bit: what a Hailo-10H build "
                   "ends up as when its 16-bit rungs meet the allocator crash of the one public report), "
                   "balanced (16 bits on residual adds, LayerNorm internals and FFN output projections), "
                   "zoo-a16 (the input, every projection, the residual adds and LayerNorm internals), "
                   "residual-a16 (the hailo10h first rung: the input, the residual adds and, through "
                   "the decomposition, the LayerNorm internals) "
                   "or a JSON/TOML file mapping site groups to 8/16 bits.")
@click.option("--mask", "mask", default=None, metavar="inside|keys01|scores01|additive[:VALUE]",
              help="How the attention mask meets the 8-bit scores. inside (also keys01, scores01: the HEF "
                   "mask modes that use it, keys01 being the hailo10h default build): applied inside softmax "
                   "(the DFC's set_input_mask_to_softmax); additive:VALUE: (1-mask)*VALUE added to the scores "
                   "and quantised with them, as a HEF built with --mask additive (additive:-10000 reproduces the "
                   "collapse; -50 avoids it). Default: the profile's own (inside).")
@click.option("--texts", "texts_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="UTF-8 file, one text per line, for the activation ranges when the bundle has no "
                   "calibration set (from 'hefsearch compile calib'); added to the built-in samples.")
@click.option("--calib-limit", type=click.IntRange(8, 100_000), default=512, show_default=True,
              help="Use at most this many rows of the bundle's calibration set (spread evenly).")
@click.option("--body", type=click.Choice(["auto", "original", "robust"]), default="auto", show_default=True,
              help=_BODY_HELP + " All-8-bit: a --precision without 16-bit groups (a8)." + _AUTO_HELP)
@click.option("--ranges", "ranges", default="minmax", show_default=True, metavar="minmax|percentile:P",
              help="How activation ranges are estimated from the calibration set: min/max (as the DFC's "
                   "default), or clipped at the P-th percentile of each site's values (e.g. percentile:99.99), "
                   "to see what another compiler choice would cost.")
@click.option("--weights", "weights", type=click.Choice(["per-channel", "per-tensor"]), default="per-channel",
              show_default=True, help="Weight quantisation granularity.")
def sim_cmd(bundle, precision, mask, texts_file, calib_limit, body, ranges, weights):
    """Write an NPU simulation of BUNDLE's encoder (encoder.npu-sim.<name>.onnx).

    A fake-quantised copy of the FP32 body: per-channel integer weights and per-tensor
    asymmetric integer activations (8 or 16 bits per site group, as the precision profile says)
    at the places an NPU quantises them, with min/max ranges from the bundle's calibration set.
    It runs on ONNX Runtime (--backend npu-sim, with HEFSEARCH_SIM=NAME when there are several) so you can measure what a build
    choice costs ('hefsearch bench quality') before spending hours compiling a HEF. It is a
    simulation, not a HEF: its numbers predict, they do not reproduce, the chip's.
    Needs the compile extra (the onnx package) to build; running it does not.
    """
    from hefsearch.compile.sim.build import SimOptions, build_sim

    texts = []
    if texts_file:
        with open(texts_file, encoding="utf-8") as f:
            texts = [line.strip() for line in f if line.strip()]
    options = SimOptions(mask=mask, body=body, ranges=ranges, weights=weights, texts=texts, calib_limit=calib_limit)
    report = build_sim(bundle, precision, options, progress=lambda m: click.echo(m, err=True))
    for n in report.notices:
        click.secho(f"note: {n}", fg="yellow", err=True)
    c = report.check
    mode = report.mask["mode"]
    mask_txt = ("inside softmax, as a keys01/scores01 HEF" if mode == "softmax"
                else f"additive {report.mask['value']:g}, as an additive HEF")
    sixteen = ", ".join(report.profile.get("sixteen_bit", [])) or "none"
    click.echo(
        f"{report.label}: {report.file}\n"
        f"  16-bit groups: {sixteen}; mask {mask_txt}; {report.sites} activation sites, "
        f"{report.weights} weight tensors\n"
        f"  calibration: {report.calibration}\n"
        f"  vs FP32 on {c['texts']} sample texts: cosine mean {c['cosine_mean']:.4f} "
        f"(min {c['cosine_min']:.4f}), similarity-matrix correlation {c['similarity_pearson']:.4f}\n"
        f"  use it: HEFSEARCH_SIM={report.name} hefsearch index ... --backend npu-sim  ({report.seconds:.1f} s)"
    )


@compile_group.command("robust")
@click.argument("bundle", type=click.Path(file_okay=False, exists=True))
@click.option("--steps", type=click.IntRange(0, 1_000_000), default=300, show_default=True,
              help="Training steps (batches). More steps help, each doubling less (measured in "
                   "docs/performance.md); a larger run continues from a smaller one's checkpoint; 0: "
                   "sink damping only (a minute or two, no training).")
@click.option("--batch", type=click.IntRange(2, 1024), default=8, show_default=True, help="Texts per step.")
@click.option("--lr", type=click.FloatRange(0, 1, min_open=True), default=5e-5, show_default=True,
              help="Peak learning rate (AdamW; short warm-up, linear decay).")
@click.option("--max-tokens", type=click.IntRange(8, 8192), default=64, show_default=True,
              help="Cut training texts to this many tokens (cost grows with it; 8-bit ranges barely do).")
@click.option("--precision", default="a8", show_default=True,
              help="The precision profile to train for (a8: every site 8-bit, what Hailo-10H builds have).")
@click.option("--sink-ratio", type=click.FloatRange(0, None), default=None,
              help="Damp attention-sink neurons (FFN neurons that fire on a few tokens only, e.g. the "
                   "special ones, with values far above the rest) to at most this many times their "
                   "layer's bulk before training; 0: no damping.  [default: 4]")
@click.option("--fp32-weight", type=click.FloatRange(0, None), default=None,
              help="How much keeping the body's own FP32 vectors counts against the 8-bit ones.  [default: 10]")
@click.option("--no-randomise", is_flag=True,
              help="Train with one quantiser (min/max ranges, per-channel weights) instead of random variants.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=click.IntRange(1, 256), default=1, show_default=True,
              help="torch threads (more helps only on an idle machine; on a busy one 2 were 10x slower).")
@click.option("--restart", is_flag=True, help="Ignore the saved checkpoint and start again.")
@click.option("--device", type=click.Choice(DEVICES), default="auto", show_default=True,
              help="Where torch trains: auto takes CUDA when torch sees an NVIDIA GPU (a DFC compile host "
                   "usually has one), else the CPU; cuda without one stops with a message. Same body on "
                   "either, to float tolerance.")
def robust_cmd(bundle, steps, batch, lr, max_tokens, sink_ratio, fp32_weight, precision, no_randomise, seed,
               threads, restart, device):
    """Train an 8-bit-robust copy of BUNDLE's encoder body (encoder.robust.onnx).

    Two stages. Sink damping: the few FFN neurons that fire only on the special tokens and push
    one residual channel far above the rest (what sets an 8-bit build's steps) get their output
    rows scaled down to --sink-ratio times their layer's bulk. Then quantisation-aware
    distillation from the original FP32 body: every step distils the copy in FP32 (token level
    and at each LayerNorm, weighted by --fp32-weight, so its own FP32 vectors stay the
    original's) and under 8-bit fake quantisation (the NPU simulation's sites, ranges and
    LayerNorm decomposition; the mask inside softmax) by cosine and by the batch's similarity
    matrix. The 8-bit pass draws its quantiser each step (min/max, widened or percentile ranges;
    per-channel or per-tensor, nearest or stochastic weight rounding) so the result does not fit
    one quantiser only. Data: the bundle's calibration pool ('hefsearch compile calib BUNDLE
    --from ~/Documents') plus the built-in multilingual texts.

    \b
    Only weight values change: the ops and graph are encoder.onnx's, so 'compile hef' and the
    runtime treat it as they treat the original. Builds from it:
      hefsearch compile sim BUNDLE --precision a8 --body robust     (space npu-sim-a8-robust)
      hefsearch compile hef BUNDLE --hw-arch hailo10h     (--body auto takes it when it helps)
    encoder.onnx is never changed and stays the FP32 reference. Progress with an ETA; a
    checkpoint under BUNDLE/build/robust/ every 20 steps (and on Ctrl-C): run the same command
    again to continue. --steps 0 damps only (no training: minutes, not an hour; what --body auto
    makes for a multilingual bundle). Measured cost and gains: docs/compiling.md. Needs the
    compile extra (torch, onnx).
    """
    from hefsearch.compile.robust.build import RobustOptions, build_robust

    given = {k: v for k, v in (("sink_ratio", sink_ratio), ("fp32_weight", fp32_weight)) if v is not None}
    opts = RobustOptions(steps=steps, batch=batch, lr=lr, max_tokens=max_tokens, precision=precision,
                         randomise=not no_randomise, seed=seed, threads=threads, restart=restart, device=device,
                         **given)
    r = build_robust(bundle, opts, progress=lambda m: click.echo(m, err=True))
    c = r.fp32_check
    try:
        import resource

        peak = f", peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2:.1f} GiB"  # Linux: KiB
    except ImportError:  # Windows
        peak = ""
    click.echo(
        f"8-bit-robust body: {r.file} ({r.steps} steps"
        + (f", resumed at {r.resumed_from}" if r.resumed_from else "")
        + f", {r.seconds / 60:.1f} min{peak})\n"
        f"  held-out texts, 8-bit simulation vs the original FP32: cosine {r.holdout_cos_before:.4f} (original), "
        f"{r.holdout_cos_damped:.4f} (sinks damped), {r.holdout_cos_after:.4f} (trained); "
        f"its FP32 vectors {r.holdout_fp32_after:.4f}\n"
        f"  its FP32 vectors vs the original on {c['texts']} sample texts: cosine {c['cosine_mean']:.4f} "
        f"(min {c['cosine_min']:.4f}), similarity-matrix correlation {c['similarity_pearson']:.4f}\n"
        f"  next: hefsearch compile sim {bundle} --precision a8 --body robust"
    )
    if r.stale:
        click.echo(f"  built from the previous 8-bit-robust body, so they no longer show this one: "
                   f"{', '.join(r.stale)}; build them again (compile sim / compile hef --body robust)", err=True)


@compile_group.command("cpu-int8")
@click.argument("bundle", type=click.Path(file_okay=False))
@click.option("--all-int8", is_flag=True,
              help="Quantise each layer's FFN output projection too (kept in FP32 by default): faster "
                   "(about 1.3x the default's speed with all-MiniLM-L6-v2, measured under load), further from "
                   "FP32 (cosine 0.992 instead of 0.997; e5-small library MRR vs FP32 0.958 instead of 0.974).")
def int8_cmd(bundle, all_int8):
    """Write an int8 CPU encoder into BUNDLE (encoder.cpu-int8.onnx).

    ONNX Runtime's dynamic quantisation of the FP32 body: int8 MatMul weights per output
    channel, activations quantised per tensor at run time (no calibration set needed); each
    layer's FFN output projection stays FP32 unless --all-int8.
    Use it with --backend cpu-int8: its vectors form their own space (cpu-int8), never mixed
    with cpu-fp32, re-ranked with FP32 vectors like an NPU space. Worth it on a CPU without an
    NPU when indexing speed matters more than the last percent of ranking quality; measure
    it on your library with 'hefsearch bench quality'.
    Needs the compile extra (the onnx package) to build; running it does not.
    """
    from hefsearch.compile.cpu_int8 import build_cpu_int8

    report = build_cpu_int8(bundle, keep_ffn_output_fp32=not all_int8,
                            progress=lambda m: click.echo(m, err=True))
    for n in report.notices:
        click.secho(f"note: {n}", fg="yellow", err=True)
    c = report.check
    click.echo(
        f"CPU int8: {report.file} ({report.weights} MatMul weights in int8, onnxruntime {report.onnxruntime})\n"
        f"  vs FP32 on {c['texts']} sample texts: cosine mean {c['cosine_mean']:.4f} (min {c['cosine_min']:.4f}), "
        f"similarity-matrix correlation {c['similarity_pearson']:.4f}\n"
        f"  use it: hefsearch index ... --backend cpu-int8  ({report.seconds:.1f} s)"
    )

"""``hefsearch compile hef``: bundle + calibration -> HEF, with the Hailo Dataflow Compiler."""

from __future__ import annotations

import click

from hefsearch.embed.precision import PROFILES


@click.command("hef")
@click.argument("bundle", type=click.Path(file_okay=False, exists=True))
@click.option("--hw-arch", required=True, type=click.Choice(["hailo10h", "hailo8", "hailo8l"]),
              help="Target chip: hailo10h (AI HAT+ 2, DFC 5.x) or hailo8 / hailo8l (AI Kit / AI HAT+, DFC 3.x).")
@click.option("--seq-len", type=click.IntRange(8, 8192), default=None,
              help="Fixed token window of the HEF (SEQ). Default: the bundle's seq_len. Needs a calibration "
                   "set for the same SEQ.")
@click.option("--precision", default="balanced", show_default=True,
              help=f"Precision profile: {', '.join(PROFILES)}, or a JSON/TOML file mapping site groups to 8/16 "
                   "bits, e.g. {\"bits\": {\"residual_add\": 16, \"layernorm\": 16, \"ffn_out\": 8}}.")
@click.option("--mask", type=click.Choice(["softmax", "additive"]), default=None,
              help="How the HEF takes the attention mask. softmax (the model zoo's MiniLM recipe): a 0/1 mask "
                   "inside softmax, fed score-shaped (heads x SEQ values per token). additive (the zoo's BERT "
                   "recipe): one additive value per token, added to the 8-bit scores. Default: the precision "
                   "profile's (softmax). DFC 3.x lacks the softmax command: use additive there.")
@click.option("--optimization-level", type=click.IntRange(0, 4), default=0, show_default=True,
              help="DFC optimisation effort (0 = the model zoo's choice for text encoders; 2+ wants a GPU).")
@click.option("--compression-level", type=click.IntRange(0, 5), default=0, show_default=True,
              help="DFC 4-bit weight compression (0 = none).")
@click.option("--alls-extra", type=click.Path(dir_okay=False, exists=True), default=None,
              help="A file of extra model-script lines appended verbatim.")
@click.option("--calib", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Use this .npz (arrays 'embeddings' and 'mask') instead of the bundle's calibration set.")
@click.option("--fallback", is_flag=True,
              help="On a BackendAllocatorException, step down: 16-bit FFN projections off, then LayerNorm, "
                   "then residual adds, then a8.")
@click.option("--no-report", is_flag=True, help="Skip the emulator quality report before compiling.")
@click.option("--work-dir", type=click.Path(file_okay=False), default=None,
              help="Where stages are saved for resuming. Default: BUNDLE/build/<hw-arch>.s<SEQ>/ (not needed "
                   "on the Pi).")
@click.option("--restart", is_flag=True, help="Ignore saved stages and start again from the parse.")
def hef_cmd(bundle, hw_arch, seq_len, precision, mask, optimization_level, compression_level, alls_extra, calib,
            fallback, no_report, work_dir, restart):
    """Compile BUNDLE's encoder for a Hailo NPU (x86_64 Linux with the Dataflow Compiler).

    \b
    Stages (each saved, so a re-run resumes where it stopped):
      parse      the encoder body as the model zoo parses MiniLM/BERT (embeddings NWC; the
                 mask NGWC score-shaped, or additive per token)
      preflight  the calibration arrays against the parsed input layers
      optimize   quantise with the model script written from --precision
      report     FP32 vs quantised emulation on multilingual sentences
      compile    write BUNDLE/encoder.<hw-arch>[.s<SEQ>].hef and update manifest.json

    Make the calibration set first: hefsearch compile calib BUNDLE --from ~/Documents
    """
    from hefsearch.compile.dfc import HefOptions, build_hef

    opts = HefOptions(hw_arch=hw_arch, seq_len=seq_len, precision=precision, mask=mask,
                      optimization_level=optimization_level, compression_level=compression_level,
                      alls_extra=alls_extra, fallback=fallback, report=not no_report, calib=calib,
                      work_dir=work_dir, restart=restart)
    result = build_hef(bundle, opts, say=lambda m: click.echo(m, err=True))
    for a in result.attempts:
        click.echo(f"attempt {a.profile}: optimize {a.optimize}, compile {a.compile}"
                   + (f" ({a.error.splitlines()[0][:120]})" if a.error else ""))
    click.echo(f"{result.hef}: {hw_arch}, SEQ {result.entry.seq_len}, precision {result.profile.describe()}")
    if result.profile.name != result.attempts[0].profile:
        click.secho(f"note: the HEF has profile {result.profile.name}, not the requested "
                    f"{result.attempts[0].profile} (fallback)", fg="yellow")

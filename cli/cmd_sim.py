"""``hefsearch compile sim``: an 8-bit NPU simulation of the bundle, runnable on any CPU."""

from __future__ import annotations

import click


@click.command("sim")
@click.argument("bundle", type=click.Path(file_okay=False))
@click.option("--precision", "precision", default="balanced", show_default=True,
              help="Precision profile, as for 'compile hef': a8 (everything 8-bit), balanced (16 bits on "
                   "residual adds, LayerNorm internals and FFN output projections) or a JSON/TOML file "
                   "mapping site groups to 8/16 bits.")
@click.option("--mask", "mask", default=None, metavar="inside|additive[:VALUE]",
              help="How the attention mask meets the 8-bit scores. inside: applied inside softmax (the "
                   "DFC's set_input_mask_to_softmax); additive:VALUE: (1-mask)*VALUE added to the scores "
                   "and quantised with them (additive:-10000 reproduces the collapse; -50 avoids it). "
                   "Default: the profile's own (inside).")
@click.option("--texts", "texts_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="UTF-8 file, one text per line, for the activation ranges when the bundle has no "
                   "calibration set (from 'hefsearch compile calib'); added to the built-in samples.")
@click.option("--calib-limit", type=click.IntRange(8, 100_000), default=512, show_default=True,
              help="Use at most this many rows of the bundle's calibration set (spread evenly).")
def sim_cmd(bundle, precision, mask, texts_file, calib_limit):
    """Write an NPU simulation of BUNDLE's encoder (encoder.npu-sim.<name>.onnx).

    A fake-quantised copy of the FP32 body: per-channel integer weights and per-tensor
    asymmetric integer activations (8 or 16 bits per site group, as the precision profile says)
    at the places an NPU quantises them, with min/max ranges from the bundle's calibration set.
    It runs on ONNX Runtime (--backend npu-sim, with HEFSEARCH_SIM=NAME when there are several) so you can measure what a build
    choice costs ('hefsearch bench quality') before spending hours compiling a HEF. It is a
    simulation, not a HEF: its numbers predict, they do not reproduce, the chip's.
    Needs the compile extra (the onnx package) to build; running it does not.
    """
    from hefsearch.compile.npu_sim import build_sim

    texts = []
    if texts_file:
        with open(texts_file, encoding="utf-8") as f:
            texts = [line.strip() for line in f if line.strip()]
    report = build_sim(bundle, precision, mask=mask, texts=texts, calib_limit=calib_limit,
                       progress=lambda m: click.echo(m, err=True))
    for n in report.notices:
        click.secho(f"note: {n}", fg="yellow", err=True)
    c = report.check
    mode = report.mask["mode"]
    mask_txt = "inside softmax" if mode == "softmax" else f"additive {report.mask['value']:g}"
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

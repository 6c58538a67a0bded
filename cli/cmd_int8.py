"""``hefsearch compile cpu-int8``: an int8 copy of the bundle's encoder for CPUs without an NPU."""

from __future__ import annotations

import click


@click.command("cpu-int8")
@click.argument("bundle", type=click.Path(file_okay=False))
def int8_cmd(bundle):
    """Write an int8 CPU encoder into BUNDLE (encoder.cpu-int8.onnx).

    ONNX Runtime's dynamic quantisation of the FP32 body: int8 MatMul weights per output
    channel, activations quantised per tensor at run time (no calibration set needed).
    Use it with --backend cpu-int8: its vectors form their own space (cpu-int8), never mixed
    with cpu-fp32, re-ranked with FP32 vectors like an NPU space. Worth it on a CPU without an
    NPU when indexing speed matters more than the last percent of ranking quality; measure
    it on your library with 'hefsearch bench quality'.
    Needs the compile extra (the onnx package) to build; running it does not.
    """
    from hefsearch.compile.cpu_int8 import build_cpu_int8

    report = build_cpu_int8(bundle, progress=lambda m: click.echo(m, err=True))
    for n in report.notices:
        click.secho(f"note: {n}", fg="yellow", err=True)
    c = report.check
    click.echo(
        f"CPU int8: {report.file} ({report.weights} MatMul weights in int8, onnxruntime {report.onnxruntime})\n"
        f"  vs FP32 on {c['texts']} sample texts: cosine mean {c['cosine_mean']:.4f} (min {c['cosine_min']:.4f}), "
        f"similarity-matrix correlation {c['similarity_pearson']:.4f}\n"
        f"  use it: hefsearch index ... --backend cpu-int8  ({report.seconds:.1f} s)"
    )

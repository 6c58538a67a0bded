"""``hefsearch compile ...``: model -> bundle -> calibration -> HEF."""

from __future__ import annotations

import click

from .main import LazyGroup

COMPILE_COMMANDS: dict[str, str] = {
    "calib": "cmd_calib:calib_cmd",
    "cpu-int8": "cmd_int8:int8_cmd",
    "hef": "cmd_hef:hef_cmd",
    "sim": "cmd_sim:sim_cmd",
}


@click.group("compile", cls=LazyGroup, lazy=COMPILE_COMMANDS)
def compile_group() -> None:
    """Build a model bundle and compile it for a Hailo NPU.

    \b
    export    Hugging Face model -> bundle (tokenizer, embedding tables, FP32 encoder body)
    calib     calibration set from your documents (4-D arrays for the DFC)
    hef       bundle + calibration -> HEF with the Hailo Dataflow Compiler (x86_64 Linux)
    sim       8-bit NPU simulation of the bundle on ONNX Runtime (any CPU; not a HEF)
    cpu-int8  int8 encoder for CPUs without an NPU (faster, its own vector space)
    """


@compile_group.command("export")
@click.argument("model")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Bundle folder to write.")
@click.option("--seq-len", type=click.IntRange(8, 8192), default=None,
              help="Token window incl. special tokens. Default: the model's sentence-transformers "
                   "max_seq_length, else 256.")
@click.option("--query-prefix", default=None, help='Text put before every query (e5 models: "query: ").')
@click.option("--passage-prefix", default=None, help='Text put before every passage (e5 models: "passage: ").')
@click.option("--overwrite", is_flag=True, help="Replace an existing bundle in --out.")
def export_cmd(model, out, seq_len, query_prefix, passage_prefix, overwrite):
    """Export MODEL (a local folder or a Hugging Face id in the local cache) to a bundle.

    Nothing is downloaded when the id is cached. The export verifies itself: the bundle's
    pipeline must match the full model (cosine >= 0.9999) on built-in multilingual texts.
    Needs the compile extra: pip install 'hefsearch[compile]'.
    """
    from hefsearch.compile.export import export_bundle

    report = export_bundle(
        model, out, seq_len=seq_len, query_prefix=query_prefix, passage_prefix=passage_prefix,
        overwrite=overwrite, progress=lambda m: click.echo(m, err=True),
    )
    click.echo(
        f"{report.bundle}: {report.model_id}, seq_len {report.seq_len}, pooling {report.pooling}"
        f"{' + L2' if report.normalize else ''}; verified on {len(report.cosines)} texts, "
        f"min cosine {report.min_cosine:.6f}"
    )

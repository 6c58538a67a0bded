"""``hefsearch compile calib``: a calibration set for the DFC from your own documents."""

from __future__ import annotations

import click


@click.command("calib")
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
    texts (at most a quarter of the set), embeds them with the bundle's own host pipeline and
    saves 4-D arrays in BUNDLE/calib/calib_s<SEQ>.npz: embeddings [N,1,SEQ,H] float32 and the
    0/1 mask [N,1,1,SEQ] float32 (the shapes the DFC's parsed network takes). Runs anywhere;
    no Dataflow Compiler needed.

    The file holds your text in recoverable form: do not share the bundle with its calib/ folder.
    """
    from hefsearch.compile.calib import build_calibration, format_summary

    summary = build_calibration(bundle, list(roots), n=n, seed=seed, seq_len=seq_len,
                                progress=lambda m: click.echo(m, err=True))
    click.echo(format_summary(summary))
    for w in summary.warnings:
        click.secho(f"warning: {w}", fg="yellow", err=True)

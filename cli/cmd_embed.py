"""``hefsearch embed``: one text per line in, one vector per line out (for scripts)."""

from __future__ import annotations

import json
import sys

import click

from .options import REQUIRED_BUNDLE_HELP, backend_option, bundle_option


@click.command("embed")
@bundle_option(REQUIRED_BUNDLE_HELP + " Default: the last bundle 'hefsearch index' was given.")
@backend_option()
@click.option("--query", is_flag=True, help="Encode as queries (uses the bundle's query prefix).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "npy"]), default="jsonl", show_default=True,
              help="jsonl: one JSON array per line. npy: a float32 [N,H] .npy on stdout.")
@click.option("--batch-size", type=click.IntRange(1, 4096), default=32, show_default=True)
@click.option("--threads", type=click.IntRange(1, 256), default=None, help="CPU threads (default: all cores).")
@click.argument("source", type=click.File("r", encoding="utf-8", errors="replace"), default="-")
def embed_cmd(bundle, backend, query, fmt, batch_size, threads, source):
    """Embed SOURCE (a file, or - for stdin), one text per line.

    Empty lines give zero vectors. Texts longer than the bundle's window are truncated and
    counted on stderr.
    """
    import numpy as np

    from hefsearch.embed import Encoder
    from hefsearch.index.encoders import choose_bundle

    picked = choose_bundle(None, bundle)  # before reading stdin: no bundle is an error at once
    if picked.note():
        click.echo(picked.note(), err=True)
    texts = [line.rstrip("\n") for line in source]
    # many texts: let an NPU take them in device batches (a single query stays at batch 1)
    opts = {"batch_size": batch_size, "bulk": len(texts) > 1}
    if threads:
        opts["threads"] = threads
    with Encoder.open(picked.path, backend=backend, **opts) as enc:
        click.echo(f"backend: {enc.backend_reason}", err=True)
        vecs = enc.encode_queries(texts) if query else enc.encode_passages(texts)
        st = enc.stats
    if fmt == "npy":
        if sys.stdout.isatty():
            raise click.UsageError("Refusing to write binary .npy to a terminal; redirect stdout to a file.")
        np.save(sys.stdout.buffer, vecs)
    else:
        for v in vecs:
            click.echo(json.dumps([round(float(x), 7) for x in v]))
    click.echo(f"{len(texts)} texts, {st.truncated} truncated, {st.empty} empty", err=True)

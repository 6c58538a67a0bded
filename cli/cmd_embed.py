"""``hefsearch embed``: one text per line in, one vector per line out (for scripts)."""

from __future__ import annotations

import json
import sys

import click

from .options import REQUIRED_BUNDLE_HELP, backend_option, bundle_option


@click.command("embed")
@bundle_option(REQUIRED_BUNDLE_HELP + " Default: the default bundle (see 'hefsearch index --help').")
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

    from hefsearch.app.embedding import choose_embed_bundle, embed_texts
    from hefsearch.app.requests import EmbedRequest

    picked = choose_embed_bundle(bundle)  # before reading stdin: no bundle is an error at once
    if picked.note():
        click.echo(picked.note(), err=True)
    texts = [line.rstrip("\n") for line in source]
    request = EmbedRequest(picked.path, backend=backend, query=query, batch_size=batch_size, threads=threads)
    result = embed_texts(request, texts, say=lambda line: click.echo(line, err=True))
    if fmt == "npy":
        if sys.stdout.isatty():
            raise click.UsageError("Refusing to write binary .npy to a terminal; redirect stdout to a file.")
        np.save(sys.stdout.buffer, result.vectors)
    else:
        for v in result.vectors:
            click.echo(json.dumps([round(float(x), 7) for x in v]))
    click.echo(f"{len(texts)} texts, {result.truncated} truncated, {result.empty} empty", err=True)

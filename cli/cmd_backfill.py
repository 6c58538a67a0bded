"""``hefsearch backfill``: store FP32 vectors for every chunk, so NPU results re-rank for free."""

from __future__ import annotations

import contextlib

import click

from .options import bundle_option, library_option


@click.command("backfill")
@library_option()
@bundle_option()
@click.option("--limit", type=click.IntRange(1, None), default=None,
              help="Encode at most this many chunks in this run (run again to continue).")
@click.option("--batch", type=click.IntRange(1, 4096), default=64, show_default=True,
              help="Chunks per batch; each batch is committed on its own, so Ctrl-C loses nothing.")
def backfill_cmd(library_path, bundle, limit, batch):
    """Fill the library's cpu-fp32 space with FP32 vectors of the chunks it lacks.

    Searches of a quantised space (hef, npu-sim-*, cpu-int8) re-rank their top results with
    FP32 vectors: missing ones are computed on the CPU at query time and cached. Back-filling computes the
    rest ahead of time (on the CPU, in batches; safe to interrupt and resume), so re-ranking
    costs only the query's own FP32 encoding. Creates the cpu-fp32 space when missing.
    """
    from hefsearch.app.backfill import run_backfill
    from hefsearch.app.requests import BackfillRequest

    result = run_backfill(BackfillRequest(library_path, bundle, limit, batch), progress=_bar)
    if result.report is None:
        click.echo(f"Nothing to do: the cpu-fp32 space of {result.library_path} holds every chunk.")
        return
    report = result.report
    click.echo(f"Added {report.added} FP32 vectors in {report.seconds:.1f} s; "
               f"{report.remaining} of {report.total} chunks still without one.")


@contextlib.contextmanager
def _bar(todo: int):
    """The back-fill's progress bar on stderr, gone when done; yields its (done, todo) callback."""
    from .progress import backfill_progress

    with backfill_progress() as bar:
        task = bar.add_task("fill", total=todo)
        yield lambda done, _todo: bar.update(task, completed=done)

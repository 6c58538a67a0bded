"""``hefsearch bench ...``: measurements. ``bench quality``: the 8-bit encoder against FP32."""

from __future__ import annotations

import click

from .main import LazyGroup
from .options import bundle_option, echo_json, json_option, library_option

#: subverb -> "module:attribute" under hefsearch.cli (other benchmarks plug in here)
BENCH_COMMANDS: dict[str, str] = {}


@click.group("bench", cls=LazyGroup, lazy=BENCH_COMMANDS)
def bench_group() -> None:
    """Measure what the NPU costs and gains against the CPU in FP32.

    \b
    quality  retrieval quality of every vector space against FP32 (parallel set + your library)
    """


@bench_group.command("quality")
@library_option()
@bundle_option()
@click.option("--spaces", "spaces", default=None, metavar="A,B",
              help="Spaces to compare (FP32 is always included): names from 'hefsearch status', or "
                   "npu-sim-<name> for a simulation in the bundle. Default: all the library's spaces "
                   "and every simulation in the bundle.")
@click.option("--queries", "queries_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Your queries, one per line. Default: pseudo-queries cut from random chunks.")
@click.option("--n-queries", type=click.IntRange(1, 100_000), default=200, show_default=True,
              help="How many pseudo-queries to sample (without --queries).")
@click.option("--rerank", "rerank", type=click.IntRange(0, 1000), default=30, show_default=True,
              help="Also measure FP32 re-ranking of each space's top-N (0: skip).")
@click.option("--no-library", is_flag=True, help="Only the bundled parallel set; do not open a library.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for sampling pseudo-queries.")
@json_option("Machine-readable report on stdout.")
@click.option("--plot", "plot", type=click.Path(dir_okay=False), default=None, metavar="FILE.png",
              help="Write a PNG of recall@k per space (needs matplotlib: pip install 'hefsearch[plot]').")
def quality_cmd(library_path, bundle, spaces, queries_file, n_queries, rerank, no_library, seed, as_json, plot):
    """How much retrieval quality does each vector space lose against FP32?

    \b
    1. The bundled parallel set (168 sentence pairs, 11 languages, near-duplicates that
       differ in one number, negation or name): top-1 translation retrieval and margin per
       space and language pair, and how well each space's similarity matrix correlates with
       FP32's (basis-invariant: a HEF may return another basis).
    2. Your library (unless --no-library): recall@1/5/10 and MRR of each space with FP32's
       top-1 as ground truth, the recall of that answer within the top-N (what re-ranking can
       reach), the same after FP32 re-ranking of the top-N, the mean document-document cosine
       (near 1 = collapse), and ms per query.

    An NPU simulation ('hefsearch compile sim') shows what a build choice would cost before
    you compile; it is labelled as a simulation, never as a HEF.
    """
    from hefsearch.evaluate.quality import QualityOptions, plot_recall, run_quality
    from hefsearch.evaluate.query_sets import read_queries

    library = None
    if not no_library:
        from hefsearch.app.folders import open_existing_library

        try:
            library = open_existing_library(library_path)
        except Exception as e:  # no library yet: the parallel set still works with --bundle
            if bundle is None:
                raise
            click.secho(f"note: no library ({getattr(e, 'message', e)}); measuring the parallel set only.",
                        fg="yellow", err=True)
    try:
        options = QualityOptions(spaces=[s.strip() for s in spaces.split(",") if s.strip()] if spaces else None,
                                 queries=read_queries(queries_file) if queries_file else None, n_queries=n_queries,
                                 rerank=rerank, seed=seed)
        report = run_quality(bundle, library, options, progress=lambda m: click.echo(m, err=True))
    finally:
        if library is not None:
            library.close()
    if plot:
        out = plot_recall(report, plot)
        click.echo(f"plot: {out}", err=True)
    if as_json:
        echo_json(report.to_dict())
        return
    from .render import print_quality

    print_quality(report)

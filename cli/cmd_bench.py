"""``hefsearch bench ...``: measurements. ``bench quality``: the 8-bit encoder against FP32."""

from __future__ import annotations

import json
import math

import click

from .main import LazyGroup
from .cmd_index import library_option

#: subverb -> "module:attribute" under hefsearch.tui (other benchmarks plug in here)
BENCH_COMMANDS: dict[str, str] = {}


@click.group("bench", cls=LazyGroup, lazy=BENCH_COMMANDS)
def bench_group() -> None:
    """Measure what the NPU costs and gains against the CPU in FP32.

    \b
    quality  retrieval quality of every vector space against FP32 (parallel set + your library)
    """


def _f(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}"


@bench_group.command("quality")
@library_option
@click.option("--bundle", "bundle", envvar="HEFSEARCH_BUNDLE", default=None, type=click.Path(file_okay=False),
              help="Model bundle (default: the one the library was built with).")
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
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report on stdout.")
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
    from hefsearch.evaluate.quality import plot_recall, read_queries, run_quality

    library = None
    if not no_library:
        from hefsearch.index.library import Library

        try:
            library = Library.open(library_path, create=False)
        except Exception as e:  # no library yet: the parallel set still works with --bundle
            if bundle is None:
                raise
            click.secho(f"note: no library ({getattr(e, 'message', e)}); measuring the parallel set only.",
                        fg="yellow", err=True)
    try:
        report = run_quality(
            bundle, library=library, spaces=[s.strip() for s in spaces.split(",") if s.strip()] if spaces else None,
            queries=read_queries(queries_file) if queries_file else None, n_queries=n_queries,
            rerank=rerank, seed=seed, progress=lambda m: click.echo(m, err=True),
        )
    finally:
        if library is not None:
            library.close()
    if plot:
        out = plot_recall(report, plot)
        click.echo(f"plot: {out}", err=True)
    if as_json:
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
        return
    print_report(report)


def print_report(report) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from hefsearch.evaluate.quality import config_line

    con = Console()
    if not con.is_terminal:  # a file or a pipe: wide enough that the tables keep one row per line
        con = Console(width=140)
    err = Console(stderr=True)
    for n in report.notices:
        err.print(f"[yellow]note: {escape(n)}[/]")
    b = report.bundle
    con.print(f"[bold]{escape(b['model'])}[/] · seq {b['seq_len']} · hidden {b['hidden']}")

    cfg = Table(title="Build configuration", title_justify="left", expand=False)
    cfg.add_column("space")
    cfg.add_column("encoder")
    cfg.add_column("configuration", overflow="fold")
    for s in report.spaces:
        cfg.add_row(escape(s.name), escape(s.label), escape(s.error and f"skipped: {s.error}" or config_line(s.config)))
    con.print(cfg)

    par = [s for s in report.spaces if s.parallel]
    if par:
        p = report.parallel
        t = Table(title=f"Parallel set: {p['pairs']} pairs, {len(p['languages'])} languages "
                        f"({p['near_duplicate_rows']} near-duplicate rows)", title_justify="left")
        for col in ("space", "top-1", "top-1 near-dup", "margin", "sim-corr vs FP32",
                    "cos to FP32*", "mean pair cos", "ms/text"):
            t.add_column(col, justify="left" if col == "space" else "right")
        for s in par:
            r = s.parallel
            t.add_row(escape(s.name), _f(r.top1), _f(r.top1_near_duplicates), _f(r.margin),
                      _f(r.similarity_pearson), _f(r.cosine_to_fp32), _f(r.mean_pairwise_cosine), _f(r.ms_per_text, 1))
        con.print(t)
        lp = Table(title="Top-1 translation retrieval per language pair", title_justify="left")
        lp.add_column("pair")
        for s in par:
            lp.add_column(escape(s.name), justify="right")
        for pair in p["language_pairs"]:
            lp.add_row(pair, *[_f(s.parallel.top1_by_pair.get(pair), 2) for s in par])
        con.print(lp)
        con.print("[dim]* paired cosine compares coordinates: meaningful only when both spaces share a basis.[/]")

    lib = [s for s in report.spaces if s.library]
    if lib:
        info = report.library
        depth = info["rerank_depth"]
        src = "queries from your file" if info["query_source"] == "file" else "pseudo-queries cut from random chunks"
        t = Table(title=f"Your library: {info['queries']} {src}, {info['chunks']} chunks; "
                        "ground truth = FP32's top-1", title_justify="left")
        cols = ["space", "R@1", "R@5", "R@10", "MRR"]
        if depth:
            cols.append(f"in top {depth}")
        cols += ["overlap@10", "doc-doc cos", "ms/query"]
        if info.get("labelled"):
            cols.append("found@1/@10")
        for col in cols:
            t.add_column(col, justify="left" if col == "space" else "right")

        def row(name, rec, mrr, at_depth, overlap, doc, ms, found):
            cells = [name, _f(rec["1"]), _f(rec["5"]), _f(rec["10"]), _f(mrr)]
            if depth:
                cells.append(_f(at_depth))
            cells += [overlap, doc, ms]
            if info.get("labelled"):
                cells.append(f"{_f(found['1'], 2)}/{_f(found['10'], 2)}" if found else "–")
            t.add_row(*cells)

        for s in lib:
            r = s.library
            row(escape(s.name), r.recall, r.mrr, r.recall_at_depth, _f(r.overlap_at_10), _f(r.doc_cosine),
                _f(r.ms_per_query, 1), r.source_found)
            if r.reranked:
                rr = r.reranked
                row(f"  + FP32 re-rank top {rr['depth']}", rr["recall"], rr["mrr"], None, "", "", "",
                    rr["source_found"])
        con.print(t)
        if info.get("labelled"):
            what = ("the chunk each pseudo-query was cut from" if info["query_source"] == "pseudo"
                    else "a chunk of the expected document")
            con.print(f"[dim]found@k: {what} is in the top k (FP32 is measured against it too).[/]")

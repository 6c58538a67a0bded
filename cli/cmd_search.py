"""``hefsearch search``: one query against the library, as a table or JSON."""

from __future__ import annotations

import json

import click

from .cmd_index import library_option


def where(hit) -> str:
    """'p. 3 · line 12 · chars 420-910' (page only for PDFs)."""
    parts = []
    if hit.page is not None:
        parts.append(f"p. {hit.page}")
    parts.append(f"line {hit.line}")
    parts.append(f"chars {hit.start}-{hit.end}")
    return " · ".join(parts)


def refuse_blank_query(query: str) -> None:
    """An empty query is a usage error (exit 2): searching for nothing has no answer."""
    from hefsearch.search.api import EMPTY_QUERY_NOTICE, SearchError, prepare_query

    if not prepare_query(query)[0]:
        raise SearchError(EMPTY_QUERY_NOTICE.removesuffix("."),
                          'Give the words to look for, e.g. hefsearch search "tax deadline".')


def no_results(path_glob, kinds) -> str:
    """'No results. (filters: path *.pdf, kind pdf)', the glob as it was matched."""
    from hefsearch.search.keyword import path_pattern

    filters = [f"path {path_pattern(path_glob)}" if path_glob else "",
               f"kind {', '.join(kinds)}" if kinds else ""]
    filters = [f for f in filters if f]
    return "No results." + (f" (filters: {', '.join(filters)})" if filters else "")


@click.command("search")
@click.argument("query")
@library_option
@click.option("-k", "--k", "k", type=click.IntRange(1, 1000), default=10, show_default=True, help="Number of results.")
@click.option("--mode", type=click.Choice(["hybrid", "vector", "keyword"]), default="hybrid", show_default=True,
              help="vector: by meaning (any language). keyword: exact words (BM25). hybrid: meaning, "
                   "boosted where every query word occurs.")
@click.option("--space", default=None, help="Vector space to search (default: the library's default; "
                                            "see 'hefsearch status').")
@click.option("--path", "path_glob", default=None, metavar="GLOB",
              help="Only files whose path matches (e.g. '*.pdf', '*/invoices/*'); a pattern without "
                   "'/' is also matched against the file name.")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(["text", "markdown", "html", "pdf", "docx"]),
              help="Only documents of this kind. Repeatable.")
@click.option("--bundle", "bundle", envvar="HEFSEARCH_BUNDLE", default=None, type=click.Path(file_okay=False),
              help="Model bundle (default: the one the library was built with).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
def search_cmd(query, library_path, k, mode, space, path_glob, kinds, bundle, as_json):
    """Search the library for QUERY.

    Prints rank, score, file, page/line/char span and a snippet. Scores: cosine similarity
    (vector), BM25 (keyword), reciprocal-rank-fusion score (hybrid). An empty QUERY is an
    error (exit code 2); a keyword query with no words (only punctuation) finds nothing and
    says why.
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from hefsearch.index.library import Library
    from hefsearch.search import Searcher

    refuse_blank_query(query)
    library = Library.open(library_path, create=False)
    try:
        searcher = Searcher(library, bundle=bundle)
        try:
            result = searcher.search(query, k=k, mode=mode, space=space, path_glob=path_glob,
                                     kinds=kinds or None)
        finally:
            searcher.close()
    finally:
        library.close()
    if as_json:
        click.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
        return
    out, err = Console(), Console(stderr=True)
    if result.notice:
        err.print(Text(result.notice, style="yellow"))
    if not result.hits:
        err.print(Text(no_results(path_glob, kinds)))
        return
    table = Table(show_lines=True, expand=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("file · where", overflow="fold", ratio=2)
    table.add_column("snippet", overflow="fold", ratio=3)
    for h in result.hits:
        # Text, not markup: a file name or a chunk may hold "[/]" or "[bold]"
        table.add_row(str(h.rank), f"{h.score:.4f}", Text.assemble(h.path, "\n", (where(h), "dim")),
                      Text(h.snippet.replace("\n", " ")))
    out.print(table)
    t = result.timings
    err.print(Text(f"{result.mode}"
                   + (f" · space {result.space} ({result.backend_label})" if result.space else "")
                   + f" · {t.get('total', 0):.0f} ms (encode {t.get('encode', 0):.0f}, search "
                     f"{t.get('search', 0) + t.get('keyword', 0):.1f}, snippets {t.get('snippet', 0):.0f})",
                   style="dim"))

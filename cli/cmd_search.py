"""``hefsearch search``: one query against the library, as a table or JSON."""

from __future__ import annotations

import click

from hefsearch.app.searching import check_query
from hefsearch.search.request import MODES
from hefsearch.search.searcher import EMPTY_QUERY_NOTICE

from .main import may_exit_quickly
from .options import bundle_option, echo_json, filter_options, json_option, library_option, rerank_option


def refuse_blank_query(query: str) -> None:
    """An empty query is a usage error (exit 2): searching for nothing has no answer."""
    check_query(query, message=EMPTY_QUERY_NOTICE.removesuffix("."),
                hint='Give the words to look for, e.g. hefsearch search "tax deadline".')


@click.command("search")
@click.argument("query")
@library_option()
@click.option("-k", "--k", "k", type=click.IntRange(1, 1000), default=10, show_default=True, help="Number of results.")
@click.option("--mode", type=click.Choice(MODES), default="hybrid", show_default=True,
              help="vector: by meaning (any language). keyword: exact words (BM25). hybrid: meaning, "
                   "boosted where every query word occurs.")
@click.option("--space", default=None, help="Vector space to search (default: the library's default; "
                                            "see 'hefsearch status').")
@filter_options
@click.option("--quick-snippets", is_flag=True,
              help="Snippets from the query's words only: no sentence is embedded, so a hit "
                   "sharing no word with the query (another language) shows its first sentence.")
@click.option("--all-chunks", is_flag=True,
              help="Every matching chunk as ranked: several of one file, and copies of one text in "
                   "several files (default: one hit per file, its best chunk, copies folded under it).")
@rerank_option()
@bundle_option()
@json_option("Print the result as JSON on stdout: the same JSON the server's /search and the MCP "
             "'search' tool return.")
def search_cmd(query, library_path, k, mode, space, filters, quick_snippets, all_chunks, rerank, bundle, as_json):
    """Search the library for QUERY.

    Prints one hit per file: rank, score, file, page/line/char span, how many more chunks of
    the file matched, the files holding the same text (folded under it) and a snippet
    (--all-chunks lists every chunk). Scores: the cosine similarity of query and passage
    (vector and hybrid; '+kw': keyword search found it too, so it ranks higher), BM25
    (keyword); JSON has both as 'similarity' and the ranking's own 'score'. A row 'weaker
    matches below' marks where relevance ends: the hits above it stand out from the query's
    other candidates (JSON: 'relevant' per hit, 'relevance' for the line). An empty QUERY
    is an error (exit code 2); a keyword query with no words (only punctuation) finds
    nothing and says why. Snippets of hits sharing no word with the query are chosen by meaning after the
    search, on the CPU in FP32, for as many hits as fit 100 ms (timed apart as semantic_snippets;
    the others keep their first sentence); --quick-snippets skips that.

    \b
    Filters: --path GLOB, --type pdf,docx, --lang de, --since 7d, --until 2024-01-01.
    A server keeps the encoder warm between queries: hefsearch serve.
    """
    from hefsearch.search.snippets import CLI_BUDGET_MS
    from hefsearch.app.session import LibrarySession
    from hefsearch.search.request import SearchRequest

    refuse_blank_query(query)
    request = SearchRequest(query=query, mode=mode, k=k, filters=filters, space=space, all_chunks=all_chunks,
                            rerank_depth=rerank, snippets="quick" if quick_snippets else "meaning",
                            snippet_budget_ms=CLI_BUDGET_MS)
    # One query: only the searched space's index is read, while its encoder opens beside it
    with LibrarySession.open(library_path, bundle=bundle, load_spaces=False) as session:
        session.prefetch(request)
        if not as_json:
            from . import render  # noqa: F401  (imported while the encoder opens, not after)
        result = session.search(request)
        fresh = session.freshness()
    if as_json:
        from hefsearch.app.service import search_json

        echo_json(search_json(result, fresh))
    else:
        from .render import print_search

        print_search(result)
    may_exit_quickly(session)  # the session is closed and all is printed: no teardown needed

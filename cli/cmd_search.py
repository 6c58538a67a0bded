"""``hefsearch search``: one query against the library, as a table or JSON."""

from __future__ import annotations

import time

import click

from hefsearch.index.extract import SUPPORTED_SUFFIXES
from hefsearch.search.api import EMPTY_QUERY_NOTICE, MODES, SearchError, prepare_query

from .options import bundle_option, echo_json, json_option, library_option

#: text, markdown, html, pdf, docx: what the extractors recognise, in their order
DOCUMENT_KINDS = tuple(dict.fromkeys(SUPPORTED_SUFFIXES.values()))


def refuse_blank_query(query: str) -> None:
    """An empty query is a usage error (exit 2): searching for nothing has no answer."""
    if not prepare_query(query)[0]:
        raise SearchError(EMPTY_QUERY_NOTICE.removesuffix("."),
                          'Give the words to look for, e.g. hefsearch search "tax deadline".')


@click.command("search")
@click.argument("query")
@library_option()
@click.option("-k", "--k", "k", type=click.IntRange(1, 1000), default=10, show_default=True, help="Number of results.")
@click.option("--mode", type=click.Choice(MODES), default="hybrid", show_default=True,
              help="vector: by meaning (any language). keyword: exact words (BM25). hybrid: meaning, "
                   "boosted where every query word occurs.")
@click.option("--space", default=None, help="Vector space to search (default: the library's default; "
                                            "see 'hefsearch status').")
@click.option("--path", "path_glob", default=None, metavar="GLOB",
              help="Only files whose path matches (e.g. '*.pdf', '*/invoices/*'); a pattern without "
                   "'/' is also matched against the file name.")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(DOCUMENT_KINDS),
              help="Only documents of this kind. Repeatable.")
@click.option("--quick-snippets", is_flag=True,
              help="Snippets from the query's words only: no sentence is embedded, so a hit "
                   "sharing no word with the query (another language) shows its first sentence.")
@click.option("--all-chunks", is_flag=True,
              help="Every matching chunk as ranked: several of one file, and copies of one text in "
                   "several files (default: one hit per file, its best chunk, copies folded under it).")
@bundle_option()
@json_option()
def search_cmd(query, library_path, k, mode, space, path_glob, kinds, quick_snippets, all_chunks, bundle, as_json):
    """Search the library for QUERY.

    Prints one hit per file: rank, score, file, page/line/char span, how many more chunks of
    the file matched, the files holding the same text (folded under it) and a snippet
    (--all-chunks lists every chunk). Scores: the cosine similarity of query and passage
    (vector and hybrid; '+kw': keyword search found it too, so it ranks higher), BM25
    (keyword); JSON has both as 'similarity' and the ranking's own 'score'. An empty QUERY
    is an error (exit code 2); a keyword query with no words (only punctuation) finds
    nothing and says why. Snippets of hits sharing no word with the query are chosen by meaning after the
    search, on the CPU in FP32 (timed apart as semantic_snippets); --quick-snippets skips that.
    """
    from hefsearch.index.library import Library
    from hefsearch.search import Searcher

    refuse_blank_query(query)
    library = Library.open(library_path, create=False)
    try:
        searcher = Searcher(library, bundle=bundle)
        try:
            result = searcher.search(query, k=k, mode=mode, space=space, path_glob=path_glob,
                                     kinds=kinds or None, all_chunks=all_chunks)
            if result.pending_snippets and not quick_snippets:
                t = time.perf_counter()
                result.apply_snippets(searcher.semantic_snippets(result))
                result.timings["semantic_snippets"] = (time.perf_counter() - t) * 1000.0
        finally:
            searcher.close()
    finally:
        library.close()
    if as_json:
        echo_json(result.to_dict())
        return
    from .render import print_search

    print_search(result, path_glob, kinds)

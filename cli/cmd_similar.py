"""``hefsearch similar``: the chunks of other documents nearest to a document or one chunk of it."""

from __future__ import annotations

import click

from .options import echo_json, filter_options, json_option, library_option


@click.command("similar")
@click.argument("target", required=False, metavar="PATH[:CHUNK]")
@click.option("--id", "chunk_id", type=int, default=None, metavar="CHUNK_ID",
              help="The chunk by its id (chunk_id in 'hefsearch search --json').")
@library_option()
@click.option("-k", "--k", "k", type=click.IntRange(1, 1000), default=10, show_default=True, help="Number of results.")
@click.option("--space", default=None, help="Vector space to compare in (default: the library's default).")
@filter_options
@json_option("Print the result as JSON on stdout (the same JSON as the server's /similar).")
def similar_cmd(target, chunk_id, library_path, k, space, filters, as_json):
    """More like this: chunks of other documents nearest to PATH (the whole document), to its
    CHUNK-th chunk (PATH:3), or to a chunk by --id.

    Nothing is encoded: the stored vectors are compared, so this is as fast as a search
    without its query encoding. Filters work as in 'hefsearch search'.
    """
    from hefsearch.app.requests import SimilarRequest
    from hefsearch.app.service import search_json
    from hefsearch.app.session import LibrarySession

    with LibrarySession.open(library_path) as session:
        if chunk_id is None and not target:
            raise click.UsageError("Give a document (PATH or PATH:CHUNK) or --id CHUNK_ID.")
        chunk, doc = (chunk_id, None) if chunk_id is not None else session.find_target(target)
        result = session.similar(SimilarRequest(chunk_id=chunk, doc_id=doc, k=k, space=space, filters=filters))
        fresh = session.freshness()
    if as_json:
        echo_json(search_json(result, fresh))
        return
    from .render import print_search

    from hefsearch.base.terminal_text import for_terminal

    click.echo(for_terminal(result.query), err=True)  # "like PATH": a file name
    print_search(result)

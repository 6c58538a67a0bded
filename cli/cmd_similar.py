"""``hefsearch similar``: the chunks of other documents nearest to a document or one chunk of it."""

from __future__ import annotations

import os

import click

from hefsearch.search.api import SearchError

from .options import echo_json, filter_options, json_option, library_option


def resolve_target(library, target: str | None, chunk_id: int | None) -> tuple[int | None, int | None]:
    """(chunk id, document id) for ``PATH`` (a whole document), ``PATH:N`` (its N-th chunk,
    from 1) or ``--id``; a path the library does not hold is an error."""
    from hefsearch.base.terminal_text import printable

    if chunk_id is not None:
        return chunk_id, None
    if not target:
        raise click.UsageError("Give a document (PATH or PATH:CHUNK) or --id CHUNK_ID.")

    def doc_of(path: str) -> int | None:
        rows = library.query("SELECT id FROM documents WHERE path = ?", [printable(os.path.abspath(path))])
        return rows[0][0] if rows else None

    doc = doc_of(target)
    if doc is not None:
        return None, doc
    path, sep, number = target.rpartition(":")
    if sep and number.isdigit() and (doc := doc_of(path)) is not None:
        rows = library.query("SELECT id FROM chunks WHERE doc_id = ? AND ordinal = ?", [doc, int(number) - 1])
        if not rows:
            count = library.query("SELECT COUNT(*) FROM chunks WHERE doc_id = ?", [doc])[0][0]
            raise SearchError(f"{path} has {count} chunk(s); there is no chunk {number}.",
                              f"Give a number from 1 to {count}, or the path alone for the whole document.")
        return rows[0][0], None
    raise SearchError(f"{target} is not a document of the library {library.path}.",
                      "Give the path of an indexed file (as 'hefsearch search' lists it), optionally "
                      "with :CHUNK, or --id with a chunk_id from 'hefsearch search --json'.")


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
        chunk, doc = resolve_target(session.library, target, chunk_id)
        result = session.similar(SimilarRequest(chunk_id=chunk, doc_id=doc, k=k, space=space, filters=filters))
        fresh = session.freshness()
    if as_json:
        echo_json(search_json(result, fresh, filters))
        return
    from .render import print_search

    click.echo(result.query, err=True)
    print_search(result, filters=filters)

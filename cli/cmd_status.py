"""``hefsearch status``: what the library holds, its spaces and what failed."""

from __future__ import annotations

import click

from hefsearch.base.terminal_text import for_terminal

from .options import echo_json, json_option, library_option

MAX_FAILURES = 50


@click.command("status")
@library_option()
@json_option()
@click.option("--all", "show_all", is_flag=True, help=f"List every failure (default: the first {MAX_FAILURES}).")
def status_cmd(library_path, as_json, show_all):
    """Show documents, chunks, the folders indexed ('hefsearch index' with no PATH updates
    them), the last run (or that it was interrupted), how fresh the library is (whether
    'hefsearch watch' keeps it current), vector spaces and which of them this machine can
    search (and how), failures with reasons, files left out on purpose (symlinks not
    followed, special files) and truncated chunks."""
    from hefsearch.app.archives import library_reach
    from hefsearch.app.folders import existing_library
    from hefsearch.app.freshness import freshness
    from hefsearch.app.service import status_json

    with existing_library(library_path) as library:
        st = library.status()
        fresh = freshness(library)
        reach = library_reach(library)  # which spaces this machine can search, and how
    if as_json:
        echo_json({**status_json(st, fresh), "search_here": [vars(r) for r in reach]})
        return
    from .render import print_status

    print_status(st, limit=None if show_all else MAX_FAILURES, freshness=fresh.describe())
    for r in reach:
        click.secho(f"Search here: {for_terminal(r.name)} {'on' if r.searchable else 'no:'} "
                    f"{for_terminal(r.how.removeprefix('on '))}", fg=None if r.searchable else "yellow")

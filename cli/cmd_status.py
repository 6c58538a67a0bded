"""``hefsearch status``: what the library holds, its spaces and what failed."""

from __future__ import annotations

from dataclasses import asdict

import click

from .options import echo_json, json_option, library_option

MAX_FAILURES = 50


def status_dict(st) -> dict:
    from hefsearch.index.crawl import SECRET_FILE_PATTERNS

    d = asdict(st)
    d["secret_file_rule"] = list(SECRET_FILE_PATTERNS)
    d["failures"] = [{"path": p, "reason": r} for p, r in st.failures]
    d["notes"] = [{"path": p, "reason": r} for p, r in st.notes]
    d["spaces"] = [{**asdict(s), "complete": s.count == st.chunks} for s in st.spaces]
    return d


@click.command("status")
@library_option()
@json_option()
@click.option("--all", "show_all", is_flag=True, help=f"List every failure (default: the first {MAX_FAILURES}).")
def status_cmd(library_path, as_json, show_all):
    """Show documents, chunks, the folders indexed ('hefsearch index' with no PATH updates
    them), the last run (or that it was interrupted), vector spaces, failures with reasons,
    files left out on purpose (symlinks not followed, special files) and truncated chunks."""
    from hefsearch.index.library import Library

    library = Library.open(library_path, create=False)
    try:
        st = library.status()
    finally:
        library.close()
    if as_json:
        echo_json(status_dict(st))
        return
    from .render import print_status

    print_status(st, limit=None if show_all else MAX_FAILURES)

"""``hefsearch status``: what the library holds, its spaces and what failed."""

from __future__ import annotations

import json
from dataclasses import asdict

import click

from .cmd_index import library_option

MAX_FAILURES = 50


def status_dict(st) -> dict:
    from hefsearch.index.crawl import SECRET_FILE_PATTERNS

    d = asdict(st)
    d["secret_file_rule"] = list(SECRET_FILE_PATTERNS)
    d["failures"] = [{"path": p, "reason": r} for p, r in st.failures]
    d["spaces"] = [{**asdict(s), "complete": s.count == st.chunks} for s in st.spaces]
    return d


@click.command("status")
@library_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
@click.option("--all", "show_all", is_flag=True, help=f"List every failure (default: the first {MAX_FAILURES}).")
def status_cmd(library_path, as_json, show_all):
    """Show documents, chunks, vector spaces, failures with reasons, and truncated chunks."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from hefsearch.index.crawl import IGNORE_FILE, secret_rule_text
    from hefsearch.index.library import Library

    library = Library.open(library_path, create=False)
    try:
        st = library.status()
    finally:
        library.close()
    if as_json:
        click.echo(json.dumps(status_dict(st), ensure_ascii=False, indent=2))
        return
    out = Console()
    out.print(f"[bold]Library[/] {escape(st.path)}")
    bundle = st.settings.get("bundle")
    out.print(f"  bundle: {escape(str(bundle)) if bundle else '(none recorded)'}")
    out.print(f"  documents: [bold]{st.documents}[/]   chunks: [bold]{st.chunks}[/]   "
              f"cut mid-sentence to fit: {st.truncated_chunks}")
    out.print(f"  last sync: {st.last_sync or 'never'}"
              + ("   skipped: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(st.skipped.items()) if v)
                 if any(st.skipped.values()) else ""))
    out.print(f"  never indexed (secret files): {escape(secret_rule_text())}; "
              f"re-include one with '!NAME' in a {IGNORE_FILE}", overflow="fold")
    if st.spaces:
        t = Table(title="Vector spaces", title_justify="left")
        for col in ("space", "backend", "chunks", "dim", "index", "fingerprint"):
            t.add_column(col, justify="right" if col in ("chunks", "dim") else "left")
        default = st.settings.get("default_space")
        for s in st.spaces:
            cover = f"{s.count}" if s.count == st.chunks else f"[yellow]{s.count}/{st.chunks}[/]"
            t.add_row(s.name + (" (default)" if s.name == default else ""), escape(s.label or s.backend),
                      cover, str(s.dim), s.index_factory, s.fingerprint[:12])
        out.print(t)
        if any(s.count < st.chunks for s in st.spaces):
            out.print("[yellow]A space holds fewer chunks than the library: run 'hefsearch index' "
                      "with its backend to fill it.[/]")
    if st.failures:
        rows = st.failures if show_all else st.failures[:MAX_FAILURES]
        t = Table(title=f"{len(st.failures)} files not indexed", title_justify="left", title_style="red")
        t.add_column("file", overflow="fold")
        t.add_column("reason", overflow="fold")
        for p, r in rows:
            t.add_row(escape(p.replace("\n", "\\n")), escape(r))
        out.print(t)
        if len(rows) < len(st.failures):
            out.print(f"... and {len(st.failures) - len(rows)} more (--all lists them)")

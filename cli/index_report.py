"""The end-of-run summary of ``hefsearch index`` (human on stderr, or a JSON dict)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

MAX_LISTED = 25


def sync_summary_dict(report, library_path, skipped_spaces=()) -> dict:
    return {
        "library": str(library_path), "spaces": report.spaces, "added": report.added,
        "changed": report.changed, "removed": report.removed, "unchanged": report.unchanged,
        "chunks_embedded": report.chunks_embedded, "backfilled": report.backfilled,
        "chunks_cut": report.chunks_cut, "seconds": round(report.seconds, 3),
        "partial": report.partial, "skipped": report.skipped,
        "failed": [{"path": p, "reason": r} for p, r in report.failed],
        "stale": [{"path": p, "reason": r} for p, r in report.stale],
        "notes": [{"path": p, "reason": r} for p, r in report.notes],
        "links_not_followed": [{"path": p, "reason": r} for p, r in report.links],
        "spaces_not_updated": [{"space": s, "reason": r} for s, r in skipped_spaces],
    }


def _file_table(title: str, rows, style: str) -> Table:
    t = Table(title=title, title_justify="left", title_style=style, show_header=True,
              header_style="bold", expand=False)
    t.add_column("file", overflow="fold")
    t.add_column("reason", overflow="fold")
    for p, r in rows[:MAX_LISTED]:
        t.add_row(escape(p.replace("\n", "\\n")), escape(r))
    if len(rows) > MAX_LISTED:
        t.add_row(f"... and {len(rows) - MAX_LISTED} more", "see: hefsearch status")
    return t


def print_sync_summary(console: Console, report, library_path) -> None:
    rate = report.chunks_embedded / report.encode_seconds if report.encode_seconds else 0.0
    console.print(
        f"[bold]{report.added}[/] new, [bold]{report.changed}[/] changed, [bold]{report.removed}[/] "
        f"removed, {report.unchanged} unchanged files; [bold]{report.chunks_embedded}[/] chunks "
        f"embedded into {', '.join(report.spaces)} in {report.seconds:.1f} s"
        + (f" ({rate:.1f} chunks/s while encoding)" if report.chunks_embedded else "")
        + (f"; {report.backfilled} back-filled" if report.backfilled else "")
        + (f"; {report.chunks_cut} chunks cut mid-sentence to fit" if report.chunks_cut else ""))
    skipped = {k: v for k, v in report.skipped.items() if v}
    if skipped:
        console.print("skipped: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(skipped.items())))
    if report.notes:
        console.print(_file_table("Not indexed (not regular documents)", report.notes, "yellow"))
    if report.links:
        console.print(_file_table("Symlinks not followed (the target is outside the folders you named, "
                                  "or a system folder)", report.links, "yellow"))
    if report.stale:
        console.print(_file_table("Now failing; the previously indexed version is kept",
                                  report.stale, "yellow"))
    if report.failed:
        console.print(_file_table(f"{len(report.failed)} files failed", report.failed, "red"))
        console.print(f"[yellow]Partial: every other file is indexed in {escape(str(library_path))}.[/]")
    else:
        console.print(f"[green]Library up to date:[/] {escape(str(library_path))}")

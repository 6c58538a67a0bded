"""``hefsearch export`` and ``hefsearch import``: a library as one archive file, and back."""

from __future__ import annotations

import sys

import click

from hefsearch.base.terminal_text import for_terminal

from .options import bundle_option, echo_json, json_option, library_option


@click.command("export")
@click.argument("archive", type=click.Path(dir_okay=False))
@library_option()
@click.option("--space", "spaces", multiple=True, metavar="NAME",
              help="Export only this vector space (repeatable; default: every space).")
@click.option("--no-vectors", is_flag=True,
              help="Leave every vector space out: a small archive; the other end embeds the text again "
                   "with 'hefsearch index'.")
@json_option()
def export_cmd(archive, library_path, spaces, no_vectors, as_json):
    """Write the library to ARCHIVE (a new .tar file; .tar.gz or .tar.xz compress it; '-' writes
    a .tar to stdout) while it may be in use: 'watch', 'serve' or 'index' can keep writing. The archive holds the
    database, the vectors of each space with its encoder fingerprint, the remembered folders and
    settings, and a manifest with versions and checksums. Restore it with 'hefsearch import'."""
    from hefsearch.app.archives import export_archive, export_json
    from hefsearch.app.requests import ExportRequest

    if archive == "-":
        _export_to_stdout(library_path, spaces, not no_vectors)
        return
    report = export_archive(ExportRequest(archive, library_path, spaces, not no_vectors))
    if as_json:
        echo_json(export_json(report))
        return
    spaces_text = ", ".join(f"{n} ({c:,} vectors)" for n, c in report.spaces.items()) or "no vector spaces"
    click.echo(f"Exported {report.documents:,} documents, {report.chunks:,} chunks and {for_terminal(spaces_text)} "
               f"to {for_terminal(str(report.path))} ({report.bytes / 1e6:.1f} MB, {report.seconds:.1f} s).")
    for space, n in report.lost.items():
        click.secho(f"  {n:,} chunks of {for_terminal(space)} had no readable vector and were left out; "
                    "'hefsearch index' after import embeds them again.", fg="yellow")


def _export_to_stdout(library_path, spaces, vectors: bool) -> None:
    """``export -``: the archive on stdout (``ssh pi hefsearch export - > pi.tar``)."""
    from hefsearch.app.archives import stream_export

    out = sys.stdout.buffer  # click.get_binary_stream is deprecated (removed in Click 9)
    if out.isatty():
        raise click.UsageError("Not writing an archive to a terminal: redirect it, e.g. 'hefsearch export - > lib.tar'.")
    _name, body = stream_export(library_path, spaces, vectors)
    size = 0
    for block in body:
        out.write(block)
        size += len(block)
    out.flush()
    click.echo(f"Exported {size / 1e6:.1f} MB to stdout.", err=True)


@click.command("import")
@click.argument("archive", type=click.Path(dir_okay=False, exists=True))
@library_option(help="The new library to create (a name in the data folder, or a path; default: the "
                     "default library, which must not exist yet unless --replace).")
@click.option("--map", "maps", multiple=True, metavar="OLD=NEW",
              help="Documents stored under the folder OLD are now under NEW (repeatable), e.g. "
                   "--map /home/pi/Documents=/Users/me/Documents.")
@click.option("--replace", is_flag=True, help="Put the archive in place of an existing library (deleted).")
@bundle_option(help="The model bundle to judge which spaces this machine can search (default: the one "
                    "the library records, else the default bundle).")
@json_option()
def import_cmd(archive, library_path, maps, replace, bundle, as_json):
    """Restore ARCHIVE (from 'hefsearch export') as a new library. Every checksum and version is
    checked before anything is written, and a failed import leaves nothing behind. Files that
    are not at their (mapped) place are reported; 'hefsearch index' then brings the library up
    to date, embedding only what changed."""
    from hefsearch.app.archives import import_archive, import_json
    from hefsearch.app.requests import ImportRequest

    result = import_archive(ImportRequest(archive, library_path, maps, replace, bundle))
    if as_json:
        echo_json(import_json(result))
        return
    r, m = result.report, result.report.manifest
    click.echo(f"Imported {m.documents:,} documents and {m.chunks:,} chunks into {for_terminal(str(r.path))}"
               f"{' (the old library was replaced)' if r.replaced else ''}; archive from hefsearch "
               f"{for_terminal(m.hefsearch)}, {for_terminal(m.created_at)}.")
    remap = r.remap
    if maps:
        click.echo(f"  {remap.moved:,} document paths moved by --map.")
    if remap.outside_count:
        click.secho(f"  {remap.outside_count:,} documents lie under no --map OLD folder (kept as they were), e.g. "
                    + ", ".join(for_terminal(p) for p in remap.outside), fg="yellow")
    if remap.missing_count:
        click.secho(f"  {remap.missing_count:,} documents are not at their place on this machine, e.g. "
                    + ", ".join(for_terminal(p) for p in remap.missing)
                    + ". Searching still finds them; 'hefsearch index' removes the ones that are gone"
                    + ("" if maps else " (add --map OLD=NEW when they moved)") + ".", fg="yellow")
    for reach in result.reach:
        colour = None if reach.searchable else "yellow"
        click.secho(f"  space {for_terminal(reach.name)}: "
                    f"{'searchable here ' if reach.searchable else 'not searchable here: '}{for_terminal(reach.how)}",
                    fg=colour)
    if not m.vectors:
        click.echo("  The archive holds no vectors: 'hefsearch index --bundle BUNDLE' embeds the text again.")

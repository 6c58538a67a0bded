"""``hefsearch index``: build or update a library from folders (incremental)."""

from __future__ import annotations

import sys

import click

from .options import backend_option, bundle_option, device_option, echo_json, json_option, library_option

EXIT_OK, EXIT_ERROR, EXIT_PARTIAL, EXIT_DISK_FULL, EXIT_INTERRUPTED = 0, 2, 3, 4, 130


def sync_summary_dict(report, library_path, skipped_spaces=(), interrupted: bool = False) -> dict:
    """The ``--json`` summary of a run (``print_sync_summary`` in render is the human one)."""
    return {
        "interrupted": interrupted, "found": report.found,
        "unsupported": report.unsupported, "nothing_supported": report.nothing_supported(),
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


def parse_ext(values) -> dict[str, str]:
    """``--ext log --ext .xhtml=html --ext conf,ini`` -> {'.log': 'text', '.xhtml': 'html', ...}."""
    from hefsearch.index.filetypes import normalise_suffix
    from hefsearch.index.formats import KINDS

    kinds = set(KINDS)
    out: dict[str, str] = {}
    for value in values:
        for item in filter(None, (v.strip() for v in value.split(","))):
            suffix, _, kind = item.partition("=")
            kind = kind.strip() or "text"
            if kind not in kinds:
                raise click.BadParameter(f"{kind!r} is not a document kind; kinds: {', '.join(sorted(kinds))}.",
                                         param_hint="--ext")
            try:
                out[normalise_suffix(suffix)] = kind
            except ValueError as e:
                raise click.BadParameter(str(e), param_hint="--ext") from None
    return out


_HELP = """Index the documents under PATH... into the library (or bring it up to date).

    Without PATH, the folders the library already indexes are brought up to date (see
    'hefsearch status'). The first time, give the bundle with --bundle, or let the last
    bundle 'hefsearch index' was given be used (after make demo: the demo's).

    Unchanged files are skipped (size and mtime, then content hash), changed files are
    re-chunked and re-embedded, deleted files are removed. Supported: {suffixes},
    files without a file-type suffix whose content is text (NEWS, README.Debian),
    manual pages (ls.1, chsh.1.gz: roff rendered to text), the same compressed as
    .gz/.bz2/.xz, and suffixes added with --ext. Files that cannot be
    read are reported with the reason and skipped; what was indexed of them before is kept
    until the file is deleted. Symlinks leading outside the PATHs are not followed (see
    --follow-links); secret files (.env, keys, .netrc, .ssh/ ...) are ignored unless
    re-included with '!NAME' in a .hefsearchignore.

    \b
    Exit codes: 0 all indexed, 3 partial (some files failed, the rest is indexed),
                2 error (bad arguments, missing bundle or library, device failure),
                4 disk full (free space and run again), 130 interrupted (Ctrl+C),
                143 stopped by SIGTERM (129 by SIGHUP) during a --ray run.
    An interrupted run (Ctrl+C, kill, power cut, full disk) keeps every batch it
    committed; run it again to continue. Searching works while an index runs.
    """


def _index_help() -> str:
    """The help text, its list of formats from the table (hefsearch.index.formats)."""
    from hefsearch.index.formats import suffix_list

    return _HELP.format(suffixes=suffix_list())


def _as_sync_options(f):
    """Hands the verb the crawl options given on the command line (``given``: SyncOptions field
    -> value; an option left out is not there, so the library's remembered value applies), the
    other run options (``other``: batch size, --ext) and ``forget`` (--forget-options),
    instead of the flags click declares (--exclude ... --ext)."""
    import functools

    @functools.wraps(f)
    def verb(*args, excludes, include_hidden, follow_links, max_size_mb, overlap, batch_chunks, exts,
             forget_options, **kwargs):
        from click.core import ParameterSource

        ctx = click.get_current_context()
        values = {"excludes": ("excludes", tuple(excludes)), "include_hidden": ("include_hidden", include_hidden),
                  "follow_links": ("follow_links", follow_links),
                  "max_size_mb": ("max_bytes", int(max_size_mb * 1024 * 1024)), "overlap": ("overlap_tokens", overlap)}
        given = dict(v for name, v in values.items()
                     if ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None))
        other = {"batch_chunks": batch_chunks, "extra_suffixes": parse_ext(exts)}
        return f(*args, given=given, other=other, forget=forget_options, **kwargs)

    return verb


@click.command("index", help=_index_help())
@click.argument("paths", nargs=-1, required=False, type=click.Path(path_type=str))
@library_option()
@bundle_option("Model bundle folder. The library remembers it; a new library without one uses the last "
               "bundle 'hefsearch index' was given (make demo's, after it). Env: HEFSEARCH_BUNDLE.")
@backend_option("Encoder backend: auto, cpu, cpu-int8, hailo, npu-sim, ... auto keeps using the backend of "
                "the library's default space; on a new library it picks the NPU when one answers, "
                "else cpu. Env: HEFSEARCH_BACKEND.")
@device_option()
@click.option("--also-fp32", is_flag=True,
              help="Also embed into the CPU FP32 space (the reference for NPU-vs-FP32 comparisons "
                   "and the fallback when the NPU fails). Chunks indexed earlier are back-filled.")
@click.option("--exclude", "excludes", multiple=True, metavar="GLOB",
              help="Skip matching paths (gitignore syntax, relative to each PATH). Repeatable. "
                   "A .hefsearchignore file in any folder works the same way.")
@click.option("--include-hidden/--no-include-hidden", default=False,
              help="Also index hidden files and folders (names starting with '.').")
@click.option("--follow-links/--no-follow-links", default=False,
              help="Follow symlinks that lead outside the PATHs given (by default they are listed "
                   "with their target and skipped). /proc, /sys and /dev are never read.")
@click.option("--max-size", "max_size_mb", type=click.FloatRange(0.001, 10_000), default=20.0, show_default=True,
              help="Skip (and report) files larger than this many MiB (1 MiB = 1,048,576 bytes).")
@click.option("--overlap", "overlap", type=click.IntRange(0, 256), default=32, show_default=True,
              help="Tokens a chunk may repeat from the previous one.")
@click.option("--forget-options", is_flag=True,
              help="Start from the default crawl options instead of the ones the library remembers "
                   "(--exclude, --include-hidden, --follow-links, --max-size, --overlap: each run "
                   "keeps those not given from the run before, and 'watch' and the TUI use them).")
@click.option("--batch", "batch_chunks", type=click.IntRange(1, 100_000), default=256, show_default=True,
              help="Chunks embedded per commit.")
@click.option("--ray", "ray_address", metavar="ADDRESS",
              help="Embed on a Ray cluster: 'auto' (this node's cluster, or $RAY_ADDRESS), HOST:6379, "
                   "ray://HOST:10001, or 'local' (start a Ray of this run's own on this machine, "
                   "bound to 127.0.0.1, and stop it with all its processes at the end, also after "
                   "Ctrl+C or SIGTERM). Joining fails within seconds when nothing answers at the "
                   "address. This machine still crawls, chunks and commits; the bundle is shipped "
                   "to the nodes. Needs pip install 'hefsearch[ray]'.")
@click.option("--ray-actors", "ray_actors", type=click.IntRange(1, 10_000), metavar="N",
              help="With --ray and a CPU backend (cpu, cpu-int8, npu-sim): how many actors "
                   "[default: one per free CPU]. NPU backends get one actor per 'hailo' resource.")
@click.option("--language-neutral/--no-language-neutral", "language_neutral", default=None,
              help="Also keep a language-neutral copy of the FP32 space (<space>-neutral) and search it "
                   "by default: every vector is moved half-way off its language's average direction, so "
                   "a query finds documents in other languages as readily as in its own (measured with "
                   "multilingual-e5-small: cross-lingual top-1 0.71 -> 0.88 on the sample corpus, "
                   "same-language unchanged). Default: on for a multilingual model (a vocabulary of "
                   "100k+ tokens) indexed on the CPU in FP32 when the library holds 2+ languages; "
                   "--no-language-neutral drops it.")
@click.option("--ext", "exts", multiple=True, metavar="SUFFIX[=KIND]",
              help="Also index files ending in SUFFIX, as text (or KIND: markdown, html, ...), e.g. "
                   "--ext .log --ext conf,ini. Remembered by the library (hefsearch settings "
                   "extra_suffixes), so later runs keep them. Repeatable.")
@json_option("Print the summary as JSON on stdout.")
@_as_sync_options
def index_cmd(paths, library_path, bundle, backend, device, also_fp32, ray_address, ray_actors, language_neutral,
              given, other, forget, as_json):
    """The ``index`` verb (its help: :data:`_HELP`): checks, then :func:`_index_into`."""
    from hefsearch.index.library import Library, discard_new_library, library_exists, resolve_library_path

    from rich.console import Console

    if ray_actors and not ray_address:
        raise click.UsageError("--ray-actors needs --ray ADDRESS.")
    if device and ray_address:
        raise click.UsageError("--device picks a chip of this machine; with --ray each hailo actor takes "
                               "a chip of its own node.")
    err = Console(stderr=True)
    # Every check that needs no encoder comes first, and a library is created only once they
    # pass: a failed first run must not leave an empty library that looks like a real one.
    existed = library_exists(library_path)
    folder = resolve_library_path(library_path)
    folder_existed = folder.exists()
    _check_before_creating(paths, existed, folder, bundle)
    library = Library.open(library_path, create=True)
    try:
        library.require_writable()  # before loading encoders: a read-only library is refused at once
        paths = paths or _recorded_roots(library, err)
        options = _run_options(library, given, other, forget, err)
        remote = _start_ray(library, bundle, backend, ray_address, ray_actors, also_fp32) if ray_address else None
        choice = _open_encoders(library, bundle, backend, device, also_fp32, remote)
        report = _index_into(library, paths, choice, options, language_neutral, as_json, err)
        _print_report(err, library, report, choice, remote, as_json)
    except BaseException as e:
        if not existed and not library.document_count() and not library.space_names():
            library.close()
            discard_new_library(folder, folder_existed)
        if isinstance(e, KeyboardInterrupt):  # while Ray starts or stops (SIGTERM too: ray_session._Terminated)
            err.print("[yellow]Interrupted; nothing was lost.[/]")
            sys.exit(getattr(e, "exit_code", EXIT_INTERRUPTED))
        raise
    finally:
        library.close()
    sys.exit(EXIT_PARTIAL if report.partial else EXIT_OK)


def _check_before_creating(paths, existed: bool, folder, bundle) -> None:
    """What can be refused before a library exists: missing folders, no folders for a new
    library, no bundle anywhere."""
    from hefsearch.index.encoders import choose_bundle
    from hefsearch.index.sync import check_roots

    if paths:
        check_roots(paths)
    elif not existed:
        raise click.UsageError(f"No folders given, and there is no library at {folder} yet: name the "
                               "folders to index, e.g. hefsearch index ~/Documents")
    if not existed:
        choose_bundle(None, bundle)  # no bundle anywhere: say so before creating anything


def _run_options(library, given, other, forget, err):
    """The run's SyncOptions (app.reindex.crawl_options: the options given, the rest as the
    library remembers them), saying which remembered options apply and what the run changes."""
    from hefsearch.app.reindex import crawl_options, remembered_text

    kept = "" if forget else remembered_text(library, given)
    options, changes = crawl_options(library, given, forget=forget, **other)
    if kept:
        err.print(f"[dim]options remembered by the library: {shown(kept)} (--forget-options drops them; "
                  "the --ext suffixes: hefsearch settings extra_suffixes default)[/]", highlight=False)
    if changes and library.document_count():
        err.print("[yellow]crawl options changed (kept for later runs, 'watch' and the TUI's re-index): "
                  + shown("; ".join(changes)) + "[/]", highlight=False)
    return options


def _open_encoders(library, bundle, backend, device, also_fp32, remote):
    """The run's encoders (the Ray pool first when there is one, closed again if opening fails)."""
    from hefsearch.index.encoders import open_sync_encoders

    try:
        return open_sync_encoders(library, bundle=bundle, backend=backend, also_fp32=also_fp32, first=remote,
                                  **({"device_id": device} if device else {}))
    except BaseException:
        if remote is not None:
            remote.close()
        raise


def _index_into(library, paths, choice, options, language_neutral, as_json, err):
    """One sync run with the live progress bar; its report. Ctrl+C and a full disk end the
    process here with their exit codes (the report so far printed)."""
    from hefsearch.app.reindex import reindex
    from hefsearch.index.encoders import remember_default_bundle
    from hefsearch.index.sync import DiskFull, SyncReport

    from .main import report_error
    from .progress import SyncProgress
    from .render import print_interrupted

    try:
        _say_encoders(err, choice)
        try:
            with SyncProgress(err) as progress:
                run = reindex(library, paths, choice=choice, progress=progress.update,
                              language_neutral=language_neutral, options=options)
        except KeyboardInterrupt as e:
            done = getattr(e, "sync_report", None) or SyncReport()
            if as_json:
                echo_json(sync_summary_dict(done, library.path, choice.skipped_spaces, interrupted=True))
            print_interrupted(err, done)
            sys.exit(getattr(e, "exit_code", EXIT_INTERRUPTED))  # 143 for SIGTERM in a --ray run
        except DiskFull as e:
            report_error(e)
            sys.exit(EXIT_DISK_FULL)
        for line in run.notes:
            err.print(f"[dim]{line}[/]")
    finally:
        choice.close()
    if choice.bundle_source in ("given", "env"):
        remember_default_bundle(choice.bundle)  # the next new library needs no --bundle
    return run.report


def _say_encoders(err, choice) -> None:
    """Which bundle and encoders the run uses, and the spaces it leaves as they are."""
    if choice.bundle_source == "default":
        err.print(f"[dim]bundle: {shown(choice.bundle)} (the last bundle 'hefsearch index' was given; "
                  "--bundle picks another)[/]", highlight=False)
    for enc in choice.encoders:
        err.print(f"[dim]encoder: {enc.backend_reason} -> space {enc.space_name}[/]")
    for name, why in choice.skipped_spaces:
        err.print(f"[yellow]space {name} is not updated by this run: {why}[/]")


def _print_report(err, library, report, choice, remote, as_json) -> None:
    """The run's summary: JSON on stdout with --json, the table on stderr, the Ray actors."""
    from .render import print_sync_summary

    if as_json:
        summary = sync_summary_dict(report, library.path, choice.skipped_spaces)
        if remote is not None:
            summary["ray_actors"] = remote.summary()
        echo_json(summary)
    print_sync_summary(err, report, library.path)
    if remote is not None:
        _print_actors(err, remote.summary())


def _recorded_roots(library, err) -> list[str]:
    """The library's folders for a run without PATHS; a folder that is gone now (an unmounted
    disk) is left out with a warning, and what is indexed from it stays."""
    import os

    from hefsearch.base.terminal_text import for_terminal

    roots = library.recorded_roots()
    if not roots:
        raise click.UsageError(f"The library {for_terminal(library.path)} records no folders yet: name the "
                               "folders to index, e.g. hefsearch index ~/Documents")
    present = [r for r in roots if os.path.exists(r)]
    for r in roots:
        if r not in present:
            err.print(f"[yellow]{shown(r)} is not there now; what is indexed from it is kept.[/]", highlight=False)
    if not present:
        raise click.UsageError("None of the library's folders is there now: "
                               + ", ".join(for_terminal(r) for r in roots))
    err.print(f"[dim]folders: {', '.join(shown(r) for r in present)}[/]", highlight=False)
    return present


def shown(path) -> str:
    """A path inside a markup string: neither markup nor control characters."""
    from rich.markup import escape

    from hefsearch.base.terminal_text import for_terminal

    return escape(for_terminal(str(path)))


def _start_ray(library, bundle, backend, address, actors, also_fp32):
    """The Ray pool that embeds the first space, and the CPU FP32 one (hefsearch.index.ray_pool)."""
    from hefsearch.index.encoders import resolve_bundle
    from hefsearch.index.ray_pool import RayEncoder, RayPoolOptions

    return RayEncoder.start(library, resolve_bundle(library, bundle),
                            RayPoolOptions(address=address, backend=backend, actors=actors, also_fp32=also_fp32))


def _print_actors(console, actors: list[dict]) -> None:
    """One line per Ray actor: frames, frames/s, and what happened to it (the names and reasons
    come from the nodes: text, never markup)."""
    from rich.text import Text

    from hefsearch.base.terminal_text import for_terminal

    for a in actors:
        line = f"{a['actor']}: {a['frames']} frames in {a['batches']} batches, {a['frames_per_s']:.1f} frames/s"
        if a["status"] == "ok":
            console.print(Text(for_terminal(line), style="dim"))
        else:
            console.print(Text(for_terminal(f"{line}; {a['status']}: {a['reason']}"), style="yellow"))

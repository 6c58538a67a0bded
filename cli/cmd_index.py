"""``hefsearch index``: build or update a library from folders (incremental). The run is
:func:`hefsearch.app.indexing.run_index`; this module turns the flags into its request and
renders what it says and returns."""

from __future__ import annotations

import sys

import click

from .options import backend_option, bundle_option, device_option, echo_json, json_option, library_option

def parse_ext(values) -> dict[str, str]:
    """``--ext log --ext .xhtml=html --ext conf,ini`` -> {'.log': 'text', '.xhtml': 'html', ...}."""
    from hefsearch.index.crawl_options import CrawlOptions

    try:
        return CrawlOptions.parse_suffixes(values)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--ext") from None


#: each crawl option's flag: CrawlOptions field -> (click parameter, flag, its value from the flag's)
CRAWL_FLAGS = {"include_hidden": ("include_hidden", "--include-hidden", bool),
               "excludes": ("excludes", "--exclude", tuple),
               "max_bytes": ("max_size_mb", "--max-size", lambda mb: int(mb * 1024 * 1024)),
               "follow_links": ("follow_links", "--follow-links", bool),
               "overlap_tokens": ("overlap", "--overlap", int),
               "extra_suffixes": ("exts", "--ext", parse_ext)}


_HELP = """Index the documents under PATH... into the library (or bring it up to date).

    Without PATH, the folders the library already indexes are brought up to date (see
    'hefsearch status'). The first time, give the bundle with --bundle, or let the
    default bundle be used: the first one ever given (make demo's), later the one last
    given on the default library (a run with --library never changes it).

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
                143 stopped by SIGTERM (systemctl stop), 129 by SIGHUP.
    Ctrl+C, SIGTERM and SIGHUP stop a run within about a second: the batch being
    embedded is dropped, the summary printed. An interrupted run (also kill -9, a
    power cut, a full disk) keeps every batch it committed, and the folders it did
    not finish stay marked in 'hefsearch status' until a run completes them; run it
    again to continue (a mailbox goes on from its first message not indexed).
    Searching works while an index runs.
    """


def _index_help() -> str:
    """The help text, its list of formats from the formats table."""
    from hefsearch.app.indexing import supported_suffixes

    return _HELP.format(suffixes=supported_suffixes())


@click.command("index", help=_index_help())
@click.argument("paths", nargs=-1, required=False, type=click.Path(path_type=str))
@library_option()
@bundle_option("Model bundle folder. The library remembers it; a new library without one uses the "
               "default bundle (make demo's, after it). Env: HEFSEARCH_BUNDLE.")
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
@click.option("--passages/--no-passages", "passages", default=None,
              help="Cut documents into passages of 64 tokens, each scored with the passages around it "
                   "that fill the encoder's window (its section): a detail inside a long page is "
                   "found. Default: on for a new library whose window is 256+ tokens; a library keeps "
                   "what it was made with (older ones: chunks that fill the window). --no-passages on "
                   "a new library: chunks that fill the window (fewer vectors, less NPU time).")
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
def index_cmd(paths, library_path, bundle, backend, device, also_fp32, excludes, include_hidden, follow_links,
              max_size_mb, overlap, forget_options, passages, batch_chunks, ray_address, ray_actors, language_neutral,
              exts, as_json):
    """The ``index`` verb (its help: :data:`_HELP`): the request, the run, what it says."""
    from hefsearch.app.indexing import EXIT_INTERRUPTED, IndexRequestError, run_index
    from hefsearch.app.requests import IndexRequest

    from .progress import SyncProgress
    from .render import console
    from .stopping import exit_now, stop_signals_interrupt

    request = IndexRequest(paths=paths, library_path=library_path, bundle=bundle, backend=backend, device=device,
                           also_fp32=also_fp32, ray_address=ray_address, ray_actors=ray_actors,
                           language_neutral=language_neutral, crawl=_crawl_given(click.get_current_context()),
                           forget_options=forget_options, batch_chunks=batch_chunks, passages=passages)
    err = console(stderr=True)
    try:
        with stop_signals_interrupt():  # SIGTERM, SIGHUP: as Ctrl+C, exit 143, 129
            result = run_index(request, say=lambda notice: print_notice(err, notice), progress=SyncProgress(err))
    except IndexRequestError as e:
        raise click.UsageError(e.message) from None
    except KeyboardInterrupt as e:  # before the sync starts, or while Ray starts or stops
        err.print("[yellow]Interrupted; nothing was lost.[/]")
        exit_now(getattr(e, "exit_code", EXIT_INTERRUPTED))
    _print_result(err, result, as_json)
    exit_now(result.exit_code)


def _crawl_given(ctx: click.Context) -> dict:
    """The crawl options given on the command line (CrawlOptions field -> value); an option
    left out is not there, so the library's remembered value applies."""
    from click.core import ParameterSource

    return {key: convert(ctx.params[name]) for key, (name, _flag, convert) in CRAWL_FLAGS.items()
            if ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)}


def print_notice(err, notice) -> None:
    """One thing the run says, on stderr: yellow when it warns, else dim; its text (names and
    paths in it) is never read as markup and made safe for the terminal. The crawl options are
    said as the flags that give them."""
    from rich.text import Text

    from hefsearch.base.terminal_text import for_terminal

    text = notice.text
    if notice.kind == "remembered_options":
        text = ("options remembered by the library: " + " ".join(flag_text(k, v) for k, v in notice.values)
                + " (--forget-options drops them; the --ext suffixes: hefsearch settings extra_suffixes default)")
    elif notice.kind == "options_changed":
        text = ("crawl options changed (kept for later runs, 'watch' and the TUI's re-index): "
                + "; ".join(f"{CRAWL_FLAGS[k][1]}: {old} -> {new}" for k, old, new in notice.values))
    err.print(Text(for_terminal(text), style="yellow" if notice.warning else "dim"))


def flag_text(key: str, value) -> str:
    """One crawl option (its value as given: ``CrawlOptions.given_form``) as the flags that
    give it ("--exclude 'a' --exclude 'b'", "--max-size 0.03")."""
    flag = CRAWL_FLAGS[key][1]
    if key == "excludes":
        return " ".join(f"{flag} '{p}'" for p in value)
    if key == "extra_suffixes":
        return " ".join(f"{flag} {s}" for s in value)
    if isinstance(value, bool):
        return flag if value else f"--no-{flag[2:]}"
    return f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}"


def _print_result(err, result, as_json: bool) -> None:
    """The run's end: JSON on stdout with --json; on stderr what an interrupted run did, else
    the summary table and the Ray actors."""
    from .render import print_interrupted, print_sync_summary

    if as_json:
        echo_json(result.to_dict())
    if result.interrupted:
        print_interrupted(err, result.report)
        return
    print_sync_summary(err, result.report, result.library_path)
    if result.ray_actors is not None:
        _print_actors(err, result.ray_actors)


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

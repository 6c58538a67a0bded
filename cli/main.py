"""The ``hefsearch`` command. A thin adapter: every verb calls library functions.

Subcommands live in their own modules and are imported only when run, so ``hefsearch
--help`` is fast and ``hefsearch search`` never loads torch or textual.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys

import click

from hefsearch.base.errors import HefsearchError
from hefsearch.base.versions import hefsearch_version

#: verb -> "module:attribute" under hefsearch.cli
COMMANDS = {
    "backfill": "cmd_backfill:backfill_cmd",
    "bench": "cmd_bench:bench_group",
    "compile": "cmd_compile:compile_group",
    "doctor": "cmd_doctor:doctor_cmd",
    "embed": "cmd_embed:embed_cmd",
    "export": "cmd_archive:export_cmd",
    "import": "cmd_archive:import_cmd",
    "index": "cmd_index:index_cmd",
    "inspect": "cmd_inspect:inspect_cmd",
    "search": "cmd_search:search_cmd",
    "mcp": "cmd_serve:mcp_cmd",
    "serve": "cmd_serve:serve_cmd",
    "settings": "cmd_settings:settings_cmd",
    "similar": "cmd_similar:similar_cmd",
    "status": "cmd_status:status_cmd",
    "tui": "cmd_tui:tui_cmd",
    "watch": "cmd_watch:watch_cmd",
}


class LazyGroup(click.Group):
    def __init__(self, *args, lazy: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx, name):
        if name in self.lazy:
            module, attr = self.lazy[name].split(":")
            return getattr(importlib.import_module(f"hefsearch.cli.{module}"), attr)
        return super().get_command(ctx, name)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except HefsearchError as e:
            report_error(e)
            sys.exit(e.exit_code)


def report_error(e: HefsearchError) -> None:
    from hefsearch.base.terminal_text import for_terminal  # messages quote file names and documents

    click.secho(f"Error: {for_terminal(e.message, multiline=True)}", fg="red", err=True)
    if e.hint:
        click.echo(f"  hint: {for_terminal(e.hint, multiline=True)}", err=True)


class TerminalSafeFormatter(logging.Formatter):
    """Log lines as a terminal may show them: the file names and document text that warnings
    quote cannot drive it (:func:`~hefsearch.base.terminal_text.for_terminal`)."""

    def format(self, record: logging.LogRecord) -> str:
        from hefsearch.base.terminal_text import for_terminal

        return for_terminal(super().format(record), multiline=True)


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    """``--version``, the way click's version_option prints it; the version is read only when
    asked (importlib.metadata costs every other start a few tens of milliseconds)."""
    if value and not ctx.resilient_parsing:
        click.echo(f"hefsearch, version {hefsearch_version()}")
        ctx.exit()


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and exit.")
@click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug) on stderr.")
def main(verbose: int) -> None:
    """Multilingual semantic search over your own document folders.

    The sentence encoder runs on a Hailo NPU (Raspberry Pi 5 + Hailo-10H, Hailo-8/8L) or on
    the CPU in FP32, and hefsearch tells you, with numbers, what the 8-bit NPU costs.

    \b
    Typical use:
      hefsearch compile export MODEL --out BUNDLE   # on any machine with the compile extra
      hefsearch index ~/Documents --bundle BUNDLE   # build your library (after 'make demo':
                                                    # no --bundle, the demo's is remembered)
      hefsearch index                               # later: bring its folders up to date
      hefsearch search "wo ist die rechnung?"       # or: hefsearch tui
      hefsearch watch                               # keep it current as files change
      hefsearch serve                               # HTTP + MCP, one warm process
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TerminalSafeFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


#: set by a one-shot command once it has closed everything it opened (see :func:`run`)
_quick_exit = False
#: what a one-shot command left to the process's end (a list only while :func:`run` runs)
_left_to_exit: list | None = None


def may_exit_quickly(*leave) -> None:
    """Called by a one-shot command (``search``) when it has closed the library and its
    encoders and printed everything: :func:`run` may then end the process without Python's
    teardown. Unloading numpy, ONNX Runtime and FAISS takes ~50 ms, a sixth of
    a cold search, and frees nothing the operating system does not free anyway. ``leave``:
    closed objects not to free before that exit (a closed session: freeing its encoder's
    250k-piece tokenizer takes ~0.25 s); let go at once when ``main`` runs in-process."""
    global _quick_exit
    _quick_exit = True
    if _left_to_exit is not None:
        _left_to_exit.extend(leave)


def in_executable() -> bool:
    """True while :func:`run` runs (the ``hefsearch`` executable), False when ``main`` is
    invoked in-process (tests, an embedding program), whose process must not end under it."""
    return _left_to_exit is not None


def run(prog_name: str = "hefsearch") -> None:
    """The ``hefsearch`` executable (console script and ``python -m hefsearch``): :data:`main`,
    then, after a command that called :func:`may_exit_quickly` succeeded, ``os._exit(0)`` once
    stdout, stderr and logging are flushed. A flush that fails (a closed pipe) takes the normal
    way out. ``main`` itself, which tests invoke in-process, never exits this way."""
    global _left_to_exit
    _left_to_exit = []
    try:
        main(prog_name=prog_name)
    except SystemExit as e:
        if _quick_exit and e.code in (0, None):
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except (OSError, ValueError):
                raise e from None
            logging.shutdown()
            os._exit(0)
        raise


if __name__ == "__main__":  # pragma: no cover
    run()

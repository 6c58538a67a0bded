"""Options shared by several verbs, each declared once: its name, destination, environment
variable and type live here. A verb may pass its own ``help`` where the option means something
more specific there (``index`` remembers the bundle, ``doctor`` checks it), so ``--help`` reads
naturally per verb while the option behaves the same everywhere."""

from __future__ import annotations

import json

import click

from hefsearch.base import settings

LIBRARY_HELP = ("Library: a name (a folder in hefsearch's data dir) or a path. Default: the data dir's "
                "'library' ($HEFSEARCH_HOME overrides the data dir). Env: HEFSEARCH_LIBRARY.")
#: the bundle a verb falls back on when none is given
LIBRARY_BUNDLE_HELP = "Model bundle (default: the one the library was built with)."
REQUIRED_BUNDLE_HELP = "Model bundle folder (from 'hefsearch compile export'). Env: HEFSEARCH_BUNDLE."
BACKEND_HELP = ("Encoder backend: auto, cpu, cpu-int8, hailo, npu-sim. auto picks the NPU when one answers and "
                "the bundle has a HEF for it, else cpu. Env: HEFSEARCH_BACKEND.")
JSON_HELP = "Machine-readable output on stdout."


def library_option(help: str = LIBRARY_HELP, *, dest: str = "library_path", metavar: str | None = "NAME_OR_PATH"):
    """``--library NAME_OR_PATH`` (env HEFSEARCH_LIBRARY); None means the data dir's library."""
    return click.option("--library", dest, envvar=settings.LIBRARY.name, default=None, metavar=metavar, help=help)


def bundle_option(help: str = LIBRARY_BUNDLE_HELP, *, required: bool = False):
    """``--bundle DIR`` (env HEFSEARCH_BUNDLE); optional unless the verb has no library to ask."""
    return click.option("--bundle", "bundle", envvar=settings.BUNDLE.name, required=required, default=None,
                        type=click.Path(file_okay=False), help=help)


def backend_option(help: str = BACKEND_HELP):
    """``--backend NAME`` (env HEFSEARCH_BACKEND), default auto. ``doctor --backend`` is a different
    option (what --verify compares, no env) and is declared there."""
    return click.option("--backend", "backend", envvar=settings.BACKEND.name, default="auto", show_default=True,
                        help=help)


def device_option():
    """``--device ID``: the Hailo chip to use on a machine with several (the hailo backend also
    reads HEFSEARCH_HAILO_DEVICE itself, so search and the TUI follow the same setting)."""
    return click.option("--device", "device", default=None, metavar="ID",
                        help="Hailo device to use when this machine has several: its PCIe address as "
                             "'hailortcli scan' lists it, e.g. 0000:01:00.0 [default: HailoRT's first free "
                             "one]. Env: HEFSEARCH_HAILO_DEVICE.")


def json_option(help: str = JSON_HELP):
    """``--json``: the verb's report as JSON on stdout instead of text (see ``echo_json``)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def echo_json(data) -> None:
    """What ``--json`` prints: indented, non-ASCII kept as is (file names, snippets), but no
    control or bidi character raw (JSON escapes, which read back as the same text)."""
    from hefsearch.base.terminal_text import json_for_terminal

    click.echo(json_for_terminal(json.dumps(data, ensure_ascii=False, indent=2)))


def filter_options(f):
    """``--path --type --lang --since --until`` (and ``--kind``): what a search or a "similar"
    may return (:mod:`hefsearch.search.filters`); the verb gets them as one ``filters`` value."""
    import functools

    from hefsearch.app.searching import KINDS, type_names

    kinds = KINDS
    types = ", ".join(type_names())
    options = [
        click.option("--path", "path_glob", default=None, metavar="GLOB",
                     help="Only files whose path matches (e.g. '*.pdf', '*/invoices/*'); a pattern without "
                          "'/' is also matched against the file name."),
        click.option("--type", "types", multiple=True, metavar="TYPE",
                     help=f"Only files of this type: {types}, or a kind ({', '.join(kinds)}). "
                          "Repeatable, or comma-separated."),
        click.option("--kind", "kinds", multiple=True, type=click.Choice(kinds),
                     help="Only documents of this kind. Repeatable."),
        click.option("--lang", "langs", multiple=True, metavar="CODE",
                     help="Only chunks in this language (ISO 639-1: de, en, ja, ...), as detected when "
                          "they were indexed. Repeatable, or comma-separated."),
        click.option("--since", default=None, metavar="WHEN",
                     help="Only files modified at or after WHEN (a mail message: sent at or after): a "
                          "date (2024-03-01), a date and time (2024-03-01T14:00, local time) or an age "
                          "(12h, 7d, 2w, 3m, 1y)."),
        click.option("--until", default=None, metavar="WHEN", help="Only files modified before WHEN (as --since)."),
    ]

    @functools.wraps(f)
    def wrapper(*args, path_glob, types, kinds, langs, since, until, **kwargs):
        from hefsearch.app.searching import make_filters

        kwargs["filters"] = make_filters(path_glob=path_glob, kinds=kinds, types=types, langs=langs,
                                         since=since, until=until)
        return f(*args, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


class RerankDepth(click.ParamType):
    """``--rerank N|off``: a depth (0 = off) or ``off``; None when not given (the default)."""

    name = "N|off"

    def convert(self, value, param, ctx):
        from hefsearch.app.searching import parse_depth
        from hefsearch.search.rerank import RerankError

        try:
            return parse_depth(value)
        except RerankError as e:
            self.fail(e.message + " " + (e.hint or ""), param, ctx)


RERANK_HELP = ("Re-rank the top N vector candidates of an 8-bit space by FP32 cosine (in the "
               "language-neutral FP32 space when the library has one), or 'off'. Default: 30 where "
               "FP32 vectors can re-score the space searched, else off. FP32 vectors missing from "
               "the library are computed within a 250 ms budget; the rest keep their 8-bit place "
               "('hefsearch backfill' computes them). The answer says what was done.")


def rerank_option(help: str = RERANK_HELP):
    return click.option("--rerank", "rerank", type=RerankDepth(), default=None, help=help)

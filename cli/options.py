"""Options shared by several verbs, each declared once: its name, destination, environment
variable and type live here. A verb may pass its own ``help`` where the option means something
more specific there (``index`` remembers the bundle, ``doctor`` checks it), so ``--help`` reads
naturally per verb while the option behaves the same everywhere."""

from __future__ import annotations

import json

import click

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
    return click.option("--library", dest, envvar="HEFSEARCH_LIBRARY", default=None, metavar=metavar, help=help)


def bundle_option(help: str = LIBRARY_BUNDLE_HELP, *, required: bool = False):
    """``--bundle DIR`` (env HEFSEARCH_BUNDLE); optional unless the verb has no library to ask."""
    return click.option("--bundle", "bundle", envvar="HEFSEARCH_BUNDLE", required=required, default=None,
                        type=click.Path(file_okay=False), help=help)


def backend_option(help: str = BACKEND_HELP):
    """``--backend NAME`` (env HEFSEARCH_BACKEND), default auto. ``doctor --backend`` is a different
    option (what --verify compares, no env) and is declared there."""
    return click.option("--backend", "backend", envvar="HEFSEARCH_BACKEND", default="auto", show_default=True,
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
    """What ``--json`` prints: indented, non-ASCII kept as is (file names, snippets)."""
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))

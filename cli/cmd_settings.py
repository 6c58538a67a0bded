"""``hefsearch settings``: show and change the library settings that decide how each vector
space's FAISS index is built (flat, HNSW, compressed IVF, or a forced factory string).

They are stored in the library (SQLite ``settings``) and applied by the next ``hefsearch
index`` run: at its end every space it updates is re-planned (``Space.maintain``), also when
no file changed, so running it again on the same folders applies a change without
re-embedding anything.
"""

from __future__ import annotations

import textwrap

import click

from .options import echo_json, json_option, library_option


def _help() -> str:
    from hefsearch.app.index_settings import known_settings, max_threshold

    keys = "\n".join(f"  {s.key} (default {s.default_text}):\n" + textwrap.fill(
        s.meaning[0].upper() + s.meaning[1:] + ".", 74, initial_indent="    ", subsequent_indent="    ")
        for s in known_settings().values())
    return (
        "Show or change the library's index settings: how each vector space's FAISS index is built.\n\n"
        "\b\n"
        "  hefsearch settings                  list them\n"
        "  hefsearch settings KEY VALUE        set one\n"
        "  hefsearch settings KEY default      back to the default (same as --unset KEY)\n\n"
        f"\b\n{keys}\n\n"
        f"Thresholds are whole numbers of chunks up to {max_threshold():,}; 500k, 1M, 1.5M and 1_000_000 "
        "are understood. An index_factory is first tried in a separate process (build, train, add, "
        "search and save a few vectors of the library's dimension) and refused, with FAISS's "
        "reason, unless that works: some strings FAISS accepts crash it later (HNSW0, HNSW1, ...).\n\n"
        "A change takes effect at the next 'hefsearch index' run: at its end every space it "
        "updates gets the index the settings call for, also when no file changed (nothing is "
        "re-embedded; the index is rebuilt from the stored vectors)."
    )


def _ensure_known(key: str):
    from hefsearch.app.index_settings import known_settings

    known = known_settings()
    if key not in known:
        raise click.UsageError(f"Unknown setting {key!r}. The index settings are: {', '.join(known)}.")
    return known[key]


def value_text(value) -> str:
    """A stored value as typed: {'.log': 'text', '.xhtml': 'html'} -> '.log, .xhtml=html'."""
    if isinstance(value, dict):
        return ", ".join(k if v == "text" else f"{k}={v}" for k, v in value.items())
    return str(value)


class _SettingsCommand(click.Command):
    """Its --help is written when shown: the defaults come from index/spaces.py, whose numpy
    import would slow every 'hefsearch --help' if it ran when this module loads."""

    def format_help_text(self, ctx, formatter):
        self.help = _help()
        super().format_help_text(ctx, formatter)


# ignore_unknown_options: "-5" reaches VALUE and is refused as a number, not as an option
@click.command("settings", cls=_SettingsCommand, context_settings={"ignore_unknown_options": True},
               short_help="Show or change the library's index settings.")
@click.argument("key", required=False)
@click.argument("value", required=False)
@click.option("--unset", "unset_key", metavar="KEY", help="Remove a setting: back to its default.")
@library_option()
@json_option()
def settings_cmd(key, value, unset_key, library_path, as_json):
    if unset_key and (key or value):
        raise click.UsageError("Give either --unset KEY or KEY VALUE, not both.")
    if unset_key:
        key, value = unset_key, "default"
    setting = _ensure_known(key) if key else None
    if value is None:
        _show(setting, library_path, as_json)
    else:
        _change(setting, value, library_path, as_json)


def _show(setting, library_path, as_json: bool) -> None:
    """Every index setting, or the one asked for (opened read-only: nothing is written)."""
    from hefsearch.app.index_settings import read_settings

    view = read_settings(library_path, setting.key if setting is not None else None)
    if as_json:
        echo_json(view.to_dict())
    else:
        _print_table(view.library, view.rows)


def _change(setting, value: str, library_path, as_json: bool) -> None:
    """Validate ``value`` (every check before anything is written), store it, say when it applies."""
    from hefsearch.app.index_settings import BadValue, change_setting

    try:
        done = change_setting(library_path, setting.key, value)
    except BadValue as e:
        raise click.BadParameter(e.message, param_hint=e.param) from None
    _report_change(setting, done.previous, done.new, done.library, done.apply_now, as_json)
    if done.train_min and not as_json:
        click.echo(f"Spaces with fewer than {done.train_min:,} chunks stay flat (exact): {done.new} needs that "
                   "many vectors to train.", err=True)


def _report_change(setting, previous, new, path: str, how_to: str, as_json: bool) -> None:
    when = ("at the next 'hefsearch index' run, which re-plans the index of every space it updates "
            "at its end, also when no file changed (nothing is re-embedded)")
    if as_json:
        echo_json({"library": path, "key": setting.key, "value": new, "previous": previous,
                   "default": setting.default, "takes_effect": when, "apply_now": how_to})
        return
    def shown(value) -> str:
        return ("the default" if value is None else repr(value) if isinstance(value, str)
                else value_text(value) if isinstance(value, dict) else f"{value:,}")

    click.echo(f"{setting.key} = {shown(new)} (was {shown(previous)}) in the library {path}.")
    click.echo(f"It takes effect {when}. To apply it now: {how_to}")


def _print_table(path: str, rows: list[dict]) -> None:
    from rich.markup import escape
    from rich.table import Table

    from hefsearch.app.index_settings import known_settings

    known = known_settings()

    t = Table(title=f"Index settings of {escape(path)}", title_justify="left")
    for col in ("setting", "value", "default", "meaning"):
        t.add_column(col, overflow="fold")
    for r in rows:
        value = "default" if r["value"] is None else (f"{r['value']:,}" if isinstance(r["value"], int)
                                                       else escape(value_text(r["value"])))
        default = known[r["key"]].default_text
        t.add_row(r["key"], value, default, escape(r["meaning"]))
    from .render import console

    console().print(t)

"""``hefsearch settings``: show and change the library settings that decide how each vector
space's FAISS index is built (flat, HNSW, compressed IVF, or a forced factory string).

They are stored in the library (SQLite ``settings``) and applied by the next ``hefsearch
index`` run: at its end every space it updates is re-planned (``Space.maintain``), also when
no file changed, so running it again on the same folders applies a change without
re-embedding anything.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import click

from .options import echo_json, json_option, library_option

#: the value that removes a setting (back to its default), like --unset
DEFAULT_WORD = "default"
#: the library setting of extra file suffixes (suffix -> kind), read by every sync
SUFFIXES_KEY = "extra_suffixes"
#: dimension a factory is checked with when the library has no space yet (MiniLM, e5-small)
FALLBACK_DIM = 384
_COUNT_RE = re.compile(r"^(\d[\d_,]*)(\.\d+)?([km])?$", re.IGNORECASE)
_SUFFIX = {"": 1, "k": 1_000, "m": 1_000_000}


@dataclass(frozen=True)
class IndexSetting:
    key: str
    default: int | None  # None: no default value (the size rules decide)
    default_text: str
    meaning: str


def _known() -> dict[str, IndexSetting]:
    from hefsearch.index.faiss_index import DEFAULT_SQ8_THRESHOLD
    from hefsearch.index.spaces import (DEFAULT_COMPRESS_THRESHOLD, DEFAULT_HNSW_FACTORY,
                                        DEFAULT_HNSW_THRESHOLD, MIN_COMPRESSED)

    rows = [
        IndexSetting("hnsw_threshold", DEFAULT_HNSW_THRESHOLD, f"{DEFAULT_HNSW_THRESHOLD:,}",
                     f"chunks from which a space is searched through an {DEFAULT_HNSW_FACTORY} graph "
                     "(approximate, fast) instead of scanning every vector (exact under "
                     f"{DEFAULT_SQ8_THRESHOLD:,} chunks, from there 8-bit codes whose best candidates "
                     "are re-scored exactly)"),
        IndexSetting("compress_threshold", DEFAULT_COMPRESS_THRESHOLD, f"{DEFAULT_COMPRESS_THRESHOLD:,}",
                     "chunks from which a space's index is compressed (IVF of 4-bit codes, candidates "
                     "re-scored from the raw vectors; wins over hnsw_threshold; spaces under "
                     f"{MIN_COMPRESSED:,} chunks stay exact)"),
        IndexSetting("index_factory", None, "by size",
                     "a FAISS index_factory string used for every space instead of the two thresholds, "
                     "e.g. HNSW32 or IVF1024,SQ8"),
        IndexSetting(SUFFIXES_KEY, None, "none",
                     "file suffixes indexed besides the built-in ones, as text or as KIND, e.g. .log,.conf "
                     "or .xhtml=html ('hefsearch index --ext' adds to it)"),
    ]
    return {s.key: s for s in rows}


def _help() -> str:
    from hefsearch.index.spaces import MAX_THRESHOLD

    keys = "\n".join(f"  {s.key} (default {s.default_text}):\n" + textwrap.fill(
        s.meaning[0].upper() + s.meaning[1:] + ".", 74, initial_indent="    ", subsequent_indent="    ")
        for s in _known().values())
    return (
        "Show or change the library's index settings: how each vector space's FAISS index is built.\n\n"
        "\b\n"
        "  hefsearch settings                  list them\n"
        "  hefsearch settings KEY VALUE        set one\n"
        "  hefsearch settings KEY default      back to the default (same as --unset KEY)\n\n"
        f"\b\n{keys}\n\n"
        f"Thresholds are whole numbers of chunks up to {MAX_THRESHOLD:,}; 500k, 1M, 1.5M and 1_000_000 "
        "are understood. An index_factory is first tried in a separate process (build, train, add, "
        "search and save a few vectors of the library's dimension) and refused, with FAISS's "
        "reason, unless that works: some strings FAISS accepts crash it later (HNSW0, HNSW1, ...).\n\n"
        "A change takes effect at the next 'hefsearch index' run: at its end every space it "
        "updates gets the index the settings call for, also when no file changed (nothing is "
        "re-embedded; the index is rebuilt from the stored vectors)."
    )


def _ensure_known(key: str) -> IndexSetting:
    known = _known()
    if key not in known:
        raise click.UsageError(f"Unknown setting {key!r}. The index settings are: {', '.join(known)}.")
    return known[key]


def parse_count(text: str) -> int:
    """'500k' -> 500000, '1.5M' -> 1500000, '1_000_000' -> 1000000; a positive whole number."""
    m = _COUNT_RE.match(text.strip())
    value = None
    if m:
        try:
            value = Decimal(m.group(1).replace("_", "").replace(",", "") + (m.group(2) or ""))
            value *= _SUFFIX[(m.group(3) or "").lower()]
        except InvalidOperation:
            value = None
    if value is None or value != value.to_integral_value() or value < 1:
        raise click.BadParameter(f"{text!r} is not a positive whole number of chunks "
                                 "(e.g. 200000, 500k, 1M).", param_hint="VALUE")
    from hefsearch.index.spaces import MAX_THRESHOLD

    if value > MAX_THRESHOLD:
        raise click.BadParameter(f"{text!r} is more chunks than any library holds: at most {MAX_THRESHOLD:,} "
                                 "(which already means 'never').", param_hint="VALUE")
    return int(value)


def check_factory(factory: str, dims: list[int]) -> int:
    """Run ``factory`` for every dimension the library holds, in a child process: build, train,
    add, search, save (:mod:`hefsearch.index.factory_check`; some strings FAISS accepts abort
    or segfault it later, which would stop every index run). A factory FAISS cannot run is
    refused now, with FAISS's reason. Returns the vectors it needs to train (0: none)."""
    from hefsearch.base.errors import HefsearchError
    from hefsearch.index.factory_check import check_factory as run_check

    if not factory.strip():
        raise click.BadParameter("an empty index_factory; use 'default' to remove it.", param_hint="VALUE")
    train_min = 0
    for dim in dims:
        check = run_check(factory, dim)
        if not check.ok:
            idmap = (" hefsearch maps chunk ids itself: leave out IDMap."
                     if factory.upper().startswith("IDMAP") else "")
            raise HefsearchError(
                f"FAISS cannot serve vectors of dimension {dim} with the index factory {factory!r}: "
                f"{check.reason}{idmap} Nothing was changed.",
                "Use a faiss.index_factory string such as Flat, HNSW32, IVF1024,SQ8 or IVF1024,PQ16 "
                "(PQ<M> needs M to divide the dimension), or 'default' for the size rules.")
        train_min = max(train_min, check.train_min)
    return train_min


def _factory_dims(library) -> list[int]:
    """The vector dimensions of the library's spaces, the default space's first."""
    infos = library.spaces()
    default = library.settings().get("default_space")
    dims = [i.dim for i in infos if i.name == default] + [i.dim for i in infos]
    return list(dict.fromkeys(dims)) or [FALLBACK_DIM]


def apply_command(library, library_option_value: str | None) -> str:
    """The 'hefsearch index ...' that applies a change now: the folders of the last run."""
    roots = (library.settings().get("last_sync") or {}).get("roots") or []
    cmd = "hefsearch index " + (shlex.join(roots) if roots else "FOLDER...")
    return cmd + (f" --library {shlex.quote(library_option_value)}" if library_option_value else "")


def value_text(value) -> str:
    """A stored value as typed: {'.log': 'text', '.xhtml': 'html'} -> '.log, .xhtml=html'."""
    if isinstance(value, dict):
        return ", ".join(k if v == "text" else f"{k}={v}" for k, v in value.items())
    return str(value)


def _rows(stored: dict) -> list[dict]:
    return [{"key": s.key, "value": stored.get(s.key), "default": s.default, "meaning": s.meaning}
            for s in _known().values()]


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
        key, value = unset_key, DEFAULT_WORD
    setting = _ensure_known(key) if key else None
    if value is None:
        _show(setting, library_path, as_json)
    else:
        _change(setting, value, library_path, as_json)


def _show(setting: IndexSetting | None, library_path, as_json: bool) -> None:
    """Every index setting, or the one asked for (opened read-only: nothing is written)."""
    from hefsearch.index.library import Library

    with Library.open(library_path, create=False, read_only=True) as library:
        rows, path = _rows(library.settings()), str(library.path)
    rows = [r for r in rows if setting is None or r["key"] == setting.key]
    if as_json:
        echo_json({"library": path, "settings": rows})
    else:
        _print_table(path, rows)


def _change(setting: IndexSetting, value: str, library_path, as_json: bool) -> None:
    """Validate ``value`` (every check before anything is written), store it, say when it applies."""
    from hefsearch.index.library import Library

    new = None if value.strip().lower() == DEFAULT_WORD else value
    if new is not None and setting.default is not None:
        new = parse_count(new)
    if new is not None and setting.key == SUFFIXES_KEY:
        from .cmd_index import parse_ext

        new = parse_ext([new])
    train_min = 0
    with Library.open(library_path, create=False) as library:
        library.require_writable()
        if new is not None and setting.key == "index_factory":
            new = new.strip()
            train_min = check_factory(new, _factory_dims(library))
        previous = library.settings().get(setting.key)
        # None means "not set" to every reader (Library.hnsw_threshold, compress_threshold,
        # sync's factory override), and the Library API has no delete
        library.set_settings(**{setting.key: new})
        how_to, path = apply_command(library, library_path), str(library.path)
    _report_change(setting, previous, new, path, how_to, as_json)
    if train_min and not as_json:
        click.echo(f"Spaces with fewer than {train_min:,} chunks stay flat (exact): {new} needs that "
                   "many vectors to train.", err=True)


def _report_change(setting: IndexSetting, previous, new, path: str, how_to: str, as_json: bool) -> None:
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
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"Index settings of {escape(path)}", title_justify="left")
    for col in ("setting", "value", "default", "meaning"):
        t.add_column(col, overflow="fold")
    for r in rows:
        value = "default" if r["value"] is None else (f"{r['value']:,}" if isinstance(r["value"], int)
                                                       else escape(value_text(r["value"])))
        default = _known()[r["key"]].default_text
        t.add_row(r["key"], value, default, escape(r["meaning"]))
    Console().print(t)

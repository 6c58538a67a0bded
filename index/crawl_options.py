"""The crawl options: what an index run reads under its folders and how it cuts it, as one
value (:class:`CrawlOptions`) that every front end hands whole to the run, the sync, the
crawler and the watcher.

The library remembers the options of its last full run (:meth:`CrawlOptions.remembered`,
:meth:`CrawlOptions.settings`: the settings ``crawl_options`` and ``extra_suffixes``), so a
run that names none (the watcher, the TUI's re-index, ``index`` without flags) reads and
skips exactly what that run did. Each option has a name for a person (:data:`OPTION_NAMES`);
a front end maps it onto its own spelling (``index``'s flags).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
#: the settings that remember them: the options, and the suffixes added (``settings extra_suffixes``)
OPTIONS_SETTING, SUFFIXES_SETTING = "crawl_options", "extra_suffixes"

#: the options a run given them adds to the remembered ones (the rest it replaces)
ADDED_UP = ("extra_suffixes",)
#: each option for a person (messages of the core; the CLI says its flags instead)
OPTION_NAMES = {"include_hidden": "hidden files", "excludes": "excluded paths", "max_bytes": "largest file",
                "follow_links": "links leading out of the folders", "overlap_tokens": "chunk overlap",
                "extra_suffixes": "added suffixes"}


@dataclass(frozen=True)
class CrawlOptions:
    """Every choice about which files an index run reads and how it cuts them."""

    include_hidden: bool = False
    #: gitignore patterns, relative to each root
    excludes: tuple[str, ...] = ()
    #: files larger than this are skipped and reported
    max_bytes: int = DEFAULT_MAX_BYTES
    follow_links: bool = False
    #: tokens a chunk may repeat from the previous one (not the crawler's: remembered with it,
    #: so a later run cuts what it finds the same way)
    overlap_tokens: int = 32
    #: suffix -> kind, read besides the formats table; once added, kept by later runs (a run
    #: without one would remove its files)
    extra_suffixes: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "excludes", tuple(self.excludes))
        object.__setattr__(self, "extra_suffixes", dict(self.extra_suffixes or {}))
        if self.max_bytes is None:  # no limit given: the default one
            object.__setattr__(self, "max_bytes", DEFAULT_MAX_BYTES)

    @classmethod
    def remembered(cls, settings: Mapping) -> "CrawlOptions":
        """The options the library remembers, from its ``settings`` (defaults where none)."""
        stored = settings.get(OPTIONS_SETTING) or {}
        known = {k: v for k, v in stored.items() if k in _REMEMBERED}
        return cls(**known, extra_suffixes=settings.get(SUFFIXES_SETTING) or {})

    def settings(self) -> dict:
        """These options as the library's settings (what :meth:`remembered` reads back)."""
        return {OPTIONS_SETTING: {k: _plain(getattr(self, k)) for k in _REMEMBERED},
                SUFFIXES_SETTING: dict(self.extra_suffixes)}

    def given(self, changes: Mapping) -> "CrawlOptions":
        """These options with ``changes`` (field -> value) applied; ``extra_suffixes`` given
        are added to those already here."""
        unknown = set(changes) - set(OPTION_NAMES)
        if unknown:
            raise ValueError(f"not a crawl option: {', '.join(sorted(unknown))}")
        added = {k: {**getattr(self, k), **(changes.get(k) or {})} for k in ADDED_UP}
        return dataclasses.replace(self, **{**changes, **added})

    def differences(self, other: "CrawlOptions", leave_out: Iterable[str] = ()) -> list[str]:
        """The options (field names) whose value differs from ``other``'s, in table order."""
        return [k for k in OPTION_NAMES if k not in leave_out and _plain(getattr(self, k)) != _plain(getattr(other, k))]

    def value_text(self, key: str) -> str:
        """One option's value for a person: patterns quoted, sizes in MiB, flags on/off."""
        value = getattr(self, key)
        if key == "excludes":
            return " ".join(f"'{p}'" for p in value) or "none"
        if key == "max_bytes":
            return f"{mib(value):g} MiB"
        if key == "extra_suffixes":
            return " ".join(suffix_text(s, kind) for s, kind in sorted(value.items())) or "none"
        if isinstance(value, bool):
            return "on" if value else "off"
        return str(value)

    def given_form(self, key: str):
        """One option as a person gives it: a size in MiB, suffixes as ``.log``/``.xhtml=html``."""
        value = getattr(self, key)
        if key == "max_bytes":
            return mib(value)
        if key == "extra_suffixes":
            return tuple(suffix_text(s, kind) for s, kind in sorted(value.items()))
        return value

    @staticmethod
    def parse_suffixes(values: Iterable[str]) -> dict[str, str]:
        """``log``, ``.xhtml=html``, ``conf,ini`` -> {'.log': 'text', '.xhtml': 'html', ...}: the
        one reading of added suffixes (``index --ext``, ``settings extra_suffixes``).

        :raises ValueError: what is wrong (not a suffix, not a document kind).
        """
        from hefsearch.readers.filetypes import normalise_suffix
        from hefsearch.readers.formats import KINDS

        kinds = set(KINDS)
        out: dict[str, str] = {}
        for value in values:
            for item in filter(None, (v.strip() for v in value.split(","))):
                suffix, _, kind = item.partition("=")
                kind = kind.strip() or "text"
                if kind not in kinds:
                    raise ValueError(f"{kind!r} is not a document kind; kinds: {', '.join(sorted(kinds))}.")
                out[normalise_suffix(suffix)] = kind
        return out


def mib(size: int) -> float:
    """A size in MiB, as an option reads (4 decimals)."""
    return round(size / (1024 * 1024), 4)


def suffix_text(suffix: str, kind: str) -> str:
    """``.log`` (read as text), ``.xhtml=html``: one added suffix as it is given."""
    return suffix if kind == "text" else f"{suffix}={kind}"


#: the options kept in the ``crawl_options`` setting (the added-up suffixes have their own)
_REMEMBERED = tuple(k for k in OPTION_NAMES if k not in ADDED_UP)


def _plain(value):
    return list(value) if isinstance(value, (tuple, list)) else value

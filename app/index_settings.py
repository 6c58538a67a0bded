"""The library settings that decide how each vector space's FAISS index is built (and the extra
file suffixes every sync reads): what they are, their defaults, how a value is checked, and
reading and changing them (``hefsearch settings``). A change applies at the next index run.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from hefsearch.base.errors import HefsearchError
from hefsearch.index.crawl_options import SUFFIXES_SETTING

#: the value that removes a setting (back to its default), like --unset
DEFAULT_WORD = "default"
#: dimension a factory is checked with when the library has no space yet (MiniLM, e5-small)
FALLBACK_DIM = 384
_COUNT_RE = re.compile(r"^(\d[\d_,]*)(\.\d+)?([km])?$", re.IGNORECASE)
_SUFFIX = {"": 1, "k": 1_000, "m": 1_000_000}


class BadValue(HefsearchError):
    """A value a setting cannot take; ``param`` names what was given (a command line's VALUE)."""

    title = "bad value"

    def __init__(self, message: str, param: str = "VALUE"):
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class IndexSetting:
    key: str
    default: int | None  # None: no default value (the size rules decide)
    default_text: str
    meaning: str


def known_settings() -> dict[str, IndexSetting]:
    """Every index setting by key, with its default and meaning (the defaults of index/spaces.py)."""
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
        IndexSetting(SUFFIXES_SETTING, None, "none",
                     "file suffixes indexed besides the built-in ones, as text or as KIND, e.g. .log,.conf "
                     "or .xhtml=html ('hefsearch index --ext' adds to it)"),
    ]
    return {s.key: s for s in rows}


def max_threshold() -> int:
    """The largest threshold a setting takes (more chunks than any library holds)."""
    from hefsearch.index.spaces import MAX_THRESHOLD

    return MAX_THRESHOLD


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
        raise BadValue(f"{text!r} is not a positive whole number of chunks (e.g. 200000, 500k, 1M).")
    if value > max_threshold():
        raise BadValue(f"{text!r} is more chunks than any library holds: at most {max_threshold():,} "
                       "(which already means 'never').")
    return int(value)


def check_factory(factory: str, dims: list[int]) -> int:
    """Run ``factory`` for every dimension the library holds, in a child process: build, train,
    add, search, save (:mod:`hefsearch.index.factory_check`; some strings FAISS accepts abort
    or segfault it later, which would stop every index run). A factory FAISS cannot run is
    refused now, with FAISS's reason. Returns the vectors it needs to train (0: none)."""
    from hefsearch.index.factory_check import check_factory as run_check

    if not factory.strip():
        raise BadValue("an empty index_factory; use 'default' to remove it.")
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


@dataclass
class SettingsView:
    """The library's index settings: its path and one row per setting (key, value, default, meaning)."""

    library: str
    rows: list[dict]

    def to_dict(self) -> dict:
        return {"library": self.library, "settings": self.rows}


def read_settings(library_path, key: str | None = None) -> SettingsView:
    """Every index setting of the library (or the one ``key``), read-only: nothing is written."""
    from hefsearch.index.library import Library

    with Library.open(library_path, create=False, read_only=True) as library:
        stored, path = library.settings(), str(library.path)
    rows = [{"key": s.key, "value": stored.get(s.key), "default": s.default, "meaning": s.meaning}
            for s in known_settings().values() if key is None or s.key == key]
    return SettingsView(path, rows)


@dataclass
class SettingChanged:
    """What a change did: the setting, its value before and now (None: the default), the
    library, the command that applies it now, and the vectors a new factory needs to train."""

    setting: IndexSetting
    previous: object
    new: object
    library: str
    apply_now: str
    train_min: int = 0


def change_setting(library_path, key: str, value: str) -> SettingChanged:
    """Check ``value`` for ``key`` (every check before anything is written; "default" removes
    it) and store it in the library.

    :raises BadValue: a value the setting cannot take.
    :raises HefsearchError: a factory FAISS cannot run; a library that cannot be written.
    """
    from hefsearch.index.library import Library

    from hefsearch.index.crawl_options import CrawlOptions

    setting = known_settings()[key]
    new = None if value.strip().lower() == DEFAULT_WORD else value
    if new is not None and setting.default is not None:
        new = parse_count(new)
    if new is not None and setting.key == SUFFIXES_SETTING:
        try:
            new = CrawlOptions.parse_suffixes([new])
        except ValueError as e:
            raise BadValue(str(e), "--ext") from None
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
    return SettingChanged(setting, previous, new, path, how_to, train_min)

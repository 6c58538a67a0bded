"""What a search may return: path glob, document kind, file type, chunk language and file date.

One :class:`Filters` value carries every filter from every front end (``search``/``similar``
options, the TUI's filter line, the HTTP API's parameters, the MCP tools' arguments) to the
query path, which turns it into one SQL condition on ``documents d`` and ``chunks c``
(:meth:`Filters.sql`): the vector side restricts FAISS to the matching chunk ids, the keyword
side adds it to its FTS5 query.

- ``path_glob`` and ``kinds`` as before (a glob without ``/`` also matches the file name; kinds
  are the extractors' ``text``, ``markdown``, ``html``, ``pdf``, ``docx``);
- ``types``: file types as users name them, by extension (``pdf``, ``docx``, ``md``, ``txt``,
  ``html``...) or by kind (``markdown``): :func:`type_condition`;
- ``langs``: the chunk's language as detected once at indexing (``chunks.lang``, py3langid,
  ISO 639-1 codes: ``de``, ``ja``); a chunk too short to tell has ``''`` and matches no language;
- ``since`` / ``until``: the file's modification time (``documents.mtime_ns``), epoch seconds,
  ``since`` inclusive and ``until`` exclusive. :func:`parse_when` reads what people type: a
  date (``2024-03-01``), a date and time (``2024-03-01T14:00``), or an age (``7d``, ``12h``,
  ``2w``, ``3m``, ``1y``: that long ago).

:func:`parse_filter_line` reads the TUI's filter line (``since:7d lang:de type:pdf path:*/tax/*``).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from typing import Iterable, Sequence

from hefsearch.base.errors import HefsearchError

from .keyword import filter_sql

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([hdwmy])\s*$", re.IGNORECASE)
_AGE_SECONDS = {"h": 3600, "d": 86400, "w": 7 * 86400, "m": 30 * 86400, "y": 365 * 86400}
#: ISO 639-1, the codes chunks are stored with (py3langid answers in them)
ISO_639_1 = frozenset("""aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu
 cv cy da de dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia
 id ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg
 mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw
 sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur
 uz ve vi vo wa wo xh yi yo za zh zu""".split())
#: keys of the filter line -> Filters field
LINE_KEYS = {"path": "path_glob", "kind": "kinds", "type": "types", "lang": "langs",
             "since": "since", "until": "until"}


class FilterError(HefsearchError):
    title = "filter"


@dataclass(frozen=True)
class Filters:
    path_glob: str | None = None
    kinds: tuple[str, ...] | None = None
    types: tuple[str, ...] | None = None
    langs: tuple[str, ...] | None = None
    since: float | None = None
    until: float | None = None

    @classmethod
    def of(cls, filters: Filters | None = None, **given) -> Filters:
        """``filters`` with the non-empty ``given`` fields set (the TUI merges its path and
        file-type fields into its filter line's filters this way)."""
        base = filters or cls()
        changes = {k: (tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in given.items() if v}
        return replace(base, **changes) if changes else base

    @property
    def empty(self) -> bool:
        return all(getattr(self, f.name) in (None, ()) for f in fields(self))

    def sql(self) -> tuple[str, list]:
        """One SQL condition on ``documents d`` and ``chunks c`` (``"1"`` when empty)."""
        where, params = filter_sql(self.path_glob, self.kinds)
        conds = [] if where == "1" else [where]
        if self.types:
            cond, more = type_condition(self.types)
            conds.append(cond)
            params += more
        if self.langs:
            conds.append(f"c.lang IN ({','.join('?' * len(self.langs))})")
            params += list(self.langs)
        if self.since is not None:
            conds.append("d.mtime_ns >= ?")
            params.append(int(self.since * 1e9))
        if self.until is not None:
            conds.append("d.mtime_ns < ?")
            params.append(int(self.until * 1e9))
        return (" AND ".join(conds) or "1"), params

    def to_dict(self) -> dict:
        """The filters that are set, JSON-ready (dates as ISO 8601 UTC)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None or v == ():
                continue
            out[f.name] = iso(v) if f.name in ("since", "until") else (list(v) if isinstance(v, tuple) else v)
        return out

    def describe(self) -> str:
        """'path *.pdf · type pdf · lang de · since 2024-03-01': for result footers."""
        bits = []
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None or v == ():
                continue
            name = {"path_glob": "path", "kinds": "kind", "types": "type", "langs": "lang"}.get(f.name, f.name)
            shown = iso(v)[:16].replace("T", " ") if f.name in ("since", "until") else (
                ", ".join(v) if isinstance(v, tuple) else v)
            bits.append(f"{name} {shown}")
        return " · ".join(bits)


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


#: the dates a filter can hold: modification times are stored as 64-bit nanoseconds (1678-2262)
MIN_EPOCH, MAX_EPOCH = -9_200_000_000.0, 9_200_000_000.0


def parse_when(text: str | float | int | None, *, now: float | None = None, what: str = "date") -> float | None:
    """Epoch seconds from a date, a date and time, an age (``7d``) or a number (epoch seconds).
    Dates without a zone are local time. A date outside 1678-2262 (what the library can
    store) is refused like one that cannot be read."""
    if text is None or text == "":
        return None
    s = str(text).strip()
    try:
        if isinstance(text, (int, float)) and not isinstance(text, bool):
            value = float(text)
        elif (m := _AGE.match(s)) is not None:
            value = (time.time() if now is None else now) - float(m.group(1)) * _AGE_SECONDS[m.group(2).lower()]
        else:
            value = float(s) if re.fullmatch(r"\d{9,}(\.\d+)?", s) else _from_iso(s)
        if not MIN_EPOCH <= value <= MAX_EPOCH:  # also NaN
            raise OverflowError
    except (ValueError, OverflowError, OSError):
        raise FilterError(f"Cannot read {what} {s[:80]!r}" + (" (outside the years 1678-2262)."
                                                               if _looks_like_when(s) else "."),
                          "Give a date (2024-03-01), a date and time (2024-03-01T14:00) or an age "
                          "such as 12h, 7d, 2w, 3m, 1y.") from None
    return value


def _looks_like_when(s: str) -> bool:
    return bool(_AGE.match(s) or re.fullmatch(r"[\d.]+", s) or re.match(r"\d{4}-\d\d", s))


def _from_iso(s: str) -> float:
    dt = datetime.fromisoformat(s.replace("Z", "+00:00").replace(" ", "T", 1))
    return dt.timestamp()  # naive: local time, as a person means it


def normalise_types(values: Iterable[str]) -> tuple[str, ...] | None:
    """File types as given (``PDF``, ``.md``, ``markdown``) -> lower case without dots; an
    unknown one is an error that lists the known ones."""
    from hefsearch.readers.formats import KINDS, SUPPORTED_SUFFIXES

    known = {s.lstrip(".") for s in SUPPORTED_SUFFIXES} | set(KINDS)  # man pages: a kind, no suffix
    out = []
    for v in _split(values):
        t = v.lower().lstrip(".")
        if t not in known:
            raise FilterError(f"Unknown file type {v!r}.", "Known types: " + ", ".join(sorted(known)) + ".")
        out.append(t)
    return tuple(dict.fromkeys(out)) or None


def normalise_langs(values: Iterable[str]) -> tuple[str, ...] | None:
    out = []
    for v in _split(values):
        code = v.lower()
        if code not in ISO_639_1:
            raise FilterError(f"{v!r} is not an ISO 639-1 language code.",
                              "Use ISO 639-1 codes as 'hefsearch status' lists them: de, en, ja, pt, ...")
        out.append(code)
    return tuple(dict.fromkeys(out)) or None


def type_condition(types: Sequence[str]) -> tuple[str, list]:
    """SQL on ``documents d`` for file types: an extension matches the path's suffix (any case),
    a kind name the document's kind."""
    from hefsearch.readers.formats import KINDS

    kinds = set(KINDS)
    conds, params = [], []
    for t in types:
        if t in kinds:
            conds.append("d.kind = ?")
            params.append(t)
        else:
            conds.append("d.path LIKE ? ESCAPE '\\'")  # LIKE ignores ASCII case: .PDF is a pdf
            params.append("%." + t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_"))
    return "(" + " OR ".join(conds) + ")", params


def make_filters(*, path_glob: str | None = None, kinds: Iterable[str] | None = None,
                 types: Iterable[str] | None = None, langs: Iterable[str] | None = None,
                 since=None, until=None, now: float | None = None) -> Filters:
    """Filters from what a user typed, checked (each front end calls this)."""
    start, end = parse_when(since, now=now, what="--since"), parse_when(until, now=now, what="--until")
    if start is not None and end is not None and start >= end:
        raise FilterError(f"--since ({iso(start)}) is not before --until ({iso(end)}).",
                          "Swap them, or leave one out.")
    return Filters(path_glob=(path_glob or None), kinds=tuple(_split(kinds or ())) or None,
                   types=normalise_types(types or ()), langs=normalise_langs(langs or ()),
                   since=start, until=end)


def parse_filter_line(text: str, *, now: float | None = None) -> Filters:
    """``since:7d lang:de,fr type:pdf path:*/tax/*`` -> Filters (the TUI's filter line). Values
    with a comma are lists; an unknown key is an error naming the known ones."""
    given: dict[str, list[str] | str] = {}
    for word in (text or "").split():
        key, sep, value = word.partition(":")
        field = LINE_KEYS.get(key.lower()) if sep else None
        if field is None:
            raise FilterError(f"{word!r} is not a filter.",
                              "Write KEY:VALUE with KEY one of " + ", ".join(LINE_KEYS)
                              + " (e.g. since:7d lang:de type:pdf path:*/tax/*).")
        if field in ("kinds", "types", "langs"):
            given.setdefault(field, []).append(value)  # type: ignore[union-attr]
        else:
            given[field] = value
    return make_filters(now=now, **given)  # type: ignore[arg-type]


def _split(values: Iterable[str]) -> list[str]:
    out = []
    for v in values if not isinstance(values, str) else [values]:
        out += [p.strip() for p in str(v).split(",") if p.strip()]
    return out

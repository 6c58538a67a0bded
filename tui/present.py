"""How results look: pure functions from search data to text, shared by the TUI widgets.

No Textual here, so these are cheap to test and reuse. Nothing in this module
decides *what* is found; it only formats what the search API returned.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Sequence

# the spaces a comparison sets side by side: app/spaces.py (the server's /compare uses them too)
from hefsearch.app.spaces import (compare_fix, is_fp32_space, is_quantised_space,  # noqa: F401
                                  pick_compare_spaces, space_label)
from hefsearch.base.terminal_text import for_terminal
from hefsearch.app.searching import kind_families

#: file-type filter choices: label -> kinds passed to Searcher.search (None = all), from the
#: table of formats
KIND_FILTERS: dict[str, tuple[str, ...] | None] = kind_families()

_WORD = re.compile(r"\w+", re.UNICODE)
#: function words not worth highlighting (a highlight on every "the" hides the real matches)
STOPWORDS = frozenset("""
a an and are as at be but by for from has have how i in is it its of on or that the this to
was were what when where which who why will with you your do does did can not no
der die das den dem des ein eine einer eines und oder ist sind war wie wo wer was wann im in
zu zum zur mit von fuer für auf aus bei nicht es ich du sie er wir ihr
le la les un une des et ou est sont de du au aux en dans pour par sur avec que qui ne pas
el los las y o es son del al en por para con que se no un una
il lo gli e di da che non per con una uno
het een en of is zijn van te op met dat die niet
o os as um uma e ou é são do da dos das em no na para com que não
""".split())
_SPACES = re.compile(r"\s+")
#: highlight at most this many query words (a pasted page would make one huge regex per hit)
MAX_HIGHLIGHT_TERMS = 32


# -- text ----------------------------------------------------------------------------------
def query_terms(query: str) -> list[str]:
    """Words worth highlighting: longest first so "notebook" wins over "note"."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(query.lower()):
        # one-letter Latin words are noise; a single CJK character is a word
        if len(w) > 1 or not w.isascii():
            seen.setdefault(w, None)
    content = [w for w in seen if w not in STOPWORDS]
    return sorted(content or seen, key=len, reverse=True)[:MAX_HIGHLIGHT_TERMS]


def term_spans(text: str, terms: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) of every case-insensitive occurrence of a query term in ``text``."""
    if not terms:
        return []
    pattern = re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)
    return [m.span() for m in pattern.finditer(text) if m.end() > m.start()]


def one_line(text: str) -> str:
    """Text of a document on one line, as a terminal may show it (no control characters)."""
    return for_terminal(_SPACES.sub(" ", text).strip())


def shown_text(text: str) -> str:
    """Text of a document over several lines (the preview), as a terminal may show it."""
    return for_terminal(text, multiline=True)


#: a manual page's section folder (man1, man3p, man8): the folder above it tells languages apart
_MAN_SECTION = re.compile(r"man[0-9n][a-z0-9]*")


def short_path(path: str, parts: int = 2) -> str:
    """The last ``parts`` components: enough to tell files apart in a narrow column; control
    and bidi characters escaped (:func:`~hefsearch.base.terminal_text.for_terminal`). A manual page
    keeps its section and language folder (``de/man1/chsh.1.gz``, not three ``man1/chsh.1.gz``),
    and the section folder is never cut (``man1/chsh.1.gz`` in the narrowest column)."""
    p = PurePath(path)
    if len(p.parts) >= 3 and _MAN_SECTION.fullmatch(p.parts[-2]):
        parts = max(parts, 2) + (p.parts[-3] != "man")  # .../man/de/man1/x: add "de"
    tail = p.parts[-parts:]
    return for_terminal(str(PurePath(*tail)) if tail else path)


def grouping_tag(hit) -> str:
    """"+3 in file · also in: fs.html" for a hit standing for its file and its copies."""
    parts = [f"+{hit.more_in_file} in file"] if getattr(hit, "more_in_file", 0) else []
    return for_terminal(" · ".join(parts + ([hit.also_in_text(names=2)] if getattr(hit, "also_in", None) else [])))


def location(hit) -> str:
    """"p.3 l.42" for PDFs, "l.42" otherwise ("message KEY ..." first for mail: the key comes
    from the message)."""
    return for_terminal(hit.location(short=True))


def ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.0f} ms" if value >= 100 else f"{value:.1f} ms"


TIMING_ORDER = ("encode", "search", "keyword", "rerank", "fetch", "snippet", "total")


def timing_parts(timings: dict) -> list[tuple[str, str]]:
    """[(name, "3.1 ms"), ...] in pipeline order: encode, search, keyword, rerank, fetch,
    snippet, then total; only the parts the search reported."""
    return [(name, ms(timings.get(name))) for name in TIMING_ORDER if name in timings]


def fit_name(name: str, room: int) -> str:
    """A file name in at most ``room`` characters, cut in the middle so the extension stays:
    "raspberry-pi-5-hai….md"."""
    if len(name) <= room:
        return name
    stem, dot, ext = name.rpartition(".")
    tail = f".{ext}" if dot and len(ext) <= 5 else ""
    keep = max(1, room - len(tail) - 1)
    return (stem if tail else name)[:keep] + "…" + tail


# -- spaces and devices ----------------------------------------------------------------------
def side_title(info) -> tuple[str, str]:
    """(device label, space name) for a compare-view column: ("Hailo-10H", "hef")."""
    return space_label(info), info.name


# -- comparison ------------------------------------------------------------------------------
def ranks(result) -> dict[int, int]:
    return {h.chunk_id: h.rank for h in result.hits}


def rank_move(hit, other_ranks: dict[int, int]) -> str:
    """Where the other side ranked the same chunk: "=" at the same rank, "↔3" at rank 3, ""
    when the other side did not find it (the caller marks the hit as found on one side only)."""
    other = other_ranks.get(hit.chunk_id)
    if other is None:
        return ""
    return "=" if other == hit.rank else f"↔{other}"

"""Passages in context, the library's side: how long its chunks are and which section each is in.

A library made now cuts documents into passages of :data:`PASSAGE_TOKENS` tokens when its
encoder's window is at least :data:`PASSAGES_FROM`, and groups consecutive passages of
a document (on one page, chapter or slide) into sections that fill the window. Each chunk row records its
section (``chunks.section``: the ordinal of the section's first chunk), so a vector computed
later (a re-rank, a back-fill, an evaluation) sees the same section as the sync did. How the two
vectors combine: ``embed/in_context.py``. Why: docs/searching.md, "Hubs and long passages".

The choice is remembered in the library (setting ``passage_tokens``): a library that already
held chunks before this existed keeps chunks that fill the window (0), as its stored vectors were
made; it moves to passages when it is indexed anew into an empty library.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from hefsearch.base.errors import HefsearchError

if TYPE_CHECKING:  # pragma: no cover
    from .library import Library

#: the length of a passage, in tokens (specials and prefix included): 64 ranked better than 128
#: on both long-passage sets in both spaces, at 256 and at 512 (docs/searching.md)
PASSAGE_TOKENS = 64
#: the shortest window cut into passages (measured at 256 and 512 tokens, docs/searching.md); a
#: shorter window keeps chunks that fill it
PASSAGES_FROM = 256
#: the library setting that remembers it (0: chunks fill the encoder's window)
SETTING = "passage_tokens"
#: and the window its sections fill
SECTION_SETTING = "section_tokens"


@dataclass(frozen=True)
class Cutting:
    """How a sync cuts documents: the overlap between chunks and the passage length (0: chunks
    fill the encoder's window)."""

    overlap_tokens: int = 32
    passage_tokens: int = 0

    @classmethod
    def of(cls, value: "Cutting | int") -> "Cutting":
        """``value`` as a Cutting (a bare int: the overlap, without passages)."""
        return value if isinstance(value, Cutting) else cls(int(value))

    def window(self, max_tokens: int) -> int:
        """The longest chunk: a passage where passages are on and shorter than the window."""
        return min(self.passage_tokens, int(max_tokens)) if self.passage_tokens else int(max_tokens)


def library_passage_tokens(library: "Library", max_tokens: int, wanted: int | None = None) -> int:
    """The library's passage length, decided at its first sync and remembered: ``wanted`` (0:
    chunks fill the window) or, when None, passages in an empty library whose window is at least
    :data:`PASSAGES_FROM`; a library that held chunks before this setting existed keeps 0.

    :raises PassagesFixed: ``wanted`` differs from what the library's chunks were cut with."""
    settings = library.settings()
    if SETTING in settings:
        tokens = int(settings[SETTING] or 0)
    elif not library.query("SELECT 1 FROM chunks LIMIT 1"):  # empty: not every id read to tell
        tokens = wanted if wanted is not None else PASSAGE_TOKENS if max_tokens >= PASSAGES_FROM else 0
        wanted = None
    else:
        tokens = 0
    if wanted is not None and bool(wanted) != bool(tokens):
        raise PassagesFixed(library.path, tokens)
    if SETTING not in settings and not getattr(library, "read_only", False):
        library.set_settings(**{SETTING: tokens, SECTION_SETTING: int(max_tokens)})
    return tokens


def passages_per_section(settings: dict) -> int:
    """How many passages a section holds at most (1 without passages). Neighbouring passages
    share their section's half of the score, so a query's nearest candidates come in runs of
    them: a search grouped by document asks this many times the candidates."""
    tokens = int(settings.get(SETTING) or 0)
    if not tokens:
        return 1
    return max(1, int(settings.get(SECTION_SETTING) or PASSAGES_FROM) // tokens)


class PassagesFixed(HefsearchError):
    """Passages asked on or off where the library's chunks are already cut the other way."""

    def __init__(self, path, tokens: int):
        how = f"passages of {tokens} tokens" if tokens else "chunks that fill the encoder's window"
        super().__init__(f"The library {path} holds {how}; that cannot change for what it holds.",
                         "Leave --passages/--no-passages out, or index into a new library (--library NEW).")


def passages_described(settings: dict) -> dict | None:
    """What a search result says of the library's chunks (JSON ``passages``), from the
    library's settings, or None when its chunks fill the encoder's window."""
    tokens = int(settings.get(SETTING) or 0)
    if not tokens:
        return None
    return {"tokens": tokens, "per_section": passages_per_section(settings),
            "score": "the mean of the cosine with the passage and with its section "
            "(the passages around it that fill the encoder's window)"}


def section_starts(chunks: Sequence, window: int) -> list[int]:
    """Each chunk's section, as the ordinal (index) of the section's first chunk: consecutive
    chunks on the same page while their tokens fit in ``window``. ``chunks`` of one document,
    in order, with ``.page`` and ``.tokens``."""
    out: list[int] = []
    first, used, page = 0, 0, object()
    for i, c in enumerate(chunks):
        if i == 0 or c.page != page or used + c.tokens > window:
            first, used, page = i, 0, c.page
        used += c.tokens
        out.append(first)
    return out


def section_text(chunks: Sequence) -> str:
    """The text of consecutive chunks (``.text``, ``.start``, ``.end`` in the document), each
    overlap kept once, a gap between two as a line break."""
    parts: list[str] = []
    end = None
    for c in chunks:
        if end is None or c.start >= end:
            if parts:
                parts.append("\n")
            parts.append(c.text)
        else:  # overlaps the chunk before: only what follows it
            parts.append(c.text[end - c.start:])
        end = c.end if end is None else max(end, c.end)
    return "".join(parts)


def sections_of(chunks: Sequence, starts: Sequence[int]) -> list[str | None]:
    """Each chunk's section text, None where a chunk is its own section."""
    groups: dict[int, list] = {}
    for c, s in zip(chunks, starts):
        groups.setdefault(s, []).append(c)
    texts = {s: section_text(g) for s, g in groups.items() if len(g) > 1}
    return [texts.get(s) for s in starts]


def stored_sections(library: "Library", chunk_ids: Sequence[int]) -> list[str | None]:
    """The section text of each stored chunk, as the sync that stored it had it; None for a
    chunk alone in its section, gone, or stored before sections existed."""
    ids = [int(i) for i in chunk_ids]
    if not ids:
        return []
    try:
        with library.snapshot():
            texts = _section_texts(library.db.execute, ids)
    except sqlite3.OperationalError:  # a library not migrated yet (opened read-only): no sections
        return [None] * len(ids)
    return [texts.get(i) for i in ids]


class _Row:
    __slots__ = ("text", "start", "end")

    def __init__(self, text: str, start: int, end: int):
        self.text, self.start, self.end = text, start, end


def _section_texts(q, ids: list[int]) -> dict[int, str]:
    """chunk id -> its section's text, for the sections of ``ids`` with more than one chunk."""
    wanted: dict[tuple[int, int], list[int]] = {}
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        marks = ",".join("?" * len(part))
        for cid, doc, section in q(f"SELECT id, doc_id, section FROM chunks WHERE id IN ({marks})", part):
            if section is not None:
                wanted.setdefault((doc, section), []).append(cid)
    out: dict[int, str] = {}
    for (doc, section), members in wanted.items():
        rows = [_Row(t, s, e) for t, s, e in q('SELECT text, start, "end" FROM chunks WHERE doc_id=? AND section=? '
                                                "ORDER BY ordinal", [doc, section])]
        if len(rows) > 1:
            text = section_text(rows)
            out.update((cid, text) for cid in members)
    return out

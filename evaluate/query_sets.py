"""The library benchmark's queries (``hefsearch bench quality --library``): a file of queries
(one per line, or a TSV with ``query`` and ``expected`` columns), pseudo-queries cut from the
library's own chunks when there is none, and the chunks that answer each expected document."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from hefsearch.base.errors import HefsearchError

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.index.library import Library


class QueriesFileError(HefsearchError):
    title = "queries file error"


_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]?")


def pseudo_queries(library: "Library", n: int, seed: int = 0) -> list[tuple[str, int]]:
    """(query, source chunk id): a sentence (4-30 words) or a 12-word window of random chunks."""
    ids = library.chunk_ids().tolist()
    rng = random.Random(seed)
    pick = rng.sample(ids, min(n, len(ids)))
    out = []
    for rec in library.chunks(pick):
        sents = [s.strip() for s in _SENTENCE.findall(rec.text) if 4 <= len(s.split()) <= 30]
        if sents:
            q = rng.choice(sents)
        else:
            words = rec.text.split()
            if len(words) > 1:
                start = rng.randrange(max(1, len(words) - 12))
                q = " ".join(words[start : start + 12])
            else:  # a CJK chunk without spaces or punctuation: a character window
                text = rec.text.strip()
                start = rng.randrange(max(1, len(text) - 24))
                q = text[start : start + 24]
        if q.strip():
            out.append((q, rec.id))
    return out


@dataclass
class QuerySet:
    """Queries for the library benchmark; ``expected[i]`` names the document that answers
    query i (a file name or path suffix), when the file says so."""

    texts: list[str]
    expected: list[str | None] | None = None


def read_queries(path: str | Path) -> QuerySet:
    """One query per line, or a TSV with a header holding ``query`` (and optionally
    ``expected``: the file that answers it, or several separated by "|"). Blank lines and '#'
    lines are skipped."""
    p = Path(path).expanduser()
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise QueriesFileError(f"Cannot read the queries file {p}: {e}", "Give a UTF-8 text file, one query per line.") from None
    lines = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    header = [h.strip().lower() for h in lines[0].split("\t")] if lines else []
    if "query" in header:
        qi = header.index("query")
        ei = header.index("expected") if "expected" in header else None
        texts, expected = [], []
        for ln in lines[1:]:
            cols = ln.split("\t")
            if qi < len(cols) and cols[qi].strip():
                texts.append(cols[qi].strip())
                expected.append(cols[ei].strip() or None if ei is not None and ei < len(cols) else None)
        qs = QuerySet(texts, expected if ei is not None else None)
    else:
        qs = QuerySet([ln.strip() for ln in lines])
    if not qs.texts:
        raise QueriesFileError(f"The queries file {p} holds no query.", "Write one query per line.")
    return qs


def expected_chunks(library: "Library", expected: Sequence[str | None]) -> list[set[int]]:
    """Per query, the chunk ids of the documents whose path ends with the expected name
    (several names separated by "|" are alternatives)."""
    rows = library.query("SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.doc_id")
    out = []
    for name in expected:
        if not name:
            out.append(set())
            continue
        ids: set[int] = set()
        for alt in name.split("|"):  # "a.md|b.txt": any of these documents answers
            tail = alt.strip().replace("\\", "/").lstrip("/")
            if tail:
                ids |= {cid for cid, path in rows
                        if path.replace("\\", "/") == tail or path.replace("\\", "/").endswith("/" + tail)}
        out.append(ids)
    return out

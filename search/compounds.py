"""Word parts inside compounds, and hyphen variants, for keyword search.

German, Dutch, the Nordic languages and others write compounds as one word: a spreadsheet holds
"Fahrradversicherung", the query says "Fahrrad" or "Versicherung". FTS5's ``unicode61``
tokenizer indexes whole words, so neither matches; and "Anmeldeshell" misses a page that writes
"Anmelde-Shell" (two indexed words). No splitter is written here: a query word is widened with
what the library's own index holds, read through SQLite's ``fts5vocab`` table:

- the indexed words that start with it (an FTS5 prefix query: compound heads, "Fahrrad*");
- the indexed words that contain it further in (compound tails, "...versicherung"), from the
  vocabulary held in memory (:class:`Vocabulary`, read once and again after the library grew);
- for a word the library does not hold, each split into two words it does hold, as a phrase
  (``"anmelde shell"``): the hyphen and space variants.

Words shorter than :data:`MIN_PART` letters are left as they are (a short part is inside too
many words to mean anything). The widened word is an OR group of the word and its variants,
so BM25 still ranks a chunk by the words it really holds. Hybrid search widens queries of a few
words only (:func:`short_query`).
"""

from __future__ import annotations

import threading
import time
import unicodedata
from dataclasses import dataclass, replace

#: the shortest word widened (and the shortest part of a split)
MIN_PART = 4
#: hybrid search widens queries of at most this many words (keyword mode: any)
MAX_WIDENED_WORDS = 3
#: variants kept per word (those in most chunks first)
MAX_VARIANTS = 12
#: the vocabulary in memory is read again at most this often, and only after the library grew
REFRESH_S = 60.0
_VOCAB_TABLE = "temp.hefsearch_vocab"
_lock = threading.Lock()
_cache: dict[int, "Vocabulary"] = {}


@dataclass
class Vocabulary:
    """The library's indexed words, most chunks first, one per line (substring search in C)."""

    joined: str
    #: the library's largest chunk id when it was read (grown: read again after REFRESH_S)
    stamp: int
    read_at: float

    def containing(self, word: str, limit: int = MAX_VARIANTS) -> list[str]:
        """Indexed words longer than ``word`` that hold it after their first letter."""
        out: list[str] = []
        at = self.joined.find(word, 1)
        while at >= 0 and len(out) < limit:
            start = self.joined.rfind("\n", 0, at) + 1
            end = self.joined.find("\n", at)
            term = self.joined[start:end]
            if at > start and term not in out:
                out.append(term)
            at = self.joined.find(word, end)
        return out


def short_query(query: str) -> bool:
    """Whether hybrid search widens ``query``'s words: a few words, as compounds are searched
    for ("Fahrrad", "Versicherung Fahrrad"); a question in a sentence is the vectors' job."""
    from .keyword import parse_query

    return len(parse_query(query)) <= MAX_WIDENED_WORDS


def widen(db, terms: list) -> list:
    """``terms`` (:class:`~hefsearch.search.keyword.Term`) with each plain word of
    :data:`MIN_PART` letters or more given its compound and hyphen variants."""
    if not any(_widens(t) for t in terms):
        return terms
    _ensure_vocab_table(db)
    vocab = _vocabulary(db)
    out = []
    for t in terms:
        if not _widens(t):
            out.append(t)
            continue
        word = _folded(t.words[0])  # the vocabulary holds words as the index folds them
        variants = [f'"{word}"*'] + [f'"{w}"' for w in vocab.containing(word)]
        if not _indexed(db, word):
            variants += [f'"{a} {b}"' for a, b in _splits(db, word)]
        out.append(replace(t, alternatives=tuple(variants[: MAX_VARIANTS + 1])))
    return out


def _folded(word: str) -> str:
    """``word`` without diacritics, as ``unicode61 remove_diacritics 2`` indexes it."""
    return "".join(c for c in unicodedata.normalize("NFD", word) if not unicodedata.combining(c))


def _widens(term) -> bool:
    return len(term.words) == 1 and not term.prefix and len(term.words[0]) >= MIN_PART and term.words[0].isalpha()


def _ensure_vocab_table(db) -> None:
    # in the connection's temp schema: no migration, and a read-only library can have it too
    db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {_VOCAB_TABLE} USING fts5vocab(main, 'chunks_fts', 'row')")


def _indexed(db, word: str) -> bool:
    return db.execute(f"SELECT 1 FROM {_VOCAB_TABLE} WHERE term = ?", [word]).fetchone() is not None


def _splits(db, word: str) -> list[tuple[str, str]]:
    """Every split of ``word`` into two indexed words of :data:`MIN_PART` letters or more."""
    return [(word[:i], word[i:]) for i in range(MIN_PART, len(word) - MIN_PART + 1)
            if _indexed(db, word[:i]) and _indexed(db, word[i:])]


def _vocabulary(db) -> Vocabulary:
    stamp = db.execute("SELECT max(id) FROM chunks").fetchone()[0] or 0
    with _lock:
        have = _cache.get(id(db))
        if have is not None and (have.stamp == stamp or time.monotonic() - have.read_at < REFRESH_S):
            return have
    rows = db.execute(f"SELECT term FROM {_VOCAB_TABLE} ORDER BY doc DESC").fetchall()
    vocab = Vocabulary("\n" + "\n".join(r[0] for r in rows) + "\n", stamp, time.monotonic())
    with _lock:
        if len(_cache) > 8:  # libraries opened and closed in one process (tests, the server)
            _cache.clear()
        _cache[id(db)] = vocab
    return vocab

"""Keyword search over the library's FTS5 tables, with a query parser that never raises.

User text is never handed to FTS5 as query syntax. It is split into words the way the
``unicode61`` tokenizer splits them (letters and digits; everything else separates), each word
becomes a quoted FTS5 string, ``"double-quoted parts"`` become phrases, and a trailing ``*``
asks for a prefix. So ``C++ (draft) AND "XR-2000"`` or a lone ``"`` is always a valid query.

Queries containing characters of scripts written without spaces (Chinese, Japanese, Korean,
Thai, ...) go to the trigram table ``chunks_cjk`` instead, where words of three or more
characters use the trigram index and shorter ones a LIKE (a scan of that table only).

Two strengths: ``all`` (every word must occur: strong evidence) and ``any`` (BM25 over
whichever words occur).

Query text from a terminal can hold lone surrogates (bytes a non-UTF-8 locale could not decode)
and control characters; :func:`clean_text` makes it plain text before anything else sees it,
and :func:`path_pattern` puts a path glob in the escaped form the library stores undecodable
file names in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TERM = re.compile(r'"([^"]*)"|(\w+)(\*?)', re.UNICODE)
_WORD = re.compile(r"\w+", re.UNICODE)
_NO_SPACE = re.compile(
    "[\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff\u2e80-\u9fff\ua960-\ua97f"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]")
SNIPPET_TOKENS = 24
#: words of a query that are searched (more: a pasted page, and SQLite refuses expressions
#: of about a thousand terms)
MAX_TERMS = 64
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# C0/C1 control characters other than tab and newlines: NUL, escape sequences, ...
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Term:
    words: tuple[str, ...]  # one word, or several for a phrase
    prefix: bool = False
    #: FTS5 strings that also match this term: compound and hyphen variants
    #: (:func:`hefsearch.search.compounds.widen`)
    alternatives: tuple[str, ...] = ()

    def fts(self) -> str:
        body = " ".join(self.words).replace('"', '""')
        own = f'"{body}"' + ("*" if self.prefix else "")
        return f"({' OR '.join((own, *self.alternatives))})" if self.alternatives else own


def has_surrogates(text: str) -> bool:
    return bool(_SURROGATE.search(text or ""))


def clean_text(text: str) -> str:
    """``text`` as plain Unicode: a surrogate pair becomes its character, a lone surrogate
    U+FFFD (SQLite, JSON, the tokenizer and the terminal all refuse them), a control
    character a space."""
    text = text or ""
    if _SURROGATE.search(text):
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return _CONTROL.sub(" ", text)


def path_pattern(pattern: str) -> str:
    """A path glob in the form the library stores paths: bytes that are not UTF-8 (lone
    surrogates from the shell) become ``\\xNN`` escapes, as in the stored file names (the
    crawler's :func:`~hefsearch.base.terminal_text.printable`)."""
    if not _SURROGATE.search(pattern):
        return pattern
    from hefsearch.base.terminal_text import printable

    return printable(pattern)


def parse_query(text: str) -> list[Term]:
    """Words and phrases of a user query (duplicates dropped, order kept). A code of several
    parts ("HZ-2026-118", "4.2.1") is one phrase: its parts match only together, so a chunk
    that shares one of them ("2026") is no match for it."""
    terms: list[Term] = []
    seen = set()
    for m in _TERM.finditer(_codes_as_phrases(text or "")):
        if m.group(1) is not None:
            words = tuple(w.lower() for w in _WORD.findall(m.group(1)))
            t = Term(words) if words else None
        else:
            t = Term((m.group(2).lower(),), prefix=bool(m.group(3)))
        if t is not None and t not in seen:
            seen.add(t)
            terms.append(t)
    return terms


# a code: a run of letters/digits joined by - . / _ that holds a digit ("XR-2000", "E-52",
# "K-45", "4.2.1"), or an all-caps word of 2-10 letters ("RAID", "VPN")
_CODE = re.compile(r"(?<![\w.\-/])(?:(?=[\w.\-/]*\d)\w+(?:[.\-/]\w+)*|[A-Z]{2,10})(?![\w\-/])")


#: a bare number shorter than this is a quantity ("90 days", "10 minutes", "2024"), not a code
MIN_NUMBER_CODE_DIGITS = 5
#: a code found in more than this share of the library's chunks tells no document from another
MAX_CODE_SHARE = 0.05


def _codes_as_phrases(text: str) -> str:
    """``text`` with each code of several parts, outside quotes, quoted as a phrase."""
    def quote(m: re.Match) -> str:
        return f'"{m.group(0)}"' if len(_WORD.findall(m.group(0))) > 1 else m.group(0)

    parts = text.split('"')  # even parts lie outside quotes
    return '"'.join(_CODE.sub(quote, p) if i % 2 == 0 else p for i, p in enumerate(parts))


def code_terms(text: str) -> list[Term]:
    """The exact codes of a query (model numbers, form codes, versions, acronyms) as phrases.

    They are spelled the same in every language, so matching them is safe even when the
    rest of the query is in another language than the document. A bare number of fewer than
    :data:`MIN_NUMBER_CODE_DIGITS` digits is a quantity, not a code: "expire after 90 days"
    must not pull up every table holding a 90 (an order or postcode number of 5+ digits stays).
    """
    out: list[Term] = []
    for m in _CODE.finditer(text or ""):
        code = m.group(0)
        if code.isdigit() and len(code) < MIN_NUMBER_CODE_DIGITS:
            continue
        words = tuple(w.lower() for w in _WORD.findall(code))
        if words and Term(words) not in out:
            out.append(Term(words))
    return out


def rare_terms(db, terms: list[Term], share: float = MAX_CODE_SHARE) -> list[Term]:
    """The ``terms`` found in at most ``share`` of the library's chunks (and always those in at
    most two): a code that most chunks hold ("IT", which FTS5 matches as "it"; a product name
    in its own manual) is no evidence for one of them. Each count stops at the limit, so the
    cost does not grow with the library."""
    if not terms:
        return []
    total = db.execute("SELECT max(id) FROM chunks").fetchone()[0] or 0  # O(log n), deleted rows included
    limit = max(2, int(total * share))
    out = []
    for t in terms:
        (n,) = db.execute("SELECT count(*) FROM (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?)",
                          [t.fts(), limit + 1]).fetchone()
        if n <= limit:
            out.append(t)
    return out


def needs_trigram(text: str) -> bool:
    return bool(_NO_SPACE.search(text or ""))


def match_expression(terms: list[Term], strength: str = "all") -> str | None:
    if not terms:
        return None
    return (" AND " if strength == "all" else " OR ").join(t.fts() for t in terms)


def filter_sql(path_glob: str | None, kinds) -> tuple[str, list]:
    """SQL condition on ``documents d`` for the path glob and kind filters."""
    conds, params = [], []
    if path_glob:
        path_glob = path_pattern(path_glob)
        if "/" in path_glob:
            conds.append("d.path GLOB ?")
            params.append(path_glob)
        else:  # no folder part: match the file name too
            conds.append("(d.path GLOB ? OR d.path GLOB ?)")
            params += [path_glob, "*/" + path_glob]
    if kinds:
        kinds = list(kinds)
        conds.append(f"d.kind IN ({','.join('?' * len(kinds))})")
        params += kinds
    return (" AND ".join(conds) or "1"), params


def keyword_search(db, query: str, k: int, *, strength: str = "all", terms: list[Term] | None = None,
                   filters=None, parts: bool = False) -> list[tuple[int, float, str]]:
    """Top ``k`` chunks for the query: (chunk id, score (higher is better), snippet).

    ``terms`` replaces the words parsed from ``query`` (e.g. only its :func:`code_terms`);
    ``filters``: a :class:`~hefsearch.search.filters.Filters` (None: every document);
    ``parts``: words also match inside compounds and as hyphen variants
    (:mod:`hefsearch.search.compounds`)."""
    query = clean_text(query)
    terms = (parse_query(query) if terms is None else terms)[:MAX_TERMS]
    if not terms or k <= 0:
        return []
    where, params = filters.sql() if filters is not None else ("1", [])
    if needs_trigram(query):
        return _trigram_search(db, terms, k, strength, where, params)
    if parts:
        from .compounds import widen

        terms = widen(db, terms)
    expr = match_expression(terms, strength)
    rows = db.execute(
        f"SELECT f.rowid, -bm25(chunks_fts), snippet(chunks_fts, 0, '', '', '…', {SNIPPET_TOKENS}) "
        f"FROM chunks_fts f JOIN chunks c ON c.id = f.rowid JOIN documents d ON d.id = c.doc_id "
        f"WHERE chunks_fts MATCH ? AND {where} ORDER BY bm25(chunks_fts) LIMIT ?",
        [expr, *params, k]).fetchall()
    return [(r[0], float(r[1]), r[2]) for r in rows]


def _trigram_search(db, terms: list[Term], k: int, strength: str, where: str, params: list):
    words = [" ".join(t.words) for t in terms]
    long_ = [w for w in words if len(w) >= 3]
    short = [w for w in words if len(w) < 3]
    if strength != "all" and short:  # FTS5 MATCH cannot sit inside an OR: all words by LIKE
        long_, short = [], words
    conds, cparams = [], []
    if long_:
        joiner = " AND " if strength == "all" else " OR "
        conds.append("chunks_cjk MATCH ?")
        cparams.append(joiner.join('"' + w.replace('"', '""') + '"' for w in long_))
    # words under three characters: the trigram index cannot answer them (and SQLite 3.40's
    # trigram LIKE returns nothing for them), so they are matched on the chunk text itself
    likes = []
    for w in short:
        likes.append("c.text LIKE ? ESCAPE '\\'")
        cparams.append("%" + w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
    if likes:
        conds.append("(" + (" AND " if strength == "all" else " OR ").join(likes) + ")")
    cond = " AND ".join(conds)
    if long_:
        sql = ("SELECT c.id, -bm25(chunks_cjk), c.text "
               f"FROM chunks_cjk JOIN chunks c ON c.id = chunks_cjk.rowid JOIN documents d ON d.id = c.doc_id "
               f"WHERE {cond} AND {where} ORDER BY bm25(chunks_cjk) LIMIT ?")
    else:  # LIKE only: no BM25; shorter chunks first (denser matches)
        sql = ("SELECT c.id, 1.0 / max(length(c.text), 1), c.text FROM chunks c "
               f"JOIN documents d ON d.id = c.doc_id WHERE {cond} AND {where} "
               "ORDER BY length(c.text) LIMIT ?")
    rows = db.execute(sql, [*cparams, *params, k]).fetchall()
    return [(r[0], float(r[1]), _first_match_window(r[2], words)) for r in rows]


def _first_match_window(text: str, words: list[str], width: int = 120) -> str:
    """A window around the first occurrence of a query word (the trigram table has no
    snippet(): it is contentless)."""
    low = text.lower()
    hits = [p for p in (low.find(w) for w in words) if p >= 0]
    pos = min(hits) if hits else 0
    start = max(0, pos - width // 3)
    end = min(len(text), start + width)
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")

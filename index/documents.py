"""The documents and chunks tables: every SQL statement that reads or writes them lives here,
so the schema (``store.py``'s numbered migrations) is spelled out in one module.

Readers take ``q``, something that runs one statement and returns its rows:
``Library.query`` (it takes the library's connection lock), or ``library.db.execute`` inside a
``snapshot()``/``_dblock`` a caller already holds. Writers take the SQLite connection of an open
``Library.transaction()``: a batch's documents and chunks are committed together with its
space memberships (the crash-safety protocol of :mod:`hefsearch.index.library`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

#: runs one statement with its parameters and gives its rows
Query = Callable[[str, Sequence], Iterable[tuple]]
#: ids per ``IN (...)`` (SQLite's default limit on parameters is 999)
IN_BATCH = 900


@dataclass
class ChunkRecord:
    id: int
    doc_id: int
    path: str
    ordinal: int
    text: str
    start: int
    end: int
    page: int | None
    line: int
    tokens: int
    cut: bool
    doc_kind: str
    doc_sha256: str | None = None


_CHUNK_SELECT = (
    'SELECT c.id, c.doc_id, d.path, c.ordinal, c.text, c.start, c."end", c.page, c.line, '
    "c.tokens, c.cut, d.kind, d.sha256 FROM chunks c JOIN documents d ON d.id = c.doc_id"
)
#: the status of a document whose text is searchable (``stale``: its previous version)
INDEXED = ("ok", "stale")


def _chunk_record(row) -> ChunkRecord:
    return ChunkRecord(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8],
                       row[9], bool(row[10]), row[11] or "", row[12])


def _marks(n: int) -> str:
    return ",".join("?" * n)


def like_prefix(folder: str) -> str:
    """A LIKE pattern (ESCAPE '\\') for every path below ``folder``."""
    esc = folder.rstrip(os.sep).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return esc + os.sep + "%"


# -- chunks as the query path reads them -----------------------------------------------------
def chunk_records(q: Query, ids: Sequence[int]) -> dict[int, ChunkRecord]:
    """The records of the chunks ``ids`` that exist, by id."""
    found: dict[int, ChunkRecord] = {}
    for i in range(0, len(ids), IN_BATCH):
        part = list(ids[i : i + IN_BATCH])
        for row in q(f"{_CHUNK_SELECT} WHERE c.id IN ({_marks(len(part))})", part):
            found[row[0]] = _chunk_record(row)
    return found


def neighbours(q: Query, chunk_id: int, before: int, after: int) -> list[ChunkRecord]:
    """The chunk with up to ``before``/``after`` chunks of its document around it."""
    rows = list(q("SELECT doc_id, ordinal FROM chunks WHERE id = ?", [chunk_id]))
    if not rows:
        return []
    doc_id, ordinal = rows[0]
    return [_chunk_record(r) for r in q(
        f"{_CHUNK_SELECT} WHERE c.doc_id = ? AND c.ordinal BETWEEN ? AND ? ORDER BY c.ordinal",
        [doc_id, ordinal - before, ordinal + after])]


def chunk_place(q: Query, chunk_id: int) -> tuple[int, str, int] | None:
    """(document id, path, ordinal) of a chunk, or None."""
    rows = list(q("SELECT c.doc_id, d.path, c.ordinal FROM chunks c JOIN documents d ON d.id = c.doc_id "
                  "WHERE c.id = ?", [int(chunk_id)]))
    return tuple(rows[0]) if rows else None


def document_id(q: Query, path: str) -> int | None:
    """The id of the document stored under ``path`` (as stored: absolute, printable), or None."""
    rows = list(q("SELECT id FROM documents WHERE path = ?", [path]))
    return rows[0][0] if rows else None


def document_path(q: Query, doc_id: int) -> str | None:
    rows = list(q("SELECT path FROM documents WHERE id = ?", [int(doc_id)]))
    return rows[0][0] if rows else None


#: a chunk as the JSON answers show it (``app.service.chunk_json``): these columns, in this order
CHUNK_ROW_KEYS = ("id", "doc_id", "path", "kind", "ordinal", "page", "line", "start", "end", "lang", "tokens", "text")
_CHUNK_ROW = ('SELECT c.id, c.doc_id, d.path, d.kind, c.ordinal, c.page, c.line, c.start, c."end", c.lang, '
              "c.tokens, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id")


def chunk_row(q: Query, chunk_id: int) -> tuple | None:
    """One chunk's :data:`CHUNK_ROW_KEYS` values, or None."""
    rows = list(q(f"{_CHUNK_ROW} WHERE c.id = ?", [int(chunk_id)]))
    return tuple(rows[0]) if rows else None


def chunk_rows_of(q: Query, doc_id: int) -> list[tuple]:
    """A document's chunks as :data:`CHUNK_ROW_KEYS` values, in reading order."""
    return [tuple(r) for r in q(f"{_CHUNK_ROW} WHERE c.doc_id = ? ORDER BY c.ordinal", [int(doc_id)])]


def document_row(q: Query, doc_id: int) -> tuple | None:
    """(id, path, kind, size, mtime_ns, status, chunks, indexed_at) of a document, or None."""
    rows = list(q("SELECT id, path, kind, size, mtime_ns, status, chunks, indexed_at FROM documents "
                  "WHERE id = ?", [int(doc_id)]))
    return tuple(rows[0]) if rows else None


def kind_counts(q: Query) -> dict[str, int]:
    """Searchable documents per kind (text, pdf, ...), most first."""
    return dict(q("SELECT kind, COUNT(*) AS n FROM documents WHERE status IN ('ok', 'stale') "
                  "GROUP BY kind ORDER BY n DESC, kind", []))


def lang_counts(q: Query) -> dict[str, int]:
    """Chunks per detected language (ISO 639-1), most first; chunks without one are left out."""
    return dict(q("SELECT lang, COUNT(*) AS n FROM chunks WHERE lang IS NOT NULL AND lang != '' "
                  "GROUP BY lang ORDER BY n DESC, lang", []))


def chunk_ids_of(q: Query, doc_id: int) -> list[int]:
    """A document's chunk ids in reading order."""
    return [r[0] for r in q("SELECT id FROM chunks WHERE doc_id = ? ORDER BY ordinal", [int(doc_id)])]


def filtered_chunk_ids(q: Query, where: str, params: Sequence) -> set[int]:
    """The chunk ids a filter's condition on ``documents d`` and ``chunks c`` lets through."""
    # documents first (far fewer rows), then their chunks through the (doc_id, ordinal) index
    return {r[0] for r in q(f"SELECT c.id FROM documents d CROSS JOIN chunks c ON c.doc_id = d.id WHERE {where}",
                            params)}


def stored_languages(q: Query, ids: Sequence[int]) -> dict[int, tuple[str | None, str]]:
    """id -> (``chunks.lang``, the text when no language is stored, else '')."""
    stored: dict[int, tuple[str | None, str]] = {}
    for i in range(0, len(ids), IN_BATCH):
        part = list(ids[i : i + IN_BATCH])
        for cid, lang, text in q(f"SELECT id, lang, CASE WHEN lang IS NULL THEN text END FROM chunks "
                                 f"WHERE id IN ({_marks(len(part))})", part):
            stored[cid] = (lang, text or "")
    return stored


def all_chunk_ids(q: Query) -> Iterable[int]:
    """Every chunk id, ascending (a generator over the cursor: no list of millions)."""
    return (r[0] for r in q("SELECT id FROM chunks ORDER BY id", []))


def document_count(q: Query) -> int:
    """Documents whose text is searchable."""
    return list(q("SELECT COUNT(*) FROM documents WHERE status IN ('ok', 'stale')", []))[0][0]


def any_under(q: Query, path: str) -> bool:
    """Whether a document is stored at ``path`` or below it."""
    return bool(list(q("SELECT 1 FROM documents WHERE path = ? OR path LIKE ? ESCAPE '\\' LIMIT 1",
                       [path, like_prefix(path)])))


# -- status -----------------------------------------------------------------------------------
def counts(q: Query) -> tuple[int, int, int, int, int]:
    """(searchable documents, stale ones, chunks, chunks cut at the window, pages read by OCR)."""
    one = lambda sql: list(q(sql, []))[0][0]  # noqa: E731
    return (one("SELECT COUNT(*) FROM documents WHERE status IN ('ok', 'stale')"),
            one("SELECT COUNT(*) FROM documents WHERE status = 'stale'"),
            one("SELECT COUNT(*) FROM chunks"),
            one("SELECT COUNT(*) FROM chunks WHERE cut"), ocr_page_count(q))


def ocr_page_count(q: Query) -> int:
    """Pages read by OCR in searchable documents (``documents.encoding`` is ``ocr:PAGES`` for them)."""
    return list(q("SELECT COALESCE(SUM(CAST(substr(encoding, 5) AS INTEGER)), 0) FROM documents "
                  "WHERE encoding LIKE 'ocr:%' AND status IN ('ok', 'stale')", []))[0][0]


def not_ok(q: Query) -> list[tuple[str, str, str]]:
    """(path, status, error) of every document whose latest version failed, by path."""
    return [tuple(r) for r in q("SELECT path, status, error FROM documents WHERE status != 'ok' ORDER BY path", [])]


# -- what a sync compares and writes ------------------------------------------------------------
_STORED = "SELECT path, path_bytes, id, size, mtime_ns, sha256, status, error FROM documents"


def stored_rows(q: Query, under: Sequence[str] | None = None) -> list[tuple]:
    """(path, path_bytes, id, size, mtime_ns, sha256, status, error) of every document, or of
    those at or below the printable paths ``under`` (a watcher's run reads its few rows)."""
    if under is None:
        return list(q(_STORED, []))
    rows: list[tuple] = []
    for shown in under:
        rows += q(f"{_STORED} WHERE path = ? OR path LIKE ? ESCAPE '\\'", [shown, like_prefix(shown)])
    return rows


def keep_stale(conn, doc_id: int, error: str, size: int, mtime_ns: int) -> None:
    """A file that fails now keeps its indexed version, marked stale with the reason."""
    conn.execute("UPDATE documents SET status='stale', error=?, size=?, mtime_ns=? WHERE id=?",
                 [error, size, mtime_ns, doc_id])


def touch(conn, doc_id: int, size: int, mtime_ns: int) -> None:
    """The same content under a new size or mtime."""
    conn.execute("UPDATE documents SET size=?, mtime_ns=? WHERE id=?", [size, mtime_ns, doc_id])


def upsert_document(conn, values: Sequence) -> int:
    """Insert or replace a document row by path; ``values`` = (path, path_bytes, size,
    mtime_ns, sha256, kind, status, error, chunks, cut_chunks, encoding, indexed_at). Its id."""
    conn.execute(
        "INSERT INTO documents(path, path_bytes, size, mtime_ns, sha256, kind, status, error, chunks, "
        "cut_chunks, encoding, indexed_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(path) DO UPDATE "
        "SET path_bytes=excluded.path_bytes, size=excluded.size, mtime_ns=excluded.mtime_ns, "
        "sha256=excluded.sha256, kind=excluded.kind, status=excluded.status, error=excluded.error, "
        "chunks=excluded.chunks, cut_chunks=excluded.cut_chunks, encoding=excluded.encoding, "
        "indexed_at=excluded.indexed_at", list(values))
    return conn.execute("SELECT id FROM documents WHERE path=?", [values[0]]).fetchone()[0]


def drop_chunks(conn, doc_id: int) -> list[int]:
    """Delete a document's chunks; their ids (their vectors go too)."""
    removed = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE doc_id=?", [doc_id])]
    conn.execute("DELETE FROM chunks WHERE doc_id=?", [doc_id])
    return removed


def insert_chunks(conn, doc_id: int, rows: Sequence[tuple]) -> list[int]:
    """A document's chunks, ``rows`` = (ordinal, text, start, end, page, line, tokens, cut, lang,
    section); their new ids in ordinal order."""
    conn.executemany('INSERT INTO chunks(doc_id, ordinal, text, start, "end", page, line, tokens, cut, lang, '
                     "section) VALUES (?,?,?,?,?,?,?,?,?,?,?)", [(doc_id, *r) for r in rows])
    if not rows:
        return []
    return [r[0] for r in conn.execute("SELECT id FROM chunks WHERE doc_id=? ORDER BY ordinal", [doc_id])]


def delete_documents(execute: Query, doc_ids: Sequence[int]) -> list[int]:
    """Delete documents (their chunks cascade) inside the caller's transaction; the chunk ids removed."""
    removed: list[int] = []
    for i in range(0, len(doc_ids), 500):
        part = list(doc_ids[i : i + 500])
        removed += [r[0] for r in execute(f"SELECT id FROM chunks WHERE doc_id IN ({_marks(len(part))})", part)]
        execute(f"DELETE FROM documents WHERE id IN ({_marks(len(part))})", part)  # cascades
    return removed


def chunks_missing_from(q: Query, space: str, limit: int) -> list[tuple[int, str]]:
    """(id, text) of the first ``limit`` chunks ``space`` does not hold."""
    return list(q("SELECT c.id, c.text FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM space_members m "
                  "WHERE m.space = ? AND m.chunk_id = c.id) ORDER BY c.id LIMIT ?", [space, limit]))


def chunks_without_language(q: Query, limit: int) -> list[tuple[int, str]]:
    """(id, text) of the first ``limit`` chunks stored before ``chunks.lang`` existed."""
    return list(q("SELECT id, text FROM chunks WHERE lang IS NULL ORDER BY id LIMIT ?", [limit]))


def set_languages(conn, pairs: Iterable[tuple[str | None, int]]) -> None:
    """``chunks.lang`` for (lang, id) pairs."""
    conn.executemany("UPDATE chunks SET lang = ? WHERE id = ?", list(pairs))

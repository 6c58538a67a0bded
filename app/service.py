"""The JSON answers every front end gives, each made by one function, so a change to what a
hit or a status holds reaches them all: ``hefsearch search --json``, ``similar --json``,
``status --json``, the HTTP API and the MCP tools.

:class:`LibraryService` answers requests from outside (the server, the MCP tools), one request
type per operation (the server's table: :mod:`hefsearch.serve.operations`): it checks them against
:class:`Limits` (k, query length, ids per request, concurrent work) and raises a
:class:`~hefsearch.base.errors.HefsearchError` for anything wrong, whose class carries its HTTP
status (:class:`NoSuchItem` 404, :class:`ServiceError` as given, others 400). It is
read-only: text comes from the library's database, never from the disk, and a document or hit
outside the library's folders (:func:`~hefsearch.app.folders.library_folders`) is neither shown
nor returned. Each answer names the backend that encoded the query and how fresh the library is.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from hefsearch.base.errors import HefsearchError, NotFound
from hefsearch.index import documents
from hefsearch.search.searcher import MAX_QUERY_CHARS
from hefsearch.search.request import SearchRequest
from hefsearch.search.snippets import SEMANTIC_BUDGET_MS

from .folders import library_folders, under_roots
from .requests import CompareRequest, GetRequest, SimilarRequest

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.index.library import LibraryStatus
    from hefsearch.search import SearchResult

    from .freshness import Freshness
    from .session import LibrarySession


@dataclass(frozen=True)
class Limits:
    """What one request may ask for."""

    max_k: int = 100
    max_query_chars: int = MAX_QUERY_CHARS
    #: chunk or document ids per ``get``
    max_ids: int = 50
    #: requests being answered or waiting at once; more get 503 (busy)
    max_pending: int = 16
    #: characters of a document's text in one answer
    max_text_chars: int = 200_000
    #: bytes of a request body (the server refuses larger ones before reading them)
    max_body_bytes: int = 64 * 1024
    #: ms that meaning-based snippets may add to an answer (the rest keep their stand-in)
    snippet_budget_ms: float = SEMANTIC_BUDGET_MS


#: the largest id SQLite stores (a larger one is no id of the library)
MAX_ID = 2**63 - 1

class ServiceError(HefsearchError):
    """A request that cannot be answered as asked; ``http_status`` is its HTTP status (400
    unless given: 413 too large, 503 busy or unreachable, 500 the server's fault)."""

    title = "request refused"

    def __init__(self, message: str, hint: str | None = None, *, status: int = 400):
        super().__init__(message, hint)
        self.http_status = status

    @property
    def status(self) -> int:
        return self.http_status

    def to_dict(self) -> dict:
        return error_json(self)


class NoSuchItem(NotFound):
    """An id that is no chunk or document of the library, or one outside its folders (404)."""


def error_json(error: HefsearchError) -> dict:
    """An error as the server answers it (HTTP and MCP): ``{"error": {"status", "message", "hint"}}``."""
    return {"error": {"status": error.http_status, "message": error.message, "hint": error.hint}}


# -- the shared answers ------------------------------------------------------------------------
def document_title(path: str, kind: str, text: str) -> str:
    """What a reader is titled: a mail message by its subject (its stored path ends in a key
    derived from the Message-ID, which names nothing for a person), any other file by its name."""
    from hefsearch.readers.extract_mail import subject_of
    from hefsearch.readers.formats import CONTAINER_KINDS

    subject = subject_of(text) if kind in CONTAINER_KINDS else None
    return subject or path.rsplit("/", 1)[-1]



def search_json(result: "SearchResult", fresh: "Freshness | None" = None) -> dict:
    """A search (or similar) result as every front end returns it: the result's own fields
    (query, mode, space, backend, notice, timings, hits), the filters it answers under and the
    library's freshness."""
    data = result.to_dict()
    if not result.filters.empty:
        data["filters"] = result.filters.to_dict()
    if fresh is not None:
        data["library"] = fresh.to_dict()
    return data


def status_json(st: "LibraryStatus", fresh: "Freshness | None" = None) -> dict:
    """``hefsearch status --json`` (and the server's /status)."""
    from hefsearch.index.crawl import SECRET_FILE_PATTERNS

    d = asdict(st)
    d["secret_file_rule"] = list(SECRET_FILE_PATTERNS)
    d["failures"] = [{"path": p, "reason": r} for p, r in st.failures]
    d["notes"] = [{"path": p, "reason": r} for p, r in st.notes]
    d["spaces"] = [{**asdict(s), "complete": s.count == st.chunks} for s in st.spaces]
    if fresh is not None:
        d["freshness"] = fresh.to_dict()
    return d


_CHUNK_KEYS = documents.CHUNK_ROW_KEYS


def chunk_json(row: tuple) -> dict:
    d = dict(zip(_CHUNK_KEYS, row))
    d["lang"] = d["lang"] or None
    return d


class LibraryService:
    """Requests from outside, answered from one :class:`~hefsearch.app.session.LibrarySession`."""

    def __init__(self, session: "LibrarySession", limits: Limits | None = None):
        self.session = session
        self.limits = limits or Limits()
        self._slots = threading.BoundedSemaphore(self.limits.max_pending)

    # -- guards ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _busy(self):
        """One of ``max_pending`` slots, or 503 at once (nothing queues without bound)."""
        if not self._slots.acquire(blocking=False):
            raise ServiceError("The server is busy answering other requests.", "Try again in a moment.",
                               status=503)
        try:
            yield
        finally:
            self._slots.release()

    def _k(self, k: int) -> int:
        """``k`` (a whole number from 1, checked where the request was made) within the limit."""
        if k > self.limits.max_k:
            raise ServiceError(f"k must be between 1 and {self.limits.max_k} (got {k}).")
        return k

    def _check_search(self, request: SearchRequest) -> SearchRequest:
        """What the server limits: the request's text, the query's length, ``k``, the
        snippets' time (the request's mode, k and snippets were checked when it was made)."""
        check_text(query=request.query, space=request.space)
        if len(request.query) > self.limits.max_query_chars:
            raise ServiceError(f"The query is {len(request.query):,} characters long; at most "
                               f"{self.limits.max_query_chars:,} are allowed.", status=413)
        self._k(request.k)
        budget = min(request.snippet_budget_ms or self.limits.snippet_budget_ms, self.limits.snippet_budget_ms)
        return replace(request, snippet_budget_ms=budget)

    def _roots(self) -> list:
        return library_folders(self.session.library).recorded

    def _inside(self, result: "SearchResult") -> "SearchResult":
        """Hits outside the library's folders (documents of a folder no longer indexed) dropped."""
        roots = self._roots()
        if roots:
            result.hits = [h for h in result.hits if under_roots(h.path, roots)]
            for rank, hit in enumerate(result.hits, 1):
                hit.rank = rank
        return result

    # -- answers -----------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> dict:
        """The JSON of ``hefsearch search --json`` for ``request``; its meaning-based snippets
        (``request.snippets``) within ``Limits.snippet_budget_ms`` at most: hits that do not
        fit keep the quick one."""
        request = self._check_search(request)
        with self._busy():
            result = self.session.search(request)
        return search_json(self._inside(result), self.session.freshness())

    def compare(self, request: CompareRequest) -> dict:
        """The same query in two vector spaces side by side (the TUI's compare view): by default
        the library's quantised space (NPU, its simulation, or CPU int8) and FP32, each chunk as
        its encoder ranks it, with overlap@k and RBO. ``request.rerank``: let the NPU side be
        re-ranked with FP32 vectors (default: its own ranking, what 8 bits cost)."""
        from .spaces import compare_fix, pick_compare_spaces, space_label

        search = self._check_search(request.search)
        check_text(spaces=list(request.spaces or ()))
        infos = {s.name: s for s in self.session.library.spaces()}
        if request.spaces:
            pair = tuple(request.spaces)
            unknown = [name for name in pair if name not in infos]
            if len(pair) != 2 or unknown:
                raise ServiceError(f"Compare needs two of this library's spaces (got {', '.join(pair)}).",
                                   f"Its spaces: {', '.join(infos) or 'none'}.")
        else:
            pair = pick_compare_spaces(infos.values())
            if pair is None:
                raise ServiceError("This library has no NPU (or 8-bit) space next to its FP32 space to compare.",
                                   "Give it one: " + compare_fix(list(infos), str(self.session.library_path)))
        with self._busy():
            result = self.session.compare(replace(request, search=search, spaces=pair))
        for side in (result.left, result.right):
            self._inside(side)
        data = result.to_dict()
        data["sides"] = [{"space": name, "label": space_label(infos[name])} for name in pair]
        data["library"] = self.session.freshness().to_dict()
        if not search.filters.empty:
            data["filters"] = search.filters.to_dict()
        return data

    def similar(self, request: SimilarRequest) -> dict:
        """Chunks of other documents like a chunk or a document, as JSON (``similar --json``)."""
        check_text(space=request.space)
        self._check_visible(chunk_id=request.chunk_id, doc_id=request.doc_id)
        self._k(request.k)
        with self._busy():
            result = self.session.similar(request)
        return search_json(self._inside(result), self.session.freshness())

    def get(self, request: GetRequest) -> dict:
        """The text and location of chunks (``123``) and documents (``"doc:45"``), in the order
        asked. An id the library does not have, or outside its folders, is refused (404)."""
        ids = list(request.ids)
        check_text(ids=ids)
        if not ids:
            raise ServiceError("No ids given.", "Pass the chunk_id of search hits, or 'doc:ID' for a document.")
        if len(ids) > self.limits.max_ids:
            raise ServiceError(f"At most {self.limits.max_ids} ids per request (got {len(ids)}).", status=413)
        items = []
        with self._busy():
            for raw in ids:
                kind, n = parse_id(raw)
                items.append(self.document(n) if kind == "doc" else self.chunk(n))
        return {"items": items, "library": self.session.freshness().to_dict()}

    def chunk(self, chunk_id: int) -> dict:
        row = documents.chunk_row(self.session.library.query, chunk_id)
        if row is None or not self._visible(row[2]):
            raise _not_found("chunk", chunk_id)
        return {"type": "chunk", **chunk_json(row)}

    def document(self, doc_id: int) -> dict:
        lib = self.session.library
        r = documents.document_row(lib.query, doc_id)
        if r is None or not self._visible(r[1]):
            raise _not_found("document", doc_id)
        chunks = [chunk_json(c) for c in documents.chunk_rows_of(lib.query, r[0])]
        text, cut = join_chunks(chunks, self.limits.max_text_chars)
        from hefsearch.search.filters import iso

        return {"type": "document", "id": r[0], "path": r[1], "title": document_title(r[1], r[2], text),
                "kind": r[2], "size": r[3],
                "modified": iso(r[4] / 1e9), "status": r[5], "indexed_at": r[7],
                "langs": sorted({c["lang"] for c in chunks if c["lang"]}),
                "chunks": [{k: c[k] for k in ("id", "ordinal", "page", "line", "start", "end", "lang")}
                           for c in chunks],
                "text": text, "text_truncated": cut}

    def status(self) -> dict:
        """``status --json`` plus what a front end shows beside it: the default space, the
        encoder open for it ("backend", None until a query opened one), documents per kind and
        chunks per language (the web page's filters offer these)."""
        d = status_json(self.session.status(), self.session.freshness())
        d["default_space"] = self.session.default_space()
        d["backend"] = self.session.backend_label(d["default_space"])
        q = self.session.library.query
        d["kinds"] = documents.kind_counts(q)
        d["langs"] = documents.lang_counts(q)
        return d

    def health(self) -> dict:
        fresh = self.session.freshness()
        return {"ok": True, "library": str(self.session.library_path), "default_space": self.session.default_space(),
                "freshness": fresh.to_dict()}

    # -- helpers -----------------------------------------------------------------------------
    def _visible(self, path: str) -> bool:
        roots = self._roots()
        return not roots or under_roots(path, roots)

    def _check_visible(self, *, chunk_id=None, doc_id=None) -> None:
        lib = self.session.library
        if chunk_id is not None:
            place = documents.chunk_place(lib.query, _int(chunk_id))
            path, what, n = (place[1] if place else None), "chunk", chunk_id
        elif doc_id is not None:
            path, what, n = documents.document_path(lib.query, _int(doc_id)), "document", doc_id
        else:
            raise ServiceError("Say which chunk (id) or document (doc) to find similar ones for.")
        if path is None or not self._visible(path):
            raise _not_found(what, n)


def parse_id(raw: Any) -> tuple[str, int]:
    """``123`` / ``"123"`` / ``"chunk:123"`` -> ("chunk", 123); ``"doc:45"`` -> ("doc", 45)."""
    text = str(raw).strip()
    kind, sep, number = text.partition(":")
    if not sep:
        kind, number = "chunk", text
    kind = {"chunk": "chunk", "c": "chunk", "doc": "doc", "document": "doc", "d": "doc"}.get(kind.lower())
    if kind is None or not (number.isascii() and number.isdigit()) or int(number) > MAX_ID:
        raise NoSuchItem(f"{text[:80]!r} is not an id of this library.",
                         "Ids are the chunk_id of search hits (e.g. 123) or 'doc:ID' for a whole "
                         "document; paths are never read.")
    return kind, int(number)


def _int(value) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        n = int(value)
    except (TypeError, ValueError):
        raise NoSuchItem(f"{str(value)[:80]!r} is not an id.") from None
    if not 0 <= n <= MAX_ID:
        raise _not_found("chunk or document", n)
    return n


def check_text(**given) -> None:
    """Refuse text that is not valid Unicode (a lone surrogate, from a JSON escape such as
    ``\\ud800``): it can be neither searched for nor stored, nor named in an answer."""
    for name, value in given.items():
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, str):
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    raise ServiceError(f"'{name}' is not valid Unicode text (it holds a lone surrogate).",
                                       "Send text as UTF-8.") from None


def _not_found(what: str, n) -> "NoSuchItem":
    return NoSuchItem(f"The library has no {what} {n}.",
                      "Take the id from a search result (chunk_id) or a document id (doc:ID).")


def join_chunks(chunks: list[dict], limit: int) -> tuple[str, bool]:
    """A document's text from its chunks' spans (chunks overlap; each is ``text[start:end]`` of
    the extracted text), at most ``limit`` characters."""
    parts, covered = [], 0
    for c in chunks:
        start, text = c["start"], c["text"]
        if start < covered:
            text = text[covered - start:]
        elif parts and start > covered:
            parts.append("\n")
        parts.append(text)
        covered = max(covered, c["end"])
    text = "".join(parts)
    return (text[:limit], True) if len(text) > limit else (text, False)

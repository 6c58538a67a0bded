"""The operations the server answers, one row each (:data:`OPERATIONS`): the service method
that answers it, its body (:mod:`.schema`), its HTTP routes, and, for an MCP tool, the tool's
description. The HTTP routes (:mod:`.http`), the MCP tools (:mod:`.mcp`) and the remote client
(:mod:`.remote`) are made from this table, so an operation is added as a method of
:class:`~hefsearch.app.service.LibraryService`, a body, and a row here (with its CLI command
and tests). Routes that do not fit a row (a path parameter, a streamed archive) are written
in :mod:`.http` by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from pydantic import BaseModel

from .schema import Body, CompareBody, GetBody, SearchAnswer, SearchBody, SimilarBody


@dataclass(frozen=True)
class Operation:
    #: the service's method and the MCP tool's name
    name: str
    #: the request body (None: the operation takes no request)
    body: Optional[type[Body]]
    #: the HTTP methods of its route at ``path``; the remote client uses the first
    methods: tuple[str, ...]
    path: str
    #: the route's description (OpenAPI)
    summary: str
    #: the MCP tool's description (None: not a tool)
    tool: Optional[str] = None
    #: the answer's model for the OpenAPI schema (None: any JSON object)
    answer: Optional[type[BaseModel]] = None


SEARCH_DOC = """Search the user's documents. mode: hybrid (default: meaning, boosted by exact words),
vector (meaning only, any language), keyword (exact words). Filters: path glob
('*/invoices/*'), type (['pdf','docx']), lang (['de']), since/until (2024-03-01 or 7d).
Returns hits with chunk_id, score, path, page, line, snippet and text, the backend
that encoded the query and the library's age. snippets: meaning (default) or quick.
rerank: FP32 re-rank depth or "off" (default: on where FP32 vectors exist); the
answer's "rerank" says whether and how deep it re-ranked."""
GET_DOC = """Full text and location of chunks by id (the chunk_id of search hits, e.g. "123") or of
whole documents ("doc:ID"). Ids the library does not have are refused."""
SIMILAR_DOC = """Passages of other documents most like the chunk chunk_id (from a search hit): "more
like this". Same filters as search. ``id`` is accepted too (the HTTP API's name); ``doc``
asks for passages like a whole document."""
STATUS_DOC = """What the library holds (documents, chunks, vector spaces, failures) and how fresh it is
(last sync; whether a watcher keeps it current)."""



OPERATIONS: tuple[Operation, ...] = (
    Operation("search", SearchBody, ("POST", "GET"), "/search",
              "Search: the same JSON as ``hefsearch search --json`` (GET parameters or a JSON body, the "
              "same fields).", SEARCH_DOC, SearchAnswer),
    Operation("get", GetBody, ("POST",), "/get", "Several chunks and documents at once.", GET_DOC),
    Operation("similar", SimilarBody, ("GET",), "/similar",
              "Chunks of other documents most like chunk ``id`` (``chunk_id``, as hits and MCP name it, "
              "works too) or document ``doc``.", SIMILAR_DOC, SearchAnswer),
    Operation("compare", CompareBody, ("GET",), "/compare",
              "The query in two vector spaces side by side (default: the NPU or 8-bit space and FP32): "
              "each side's hits, overlap@k, RBO and the chunks only one side found."),
    Operation("status", None, ("GET",), "/status", "What the library holds and how fresh it is.", STATUS_DOC),
    Operation("health", None, ("GET",), "/health", "Liveness, the default space and the library's freshness."),
)


def answer(service, operation: Operation, body: Optional[Body]) -> dict:
    """``service``'s answer to ``operation`` asked with ``body``."""
    method = getattr(service, operation.name)
    return method() if operation.body is None else method(body.to_request())

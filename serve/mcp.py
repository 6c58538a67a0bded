"""The MCP server (the official ``mcp`` SDK's ``MCPServer``): tools ``search``, ``get``,
``similar`` and ``status`` over a :class:`~hefsearch.app.service.LibraryService` (this process
holds the library) or a :class:`~hefsearch.serve.remote.RemoteService` (a running
``hefsearch serve`` answers). The same server object is served over stdio (``hefsearch mcp``,
for desktop assistants) and over streamable HTTP at ``/mcp`` of ``hefsearch serve``.

Every tool answers with the JSON the HTTP API gives, as one text block, (``search_json`` and friends), which names
the backend that encoded the query and the library's age. The service's blocking calls run in
a worker thread, so the event loop keeps serving other sessions. A refused request (bad input,
an id the library does not have, a busy server) comes back as a tool error whose text is the
HTTP API's error JSON, ``{"error": {"status", "message", "hint"}}`` (4xx: the request's
fault, 5xx: the server's), never as a traceback; arguments that do not fit the tool's schema
(``k: true``) are refused by the SDK with its validation message. The tools' arguments are
the fields of the HTTP API's bodies (:mod:`.schema`), so both take the same requests.
"""

from __future__ import annotations

import inspect
import json
import logging
from typing import TYPE_CHECKING

from pydantic import ValidationError

from hefsearch.app.service import ServiceError, error_json
from hefsearch.base.errors import HefsearchError

from .schema import GetBody, SearchBody, SimilarBody

if TYPE_CHECKING:  # pragma: no cover
    from pydantic import BaseModel

    from hefsearch.app.api import LibraryAPI

log = logging.getLogger("hefsearch.serve")

INSTRUCTIONS = """\
hefsearch searches the user's own documents (PDF, Word, Markdown, text, HTML) by meaning, in
any language, and by exact words. Use `search` first; its hits carry `chunk_id`, and `get` returns
the full text of chunks (ids) or whole documents ("doc:ID"). `similar` finds passages of other
documents like a given chunk. `status` tells what the library holds and how fresh it is.
Filters: path (glob), type (pdf, docx, md, ...), lang (de, en, ...), since/until (a date or an
age such as 7d)."""


def make_mcp(service: "LibraryAPI", *, name: str = "hefsearch"):
    """An ``MCPServer`` whose tools call ``service`` (``search``, ``similar``, ``get``, ``status``):
    a :class:`~hefsearch.app.service.LibraryService` or a :class:`~hefsearch.serve.remote.RemoteService`.
    Each tool's arguments are its request body's fields (:mod:`.schema`), flat, as the HTTP API's."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    from hefsearch.base.versions import hefsearch_version

    server = MCPServer(name, instructions=INSTRUCTIONS, version=hefsearch_version(), log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)
    tools = {
        "search": (SearchBody, lambda body: service.search(body.to_request()), SEARCH_DOC),
        "get": (GetBody, lambda body: service.get(body.to_request()), GET_DOC),
        "similar": (SimilarBody, lambda body: service.similar(body.to_request()), SIMILAR_DOC),
        "status": (None, lambda body: service.status(), STATUS_DOC),
    }
    for tool_name, (model, answer, doc) in tools.items():
        server.add_tool(tool_function(tool_name, model, answer), name=tool_name, description=doc,
                        annotations=read_only, structured_output=False)
    return server


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


def tool_signature(model: "type[BaseModel] | None") -> inspect.Signature:
    """The tool's flat arguments: one keyword per field of ``model``, with its type, default and
    description (the SDK builds the tool's input schema from this signature)."""
    from typing import Annotated

    from pydantic import Field

    params = []
    for field_name, info in (model.model_fields if model is not None else {}).items():
        annotation = Annotated[(info.annotation, *info.metadata, Field(description=info.description))]
        default = inspect.Parameter.empty if info.is_required() else info.default
        params.append(inspect.Parameter(field_name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=annotation))
    return inspect.Signature(params, return_annotation=str)


def tool_function(name: str, model, answer):
    """An async tool taking ``model``'s fields as keyword arguments: they are checked as a body
    of that model and ``answer(body)`` runs in a worker thread."""

    async def tool(**arguments) -> str:
        return await _tool_call(lambda: answer(None if model is None else model(**arguments)))

    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = tool_signature(model)
    return tool


async def _tool_call(work):
    """The service's answer as JSON text (one text block: the answers are JSON already, and
    structured output would serialise and validate each answer twice), or a tool error whose
    text is the error JSON."""
    import anyio
    from mcp.types import CallToolResult, TextContent

    def failed(error: HefsearchError) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=json.dumps(error_json(error)))], is_error=True)

    try:
        answer = await anyio.to_thread.run_sync(work)
    except HefsearchError as e:
        return failed(e)
    except ValidationError as e:  # a body the SDK's checks let through (the same fields)
        return failed(ServiceError(f"Bad arguments: {e.errors()[0].get('msg')}."))
    except Exception:
        log.exception("an MCP tool call failed")
        return failed(ServiceError("The server failed to answer this call (its log has the details).",
                                   "This is a fault of the server, not of the call: please report it.",
                                   status=500))
    return json.dumps(answer, ensure_ascii=False)

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

from .operations import OPERATIONS, answer

if TYPE_CHECKING:  # pragma: no cover
    from pydantic import BaseModel


log = logging.getLogger("hefsearch.serve")

INSTRUCTIONS = """\
hefsearch searches the user's own documents (PDF, Word, Markdown, text, HTML) by meaning, in
any language, and by exact words. Use `search` first; its hits carry `chunk_id`, and `get` returns
the full text of chunks (ids) or whole documents ("doc:ID"). `similar` finds passages of other
documents like a given chunk. `status` tells what the library holds and how fresh it is.
Filters: path (glob), type (pdf, docx, md, ...), lang (de, en, ...), since/until (a date or an
age such as 7d)."""


def make_mcp(service, *, name: str = "hefsearch"):
    """An ``MCPServer`` whose tools (the rows of :data:`~.operations.OPERATIONS` with a tool
    description) call ``service``: a :class:`~hefsearch.app.service.LibraryService` or a
    :class:`~hefsearch.serve.remote.RemoteService`. Each tool's arguments are its request body's
    fields (:mod:`.schema`), flat, as the HTTP API's."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    from hefsearch.base.versions import hefsearch_version

    server = MCPServer(name, instructions=INSTRUCTIONS, version=hefsearch_version(), log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)
    for op in OPERATIONS:
        if op.tool is not None:
            server.add_tool(tool_function(op.name, op.body, lambda body, op=op: answer(service, op, body)),
                            name=op.name, description=op.tool, annotations=read_only, structured_output=False)
    return server


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

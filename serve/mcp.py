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
(``k: true``) are refused by the SDK with its validation message.
"""

from __future__ import annotations

import functools
import json
import logging

from hefsearch.base.errors import HefsearchError

from .schema import WholeNumber  # noqa: F401 - named in the tools' signatures (read by the SDK)

log = logging.getLogger("hefsearch.serve")

INSTRUCTIONS = """\
hefsearch searches the user's own documents (PDF, Word, Markdown, text, HTML) by meaning, in
any language, and by exact words. Use `search` first; its hits carry `chunk_id`, and `get` returns
the full text of chunks (ids) or whole documents ("doc:ID"). `similar` finds passages of other
documents like a given chunk. `status` tells what the library holds and how fresh it is.
Filters: path (glob), type (pdf, docx, md, ...), lang (de, en, ...), since/until (a date or an
age such as 7d)."""


def make_mcp(service, *, name: str = "hefsearch"):
    """An ``MCPServer`` whose tools call ``service`` (``search``, ``similar``, ``get``, ``status``)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    from hefsearch.base.versions import hefsearch_version

    server = MCPServer(name, instructions=INSTRUCTIONS, version=hefsearch_version(), log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)

    call = _tool_call
    @server.tool(annotations=read_only, structured_output=False)
    async def search(query: str, k: WholeNumber = 10, mode: str = "hybrid", path: str | None = None,
                     type: list[str] | str | None = None, lang: list[str] | str | None = None,
                     since: str | None = None, until: str | None = None, space: str | None = None,
                     snippets: str = "meaning", rerank: int | str | None = None) -> str:
        """Search the user's documents. mode: hybrid (default: meaning, boosted by exact words),
        vector (meaning only, any language), keyword (exact words). Filters: path glob
        ('*/invoices/*'), type (['pdf','docx']), lang (['de']), since/until (2024-03-01 or 7d).
        Returns hits with chunk_id, score, path, page, line, snippet and text, the backend
        that encoded the query and the library's age. snippets: meaning (default) or quick.
        rerank: FP32 re-rank depth or "off" (default: on where FP32 vectors exist); the
        answer's "rerank" says whether and how deep it re-ranked."""
        return await call(service.search, query, k=k, mode=mode, path=path, type=type, lang=lang,
                          since=since, until=until, space=space, snippets=snippets, rerank=rerank)

    @server.tool(annotations=read_only, structured_output=False)
    async def get(ids: list[str | int]) -> str:
        """Full text and location of chunks by id (the chunk_id of search hits, e.g. "123") or of
        whole documents ("doc:ID"). Ids the library does not have are refused."""
        return await call(service.get, ids)

    @server.tool(annotations=read_only, structured_output=False)
    async def similar(chunk_id: WholeNumber | None = None, k: WholeNumber = 10, path: str | None = None,
                      type: list[str] | str | None = None, lang: list[str] | str | None = None,
                      since: str | None = None, until: str | None = None, id: WholeNumber | None = None) -> str:
        """Passages of other documents most like the chunk chunk_id (from a search hit): "more
        like this". Same filters as search. ``id`` is accepted too (the HTTP API's name)."""
        return await call(service.similar, chunk_id if chunk_id is not None else id, k=k, path=path, type=type,
                          lang=lang, since=since, until=until)

    @server.tool(annotations=read_only, structured_output=False)
    async def status() -> str:
        """What the library holds (documents, chunks, vector spaces, failures) and how fresh it is
        (last sync; whether a watcher keeps it current)."""
        return await call(service.status)

    return server


async def _tool_call(method, *args, **kwargs):
    """The service's answer as JSON text (one text block: the answers are JSON already, and
    structured output would serialise and validate each answer twice), or a tool error whose
    text is the error JSON."""
    import anyio
    from mcp.types import CallToolResult, TextContent

    from hefsearch.app.service import ServiceError

    def failed(error: ServiceError) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=json.dumps(error.to_dict()))], is_error=True)

    try:
        answer = await anyio.to_thread.run_sync(functools.partial(method, *args, **kwargs))
    except ServiceError as e:
        return failed(e)
    except HefsearchError as e:
        return failed(ServiceError(e.message, e.hint, status=getattr(e, "status", 400)))
    except Exception:
        log.exception("an MCP tool call failed")
        return failed(ServiceError("The server failed to answer this call (its log has the details).",
                                   "This is a fault of the server, not of the call: please report it.",
                                   status=500))
    return json.dumps(answer, ensure_ascii=False)

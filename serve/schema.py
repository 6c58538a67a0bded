"""Request and answer models of the HTTP API and the MCP tools (one schema for both), for
validation and the OpenAPI schema; a body's ``to_request()`` is the one way it becomes the
application's request. Answers are sent as the service makes them (``search_json`` ...): the
answer models document the known fields and allow more, so a field the search API adds reaches
every client unchanged."""

import functools
from typing import Annotated, Any, ClassVar, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from hefsearch.app.requests import CompareRequest, GetRequest, SimilarRequest
from hefsearch.app.searching import check_query, make_filters, parse_depth
from hefsearch.app.service import check_text
from hefsearch.search.filters import Filters
from hefsearch.search.request import SearchRequest


def _not_a_bool(value: Any) -> Any:
    """``true`` is not a number of hits (pydantic would take it as 1)."""
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true/false")
    return value


#: a whole number that is not a JSON boolean
WholeNumber = Annotated[int, BeforeValidator(_not_a_bool)]


def _listed(value: Any) -> Any:
    """One name is a list of one (``"pdf"`` as ``["pdf"]``; a comma-separated one is split later)."""
    return [value] if isinstance(value, str) else value


def _as_text(value: Any) -> Any:
    """A JSON ``true``/``false`` as the text a query string carries ("true", "false"), so a body,
    GET parameters and MCP arguments are read by one rule (pydantic took ``true`` as depth 1)."""
    return str(value).lower() if isinstance(value, bool) else value


#: a re-rank depth or a word ("off"), read as :func:`~hefsearch.app.searching.parse_depth` reads text
Depth = Annotated[Optional[Union[int, str]], BeforeValidator(_as_text)]


#: file types or languages: a list, or one name
Names = Annotated[Optional[list[str]], BeforeValidator(_listed)]


class Body(BaseModel):
    """A request body: its fields, checked, become the application's request by
    ``to_request()``; :meth:`fields_of` is the way back, derived from the fields."""

    model_config = ConfigDict(extra="forbid")
    #: body field -> where the request holds it, where the names differ (dotted: inside a
    #: part; None: another name of a field already given)
    REQUEST_NAMES: ClassVar[dict[str, Optional[str]]] = {}
    #: where the request holds its filters (None: it has none)
    FILTERS_AT: ClassVar[Optional[str]] = None

    @classmethod
    def fields_of(cls, request) -> dict:
        """The fields that ``to_request()`` reads back into ``request`` (what the remote client
        sends); those without a value left out."""
        filters = filter_fields(_at(request, cls.FILTERS_AT)) if cls.FILTERS_AT else {}
        out = {}
        for name, spec in cls.model_fields.items():
            where = cls.REQUEST_NAMES.get(name, name)
            value = filters.get(name) if name in filters else None if where is None else _at(request, where)
            value = list(value) if isinstance(value, tuple) else value
            if value not in (None, []) and (spec.is_required() or value != spec.default):
                out[name] = value
        return out


def _at(obj, dotted: str):
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


class FilterFields(Body):
    """The filters of a search or a "similar", as every front end names them."""

    FILTERS_AT = "filters"
    path: Optional[str] = Field(None, description="Path glob, e.g. '*/invoices/*' or '*.pdf'.")
    type: Names = Field(None, description="File types: pdf, docx, md, txt, html, ...")
    lang: Names = Field(None, description="Chunk languages (ISO 639-1): de, en, ...")
    since: Optional[str] = Field(None, description="Modified at or after: 2024-03-01, 2024-03-01T14:00, 7d.")
    until: Optional[str] = Field(None, description="Modified before (as since).")

    def filters(self) -> Filters:
        """The filters, checked (a date or type that cannot be read is a 400 error)."""
        check_text(**self.model_dump())  # before parsing: an error must be able to quote it
        return make_filters(path_glob=self.path, types=self.type, langs=self.lang, since=self.since,
                            until=self.until)


class SearchBody(FilterFields):
    REQUEST_NAMES = {"rerank": "rerank_depth"}

    query: str = Field(..., description="What to look for (any language).")
    k: WholeNumber = Field(10, description="Number of hits (1 to the server's --max-k, default 100).")
    mode: str = Field("hybrid", description="hybrid, vector or keyword.")
    space: Optional[str] = Field(None, description="Vector space (default: the library's default).")
    snippets: str = Field("meaning", description="meaning: the sentence closest in meaning (as hefsearch "
                                                 "search); quick: from the query's words only (faster).")
    rerank: Depth = Field(None, description="FP32 re-rank depth of an 8-bit space's candidates, or "
                                                    "'off' (default: 30 where FP32 vectors can re-score the "
                                                    "space). The answer's 'rerank' says what was done.")

    def to_request(self) -> SearchRequest:
        """The one way a body (or GET parameters, or an MCP tool's arguments) becomes a search:
        text checked, an empty query refused, the rest checked by the request itself."""
        check_text(query=self.query, mode=self.mode, snippets=self.snippets)
        filters = self.filters()
        return SearchRequest(query=check_query(self.query), mode=self.mode, k=self.k, filters=filters,
                             space=self.space, rerank_depth=parse_depth(self.rerank), snippets=self.snippets)


class SimilarBody(FilterFields):
    REQUEST_NAMES = {"id": "chunk_id", "chunk_id": None, "doc": "doc_id"}

    id: Optional[WholeNumber] = Field(None, description="The chunk (chunk_id of a search hit).")
    chunk_id: Optional[WholeNumber] = Field(None, description="The chunk, as hits name it (same as id).")
    doc: Optional[WholeNumber] = Field(None, description="A whole document, by its id.")
    k: WholeNumber = Field(10, description="Number of hits.")
    space: Optional[str] = Field(None, description="Vector space (default: the library's default).")

    def to_request(self) -> SimilarRequest:
        return SimilarRequest(chunk_id=self.id if self.id is not None else self.chunk_id, doc_id=self.doc,
                              k=self.k, space=self.space, filters=self.filters())


class CompareBody(FilterFields):
    REQUEST_NAMES = {"query": "search.query", "k": "search.k", "mode": "search.mode", "space": "spaces"}
    FILTERS_AT = "search.filters"

    query: str = Field(..., description="What to look for (any language).")
    k: WholeNumber = Field(10, description="Number of hits per side.")
    mode: str = Field("vector", description="vector or hybrid (keyword ranks alike in every space).")
    space: Optional[list[str]] = Field(None, description="The two spaces (default: the NPU or 8-bit space and FP32).")
    rerank: bool = Field(False, description="Let the NPU side be re-ranked with FP32 vectors.")

    def to_request(self) -> CompareRequest:
        check_text(query=self.query, mode=self.mode, space=self.space)
        search = SearchRequest(query=check_query(self.query), mode=self.mode, k=self.k, filters=self.filters())
        return CompareRequest(search=search, spaces=tuple(self.space) if self.space else None, rerank=self.rerank)


class GetBody(Body):
    ids: list[Any] = Field(..., description="Chunk ids (123) or documents ('doc:45').")

    def to_request(self) -> GetRequest:
        return GetRequest(ids=tuple(self.ids))


def filter_fields(filters: Filters) -> dict:
    """``filters`` as the fields :meth:`FilterFields.filters` reads back into the same filters
    (a kind is a type too; dates in ISO 8601)."""
    given = filters.to_dict()
    types = [*given.get("types", ()), *given.get("kinds", ())]
    return {"path": given.get("path_glob"), "type": types or None, "lang": given.get("langs"),
            "since": given.get("since"), "until": given.get("until")}


@functools.lru_cache(maxsize=None)
def query_model(body: type[BaseModel]) -> type[BaseModel]:
    """``body`` for GET parameters: the same fields, and a parameter it does not know is ignored
    (as a query string's always were); one class per body."""
    return type(body.__name__.replace("Body", "Query"), (body,), {"model_config": ConfigDict(extra="ignore")})


class SearchAnswer(BaseModel):
    """The JSON of ``hefsearch search --json`` (more fields may follow)."""

    model_config = ConfigDict(extra="allow")
    query: str
    mode: str
    space: Optional[str] = None
    backend: Optional[str] = Field(None, description="The encoder that encoded the query.")
    notice: Optional[str] = None
    timings_ms: dict[str, float] = {}
    hits: list[dict[str, Any]] = Field(..., description="rank, chunk_id, score, path, page, line, start, end, "
                                                        "snippet, text, doc_kind, sources")
    library: dict[str, Any] = Field(..., description="Freshness: last_sync, age_s, watcher.")


class ErrorAnswer(BaseModel):
    error: dict[str, Any] = Field(..., description="status, message, hint")

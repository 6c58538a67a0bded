"""Request and answer models of the HTTP API, for validation and the OpenAPI schema. Answers are
sent as the service makes them (``search_json`` ...): the answer models document the known
fields and allow more, so a field the search API adds reaches every client unchanged."""

from typing import Annotated, Any, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def _not_a_bool(value: Any) -> Any:
    """``true`` is not a number of hits (pydantic would take it as 1)."""
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true/false")
    return value


#: a whole number that is not a JSON boolean
WholeNumber = Annotated[int, BeforeValidator(_not_a_bool)]


class SearchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(..., description="What to look for (any language).")
    k: WholeNumber = Field(10, description="Number of hits (1 to the server's --max-k, default 100).")
    mode: str = Field("hybrid", description="hybrid, vector or keyword.")
    space: Optional[str] = Field(None, description="Vector space (default: the library's default).")
    path: Optional[str] = Field(None, description="Path glob, e.g. '*/invoices/*' or '*.pdf'.")
    type: Optional[list[str]] = Field(None, description="File types: pdf, docx, md, txt, html, ...")
    lang: Optional[list[str]] = Field(None, description="Chunk languages (ISO 639-1): de, en, ...")
    since: Optional[str] = Field(None, description="Modified at or after: 2024-03-01, 2024-03-01T14:00, 7d.")
    until: Optional[str] = Field(None, description="Modified before (as since).")
    snippets: str = Field("meaning", description="meaning: the sentence closest in meaning (as hefsearch "
                                                 "search); quick: from the query's words only (faster).")
    rerank: Optional[Union[int, str]] = Field(None, description="FP32 re-rank depth of an 8-bit space's candidates, or "
                                                    "'off' (default: 30 where FP32 vectors can re-score the "
                                                    "space). The answer's 'rerank' says what was done.")


class GetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ids: list[Any] = Field(..., description="Chunk ids (123) or documents ('doc:45').")


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

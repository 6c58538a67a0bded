"""What a front end needs to ask for a search, in one place: the modes, the one check of a
query, filters from what people type (options, a filter line, request fields), the re-rank
depth, the kinds a filter accepts. The CLI, the TUI, the HTTP API and the MCP tools use these,
so a search is asked for the same way everywhere; the search layer answers it
(:class:`~hefsearch.search.request.SearchRequest`)."""

from __future__ import annotations

from hefsearch.readers.formats import KINDS, kind_families, type_names
from hefsearch.search.searcher import SearchError, prepare_query
from hefsearch.search.filters import Filters, make_filters, parse_filter_line
from hefsearch.search.rerank import parse_depth

__all__ = ["KINDS", "EmptyQuery", "check_query", "is_blank", "kind_families", "make_filters",
           "parse_depth", "parse_filter_line", "query_text", "type_names"]


class EmptyQuery(SearchError):
    """A query with nothing to search for, asked as a command or a request (a usage error)."""

    title = "empty query"


def query_text(query: str) -> str:
    """The query as it is searched: clean text, no surrounding blanks, at most the length
    searched; '' when nothing is left."""
    return prepare_query(query)[0]


def is_blank(query) -> bool:
    """Whether ``query`` has nothing to search for (the one test: :func:`check_query`, the TUI)."""
    return not isinstance(query, str) or not query_text(query)


def check_query(query, *, message: str = "The query is empty.",
                hint: str = "Give the words to look for in 'query'.") -> str:
    """``query`` when there is something to search for, else :class:`EmptyQuery` (exit code 2,
    HTTP 400) with ``message`` and ``hint`` as the front end words them."""
    if is_blank(query):
        raise EmptyQuery(message, hint)
    return query

"""One request schema for HTTP and MCP: the MCP tools' arguments are the fields of the HTTP
API's bodies (flat, as clients send them), the GET routes read the same models from their query
strings, and one method turns a body into the application's request."""

from __future__ import annotations

import anyio
import pytest

from hefsearch.app.requests import CompareRequest, GetRequest, SimilarRequest
from hefsearch.search.filters import Filters
from hefsearch.search.request import SearchRequest
from hefsearch.serve.schema import CompareBody, GetBody, SearchBody, SimilarBody


class _Recorder:
    """A LibraryAPI that answers with the request it was given."""

    def search(self, request):
        return {"request": repr(request)}

    def similar(self, request):
        return {"request": repr(request)}

    def get(self, request):
        return {"request": repr(request)}

    def compare(self, request):
        return {"request": repr(request)}

    def status(self):
        return {}

    def health(self):
        return {}


def _tools():
    from hefsearch.serve.mcp import make_mcp

    server = make_mcp(_Recorder())
    return server, {t.name: t for t in anyio.run(server.list_tools)}


def test_the_mcp_tools_take_the_fields_of_the_http_bodies():
    _, tools = _tools()
    for name, body in (("search", SearchBody), ("similar", SimilarBody), ("get", GetBody)):
        schema = tools[name].input_schema
        assert set(schema["properties"]) == set(body.model_fields), name
        assert set(schema.get("required", ())) == {f for f, i in body.model_fields.items() if i.is_required()}
    assert tools["search"].input_schema["properties"]["k"]["description"].startswith("Number of hits")
    assert tools["status"].input_schema["properties"] == {}


def test_a_tool_call_becomes_the_request_its_body_makes():
    server, _ = _tools()
    args = {"query": "Rechnung", "k": 3, "mode": "keyword", "type": "pdf", "lang": ["de"], "rerank": "off"}

    async def call():
        return await server.call_tool("search", args)

    result = anyio.run(call)
    expected = SearchBody(**args).to_request()
    assert not result.is_error and repr(expected) in result.content[0].text
    assert expected == SearchRequest("Rechnung", mode="keyword", k=3, rerank_depth=0, snippets="meaning",
                                     filters=Filters(types=("pdf",), langs=("de",)))


@pytest.mark.parametrize("body, request_", [
    (SearchBody, SearchRequest("Rechnung", mode="keyword", k=3, rerank_depth=0, snippets="quick", space="cpu-fp32",
                               filters=Filters(path_glob="*/2024/*", types=("pdf",), langs=("de",), since=1.7e9))),
    (SearchBody, SearchRequest("tax", snippets="meaning")),
    (SimilarBody, SimilarRequest(chunk_id=12, k=4, space="hef", filters=Filters(langs=("en",)))),
    (SimilarBody, SimilarRequest(doc_id=7)),
    (CompareBody, CompareRequest(SearchRequest("boiler", mode="hybrid", k=5, filters=Filters(types=("md",))),
                                 spaces=("hef", "cpu-fp32"), rerank=True)),
    (GetBody, GetRequest(ids=(3, "doc:4"))),
])
def test_the_remote_clients_fields_read_back_into_the_same_request(body, request_):
    """What :class:`RemoteService` sends (``fields_of``, from the body's own fields) is read by
    the server into the request the client was given, for a body and for GET parameters."""
    from hefsearch.serve.schema import query_model

    fields = body.fields_of(request_)
    assert body(**fields).to_request() == request_
    assert query_model(body)(**fields).to_request() == request_


def test_a_request_checks_its_mode_k_and_snippets_when_it_is_made():
    from hefsearch.search.request import BadRequest

    for bad in ({"mode": "fuzzy"}, {"k": 0}, {"k": True}, {"k": 2.5}, {"snippets": "slow"}):
        with pytest.raises(BadRequest) as e:
            SearchRequest("x", **bad)
        assert e.value.http_status == 400 and e.value.exit_code == 2
    with pytest.raises(BadRequest):
        SimilarRequest(chunk_id=1, k=0)


def test_the_get_routes_read_their_parameters_as_the_bodies():
    from fastapi.testclient import TestClient

    from hefsearch.app.service import Limits
    from hefsearch.serve.http import make_http_app

    service = _Recorder()
    service.limits = Limits()
    schema = TestClient(make_http_app(service), base_url="http://127.0.0.1:8765").get("/openapi.json").json()
    for path, body in (("/search", SearchBody), ("/similar", SimilarBody), ("/compare", CompareBody)):
        params = {p["name"] for p in schema["paths"][path]["get"]["parameters"]}
        assert params == set(body.model_fields), path


@pytest.mark.parametrize("body, words", [
    (SearchBody(query="x", since="last tuesday"), "Cannot read --since"),
    (SearchBody(query="x", type=["exe"]), "Unknown file type"),
    (SearchBody(query="x", rerank="many"), "not a depth"),
    (SimilarBody(id=1, lang=["xx"]), "ISO 639-1"),
    (SearchBody(query="x", path="\ud800"), "not valid Unicode"),
])
def test_a_body_that_cannot_become_a_request_is_a_400(body, words):
    from hefsearch.base.errors import HefsearchError

    with pytest.raises(HefsearchError) as e:
        body.to_request()
    assert e.value.http_status == 400 and words in e.value.message


def test_similar_takes_either_name_of_the_chunk():
    assert SimilarBody(id=7).to_request().chunk_id == 7 == SimilarBody(chunk_id=7).to_request().chunk_id
    assert SimilarBody(doc=3).to_request().doc_id == 3

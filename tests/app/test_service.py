"""The application service takes one request per operation and answers the JSON every front
end gives; what it refuses is a typed error whose class says its HTTP status (and exit code),
never a status guessed from the message. Both services, in-process and remote, satisfy the one
protocol the MCP tools are written against."""

from __future__ import annotations

import inspect

import pytest

from hefsearch.app.requests import CompareRequest, GetRequest, SimilarRequest
from hefsearch.app.searching import EmptyQuery, make_filters
from hefsearch.base.errors import HefsearchError, NotFound
from hefsearch.search.request import SearchRequest


@pytest.fixture(scope="module")
def service(tiny_bert_bundle, tmp_path_factory):
    from tests.support.serve_fixtures import service_over_served_docs

    yield from service_over_served_docs(tmp_path_factory.mktemp("app-service"), tiny_bert_bundle)


def test_search_takes_a_request_and_answers_with_its_filters(service):
    answer = service.search(SearchRequest("zephyr turbine", mode="keyword", k=10))
    names = {h["path"].rsplit("/", 1)[1] for h in answer["hits"]}
    assert names == {"alpha.md", "report.html", "archive.txt"} and answer["library"]["last_sync"]
    only_md = service.search(SearchRequest("zephyr turbine", mode="keyword", filters=make_filters(types="md")))
    assert [h["path"].rsplit("/", 1)[1] for h in only_md["hits"]] == ["alpha.md"]
    assert only_md["filters"] == {"types": ["md"]}


def test_similar_and_get_take_their_requests(service):
    hit = service.search(SearchRequest("zephyr turbine", mode="keyword", k=1))["hits"][0]
    similar = service.similar(SimilarRequest(chunk_id=hit["chunk_id"], k=3))
    assert similar["mode"] == "similar" and all(h["path"] != hit["path"] for h in similar["hits"])
    got = service.get(GetRequest(ids=(hit["chunk_id"],)))
    assert got["items"][0]["text"] == hit["text"]


@pytest.mark.parametrize("ask, status, words", [
    (lambda s: s.search(SearchRequest("x", k=0)), 400, "k must be a whole number"),
    (lambda s: s.search(SearchRequest("x", k=101)), 400, "k must be between"),
    (lambda s: s.search(SearchRequest("x" * 5000)), 413, "at most"),
    (lambda s: s.search(SearchRequest("x", mode="fuzzy")), 400, "Unknown mode"),
    (lambda s: s.search(SearchRequest("x", mode="vector", space="nope")), 400, "no vector space 'nope'"),
    (lambda s: s.get(GetRequest(ids=(987654,))), 404, "no chunk 987654"),
    (lambda s: s.get(GetRequest(ids=("doc:987654",))), 404, "no document 987654"),
    (lambda s: s.get(GetRequest(ids=("/etc/passwd",))), 404, "not an id"),
    (lambda s: s.similar(SimilarRequest(chunk_id=987654)), 404, "no chunk 987654"),
    (lambda s: s.similar(SimilarRequest(doc_id=987654)), 404, "no document 987654"),
    (lambda s: s.compare(CompareRequest(SearchRequest("x", mode="vector"))), 400, "no NPU"),
])
def test_a_refused_request_is_a_typed_error_that_carries_its_status(service, ask, status, words):
    with pytest.raises(HefsearchError) as e:
        ask(service)
    assert e.value.http_status == status and words in e.value.message
    assert isinstance(e.value, NotFound) == (status == 404)  # the class decides, not the message
    assert e.value.exit_code == 2


def test_the_search_layers_missing_chunk_is_a_not_found(service):
    """The search layer's own "no such chunk" (asked without the service's visibility check)."""
    from hefsearch.search.searcher import SearchError

    with pytest.raises(NotFound) as e:
        service.session.similar(SimilarRequest(chunk_id=987654))
    assert isinstance(e.value, SearchError) and e.value.http_status == 404


def test_an_empty_query_is_the_same_error_everywhere():
    from hefsearch.app.searching import check_query

    for blank in ("", "   ", "\x00\x01", None):
        with pytest.raises(EmptyQuery) as e:
            check_query(blank)
        assert e.value.http_status == 400 and e.value.exit_code == 2
    assert check_query(" tax ") == " tax "


def test_both_services_answer_every_operation_of_the_table():
    """The server's table of operations names a LibraryService method for each row, and the
    remote client (its methods made from the table) takes the same arguments."""
    from hefsearch.app.service import LibraryService
    from hefsearch.serve.operations import OPERATIONS
    from hefsearch.serve.remote import RemoteService

    assert {op.name for op in OPERATIONS} >= {"search", "similar", "get", "compare", "status", "health"}
    for op in OPERATIONS:
        wanted = ["self"] + ([] if op.body is None else ["request"])
        for cls in (LibraryService, RemoteService):
            assert list(inspect.signature(getattr(cls, op.name)).parameters) == wanted, (cls.__name__, op.name)


def test_a_request_through_the_remote_service_is_answered_as_in_process(service, monkeypatch):
    """RemoteService turns a request into the HTTP API's fields, which the server reads back
    into the same request: the same hits and filters as asking the service itself."""
    from fastapi.testclient import TestClient

    from hefsearch.serve.http import make_http_app
    from hefsearch.serve.remote import RemoteService

    client = TestClient(make_http_app(service), base_url="http://127.0.0.1:8765")

    def call(method, path, body=None, params=None):
        params = {k: v for k, v in (params or {}).items() if v is not None}
        r = client.request(method, path, json=body, params=params)
        assert r.status_code == 200, r.text
        return r.json()

    remote = RemoteService("http://127.0.0.1:8765")
    monkeypatch.setattr(remote, "_call", call)
    filters = make_filters(path_glob="*/docs/*", types=["md", "html"], since="2021-01-01", until="2100-01-01")
    asked = SearchRequest("zephyr turbine", mode="keyword", k=5, filters=filters)
    here, there = service.search(asked), remote.search(asked)
    assert [h["chunk_id"] for h in there["hits"]] == [h["chunk_id"] for h in here["hits"]]
    assert there["filters"] == here["filters"] and len(here["hits"]) == 2
    hit = here["hits"][0]
    like = SimilarRequest(chunk_id=hit["chunk_id"], k=3, filters=make_filters(langs="en"))
    assert remote.similar(like)["hits"] == service.similar(like)["hits"]
    assert remote.get(GetRequest(ids=(hit["chunk_id"],)))["items"] == service.get(GetRequest(ids=(hit["chunk_id"],)))["items"]


def test_a_mail_message_is_titled_by_its_subject_and_a_file_by_its_name(tiny_bert_bundle, tmp_path):
    """The reader's title (the web page's heading): a message's stored path ends in a key made
    from its Message-ID, which names nothing for a person; its subject does."""
    from hefsearch.app.service import LibraryService
    from hefsearch.app.session import LibrarySession
    from tests.support.serve_fixtures import build_library, write_docs

    mail = ("Message-ID: <20240301.abc123@mail.example>\nSubject: Heating invoice for March\n"
            "From: a@example.org\nTo: b@example.org\nDate: Fri, 1 Mar 2024 10:00:00 +0000\n\n"
            "The boiler invoice is attached; please pay by Friday.\n")
    docs = write_docs(tmp_path / "docs", {"old/archive.txt": "An old note on the boiler.\n",
                                          "mail/invoice.eml": mail})
    session = LibrarySession.open(build_library(tmp_path / "lib", docs, tiny_bert_bundle))
    try:
        service = LibraryService(session)
        hits = service.search(SearchRequest("boiler", mode="keyword", k=5))["hits"]
        titles = {}
        for hit in hits:
            doc = service.get(GetRequest(ids=(hit["chunk_id"],)))["items"][0]["doc_id"]
            got = service.document(doc)
            titles[got["kind"]] = got["title"]
        assert titles == {"eml": "Heating invoice for March", "text": "archive.txt"}
    finally:
        session.close()

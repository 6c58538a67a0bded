"""``hefsearch serve`` as a real process on 127.0.0.1 (ephemeral port), driven with httpx: the
JSON API gives what ``search --json`` gives, reads chunks and documents by id, finds similar
chunks, filters, refuses what it must (ids outside the library, paths, oversized requests, a
foreign Host header, requests without the token), and serves MCP at /mcp."""

from __future__ import annotations

import json
import os
import stat

import anyio
import httpx
import pytest
from click.testing import CliRunner

from tests.support.process_helpers import HEFSEARCH, Proc


def test_search_answers_the_json_of_search_json(served_library):
    import subprocess

    r = httpx.get(f"{served_library.url}/search", params={"query": "zephyr turbine", "k": 3, "mode": "keyword"})
    assert r.status_code == 200, r.text
    served = r.json()
    cli = subprocess.run([*HEFSEARCH, "search", "zephyr turbine", "-k", "3", "--mode", "keyword", "--json",
                          "--library", str(served_library.library)], capture_output=True, text=True,
                         env={**os.environ, **served_library.env}, check=True)
    local = json.loads(cli.stdout)
    assert served.keys() == local.keys()
    assert {"query", "mode", "space", "backend", "hits", "library"} <= served.keys()
    drop = {"timings_ms", "library"}
    assert {k: v for k, v in served.items() if k not in drop} == {k: v for k, v in local.items() if k not in drop}
    assert [h["path"].rsplit("/", 1)[1] for h in served["hits"]][:2] and served["hits"][0]["sources"]
    assert served["library"]["last_sync"] and served["library"]["watched"] is False


def test_vector_search_names_its_backend_and_post_takes_a_body(served_library):
    r = httpx.post(f"{served_library.url}/search", json={"query": "turbine inspection", "k": 2, "mode": "vector"})
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["backend"] == "CPU FP32" and data["space"] == "cpu-fp32" and len(data["hits"]) == 2
    assert "encode" in data["timings_ms"]


def test_filters_by_type_language_and_date(served_library):
    url = f"{served_library.url}/search"
    base = {"query": "zephyr turbine", "mode": "keyword", "k": 10}
    names = lambda **f: sorted(h["path"].rsplit("/", 1)[1] for h in httpx.get(url, params={**base, **f}).json()["hits"])
    assert names() == ["alpha.md", "archive.txt", "report.html"]
    assert names(type="html") == ["report.html"]
    assert names(type=["md", "html"]) == ["alpha.md", "report.html"]
    assert names(until="2021-01-01") == ["archive.txt"]
    assert names(since="2021-01-01") == ["alpha.md", "report.html"]
    german = httpx.get(url, params={"query": "Rechnung", "mode": "keyword", "lang": "de"}).json()
    assert [h["path"].rsplit("/", 1)[1] for h in german["hits"]] == ["rechnung.txt"]
    assert german["filters"] == {"langs": ["de"]}
    assert httpx.get(url, params={"query": "Rechnung", "mode": "keyword", "lang": "en"}).json()["hits"] == []


def test_get_chunks_and_documents_by_id_with_text_and_location(served_library):
    hit = httpx.get(f"{served_library.url}/search", params={"query": "Rechnung", "mode": "keyword"}).json()["hits"][0]
    chunk = httpx.get(f"{served_library.url}/chunks/{hit['chunk_id']}").json()
    assert chunk["type"] == "chunk" and chunk["text"] == hit["text"] and chunk["line"] == hit["line"]
    assert chunk["path"] == hit["path"] and chunk["lang"] == "de"
    doc = httpx.get(f"{served_library.url}/documents/{chunk['doc_id']}").json()
    assert doc["path"] == hit["path"] and doc["text"].startswith("Die Rechnung") and doc["langs"] == ["de"]
    both = httpx.post(f"{served_library.url}/get", json={"ids": [hit["chunk_id"], f"doc:{chunk['doc_id']}"]}).json()
    assert [i["type"] for i in both["items"]] == ["chunk", "document"] and both["library"]["last_sync"]


def test_ids_and_paths_outside_the_library_are_refused(served_library):
    url = served_library.url
    for r in (httpx.get(f"{url}/chunks/987654"), httpx.get(f"{url}/documents/987654"),
              httpx.post(f"{url}/get", json={"ids": ["/etc/passwd"]}),
              httpx.post(f"{url}/get", json={"ids": ["../../etc/passwd:1"]})):
        assert r.status_code == 404, r.text
        assert r.json()["error"]["message"]
    assert "/etc/passwd" not in httpx.post(f"{url}/get", json={"ids": ["/etc/passwd"]}).text.split("'")[0]


def test_similar_returns_chunks_of_other_documents(served_library):
    hit = httpx.get(f"{served_library.url}/search", params={"query": "quarterly alpha", "mode": "keyword"}).json()["hits"][0]
    data = httpx.get(f"{served_library.url}/similar", params={"id": hit["chunk_id"], "k": 5}).json()
    assert data["mode"] == "similar" and data["hits"]
    assert all(h["path"] != hit["path"] for h in data["hits"])
    assert httpx.get(f"{served_library.url}/similar", params={"id": 987654}).status_code == 404
    same = httpx.get(f"{served_library.url}/similar", params={"chunk_id": hit["chunk_id"], "k": 5}).json()
    assert same["hits"] == data["hits"]  # the name hits and MCP use works too


def test_bad_input_gets_clear_json_errors(served_library):
    url = served_library.url
    cases = [
        (httpx.get(f"{url}/search", params={"query": "x", "k": 5000}), 400, "k must be between"),
        (httpx.get(f"{url}/search", params={"query": "   "}), 400, "empty"),
        (httpx.get(f"{url}/search", params={"query": "x", "since": "last tuesday"}), 400, "Cannot read --since"),
        (httpx.get(f"{url}/search", params={"query": "x", "type": "exe"}), 400, "Unknown file type"),
        (httpx.get(f"{url}/search", params={"query": "x", "mode": "fuzzy"}), 400, "Unknown mode"),
        (httpx.get(f"{url}/search", params={"query": "x" * 5000}), 413, "at most"),
        (httpx.post(f"{url}/search", json={"query": "x", "bogus": 1}), 400, "bogus"),
        (httpx.post(f"{url}/search", content=b"{" + b" " * 70_000 + b"}",
                    headers={"content-type": "application/json"}), 413, "over"),
        (httpx.get(f"{url}/search", params={"query": "x", "space": "nope"}), 400, "no vector space"),
    ]
    for response, status, words in cases:
        assert response.status_code == status, (words, response.text)
        assert words in response.json()["error"]["message"], response.text


def test_a_foreign_host_header_is_refused_on_loopback(served_library):
    r = httpx.get(f"{served_library.url}/health", headers={"host": "attacker.example:80"})
    assert r.status_code == 403 and "loopback" in r.json()["error"]["message"]
    assert httpx.get(f"{served_library.url}/health").json()["ok"] is True


def test_openapi_schema_lists_the_routes(served_library):
    schema = httpx.get(f"{served_library.url}/openapi.json").json()
    assert {"/search", "/chunks/{chunk_id}", "/documents/{doc_id}", "/similar", "/status", "/health", "/get"} <= set(schema["paths"])
    assert "SearchBody" in schema["components"]["schemas"]


def test_status_says_how_fresh_the_library_is(served_library):
    data = httpx.get(f"{served_library.url}/status").json()
    assert data["documents"] == 4 and data["freshness"]["watched"] is False
    assert data["freshness"]["age_s"] is not None and data["default_space"] == "cpu-fp32"


def test_mcp_over_streamable_http(served_library):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def run():
        async with streamable_http_client(f"{served_library.url}/mcp") as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                names = {t.name for t in (await session.list_tools()).tools}
                result = await session.call_tool("search", {"query": "zephyr", "mode": "keyword", "k": 2})
                return names, json.loads(result.content[0].text)

    names, data = anyio.run(run)
    assert names == {"search", "get", "similar", "status"}
    assert data["hits"] and data["backend"] is None and data["library"]["last_sync"]  # keyword: nothing encoded


# -- the token -------------------------------------------------------------------------------
def test_a_token_protects_every_request(served_library, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-of-at-least-16-chars\n")
    proc = Proc(["serve", "--library", str(served_library.library), "--port", "0", "--token-file", str(token_file),
                 "--no-mcp"], served_library.env)
    try:
        url = proc.wait_for(r"hefsearch serve: (http://127\.0\.0\.1:\d+)", timeout=90).group(1)
        assert "token required" in proc.lines[-1]
        for path in ("/health", "/search?query=zephyr", "/openapi.json", "/chunks/1"):
            r = httpx.get(url + path)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer"), path
            assert httpx.get(url + path, headers={"authorization": "Bearer wrong"}).status_code == 401
        ok = httpx.get(url + "/health", headers={"authorization": "Bearer s3cret-token-of-at-least-16-chars"})
        assert ok.status_code == 200 and ok.json()["ok"]
    finally:
        proc.stop()


def test_any_bind_but_loopback_needs_a_token():
    from hefsearch.serve.server import needs_token

    assert not any(needs_token(h) for h in ("127.0.0.1", "127.0.0.2", "localhost", "::1"))
    assert all(needs_token(h) for h in ("0.0.0.0", "::", "192.168.1.20", "pi.local", "10.0.0.5"))


def test_serving_off_loopback_makes_a_private_token_and_prints_it_once(monkeypatch, tmp_path):
    """The CLI's decision, without binding anything but what the test allows: serve() is
    replaced, so nothing listens on 0.0.0.0 here."""
    from hefsearch.cli.main import main

    seen = []
    monkeypatch.setattr("hefsearch.serve.server.serve", lambda config: seen.append(config))
    first = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0"])
    assert first.exit_code == 0, first.output
    token = seen[0].token
    token_file = tmp_path / "hefsearch-home" / "serve-token"
    assert token and len(token) >= 32 and token in first.output
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600 and token_file.read_text().strip() == token
    second = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0"])
    assert second.exit_code == 0 and seen[1].token == token and token not in second.output
    assert str(token_file) in second.output
    loopback = CliRunner().invoke(main, ["serve"])
    assert loopback.exit_code == 0 and seen[2].token is None


def test_serve_refuses_to_start_off_loopback_without_a_token():
    from hefsearch.serve.server import ServeConfig, ServeError, serve

    with pytest.raises(ServeError, match="needs a token"):
        serve(ServeConfig(host="0.0.0.0", token=None))


def test_serve_watch_indexes_a_saved_file_in_the_same_process(tiny_bert_bundle, tmp_path):
    from tests.support.process_helpers import wait_until
    from tests.support.serve_fixtures import build_library, write_docs

    docs = write_docs(tmp_path / "docs")
    lib = build_library(tmp_path / "lib", docs, tiny_bert_bundle)
    proc = Proc(["serve", "--library", str(lib), "--port", "0", "--watch", "--debounce", "300", "--no-mcp"],
                {"HEFSEARCH_HOME": str(tmp_path / "home")})
    try:
        url = proc.wait_for(r"hefsearch serve: (http://127\.0\.0\.1:\d+)", timeout=90).group(1)
        proc.wait_for(r"watch: caught up", timeout=60)
        status = httpx.get(f"{url}/status").json()["freshness"]
        assert status["watched"] and status["watcher"]["pid"] == proc.popen.pid  # one process
        (docs / "notes/fresh.md").write_text("Saved while serving: the quetzal.\n")

        def found():
            hits = httpx.get(f"{url}/search", params={"query": "quetzal", "mode": "keyword"}).json()["hits"]
            return [h["path"] for h in hits]

        assert wait_until(found, what="the saved file") == [str(docs / "notes/fresh.md")]
        vector = httpx.get(f"{url}/search", params={"query": "Saved while serving: the quetzal.", "mode": "vector",
                                                   "k": 20}).json()
        assert str(docs / "notes/fresh.md") in [h["path"] for h in vector["hits"]]  # its vectors too
    finally:
        proc.stop()

"""``hefsearch mcp`` spawned over stdio and driven by the ``mcp`` SDK's own client: it lists its
tools, answers ``search`` with the JSON of ``search --json``, ``get`` with the text of hits, and
refuses ids the library does not have; with a server running it answers from the server."""

from __future__ import annotations

import json
import os
import sys

import anyio



def _drive(library, env, calls, errlog=os.devnull):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def run():
        params = StdioServerParameters(command=sys.executable, args=["-m", "hefsearch", "mcp", "--library", str(library)],
                                       env={**os.environ, **env})
        with open(errlog, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = {t.name: t for t in (await session.list_tools()).tools}
                    answers = []
                    for name, args in calls:
                        result = await session.call_tool(name, args)
                        answers.append((result.is_error, result.content[0].text))
                    return tools, answers

    return anyio.run(run)


def test_mcp_stdio_lists_tools_searches_and_gets(served_library, tmp_path):
    # a library of its own (no server runs for it): this process opens it
    from tests.support.serve_fixtures import build_library, write_docs

    docs = write_docs(tmp_path / "docs")
    from hefsearch.index.library import Library

    with Library.open(served_library.library, create=False) as lib:
        bundle_path = lib.settings()["bundle"]
    library = build_library(tmp_path / "lib", docs, bundle_path)
    tools, answers = _drive(library, served_library.env, [
        ("search", {"query": "zephyr turbine", "mode": "keyword", "k": 2}),
        ("status", {}),
    ], errlog=tmp_path / "stderr")
    assert "in this process" in (tmp_path / "stderr").read_text()
    assert set(tools) == {"search", "get", "similar", "status"}
    assert tools["search"].annotations.read_only_hint is True
    assert "query" in tools["search"].input_schema["properties"]
    error, text = answers[0]
    found = json.loads(text)
    assert not error and len(found["hits"]) == 2 and found["library"]["last_sync"]
    assert all(h["path"].startswith(str(docs)) for h in found["hits"])
    ids = [str(h["chunk_id"]) for h in found["hits"]]
    _, answers = _drive(library, served_library.env, [
        ("get", {"ids": ids}),
        ("get", {"ids": ["987654"]}),
        ("get", {"ids": ["/etc/passwd"]}),
        ("similar", {"chunk_id": int(ids[0]), "k": 3}),
        ("similar", {"id": int(ids[0]), "k": 3}),  # the HTTP API's name works too
    ])
    got = json.loads(answers[0][1])
    assert not answers[0][0] and [str(i["id"]) for i in got["items"]] == ids
    assert got["items"][0]["text"] == found["hits"][0]["text"]
    assert answers[1][0] and "no chunk 987654" in answers[1][1]
    assert json.loads(answers[1][1]) == {"error": {"status": 404, "message": "The library has no chunk 987654.",
                                                   "hint": "Take the id from a search result (chunk_id) or a "
                                                           "document id (doc:ID)."}}  # the HTTP API's error JSON
    assert answers[2][0] and "not an id of this library" in answers[2][1]
    similar = json.loads(answers[3][1])
    assert not answers[3][0] and all(h["chunk_id"] != int(ids[0]) for h in similar["hits"])
    assert not answers[4][0] and json.loads(answers[4][1])["hits"] == similar["hits"]


def test_mcp_stdio_answers_from_the_running_server(served_library, tmp_path):
    """The library has a server (serve.json): hefsearch mcp forwards to it."""
    tools, answers = _drive(served_library.library, served_library.env, [
        ("search", {"query": "Rechnung", "mode": "keyword", "lang": ["de"]}),
        ("get", {"ids": ["doc:987654"]}),
    ], errlog=tmp_path / "stderr")
    assert f"answering from {served_library.url}" in (tmp_path / "stderr").read_text()
    assert len(tools) == 4
    found = json.loads(answers[0][1])
    assert [h["path"].rsplit("/", 1)[1] for h in found["hits"]] == ["rechnung.txt"]
    assert answers[1][0] and json.loads(answers[1][1])["error"]["status"] == 404  # the server's error, as it gave it
    assert "no document 987654" in answers[1][1]

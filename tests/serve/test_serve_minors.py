"""The server's smaller holes, each against a real ``hefsearch serve`` on 127.0.0.1 where it is
about the server: a request head over 16 KiB (in one write: accepted before; trickled: the
connection closed without an answer), a ``Host`` with a second host after "@", a trailing slash
(a 307 built from the request's Host), ``rerank: true`` (depth 1 by POST, refused by GET), an
IPv4-mapped loopback URL (the token went through ``http_proxy``), a recorded server whose
address is not the one its process listens on, and MCP sessions left open by one client
(every other client locked out for the session timeout)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.request

import anyio
import httpx
import pytest

from tests.serve.test_serve_hostile_clients import (  # noqa: F401  (hardened: the fixture)
    _answer, _connect, _initialize, _port, _status_and_json, hardened)
from tests.support.serve_fixtures import Served


@pytest.fixture(scope="module")
def server(hardened) -> Served:
    """The hostile-clients module's server (--mcp-sessions 4, short timeouts), one for this module."""
    return hardened


def _head(size: int) -> bytes:
    """A GET /health whose head is ``size`` bytes long."""
    start = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
    return start + b"a" * (size - len(start) - 4) + b"\r\n\r\n"


# -- the request head ---------------------------------------------------------------------------
def test_a_head_over_16_kib_in_one_write_is_a_json_431(server):
    with _connect(server.url) as s:
        s.sendall(_head(16 * 1024 - 100))
        assert _answer(s, 2).startswith(b"HTTP/1.1 200")  # under the limit: answered
    for size in (16 * 1024 + 200, 60 * 1024):
        with _connect(server.url) as s:
            s.sendall(_head(size))  # before: 200 at any size sent at once
            raw = _answer(s, 3)
        status, body = _status_and_json(raw)
        assert status == 431 and body["error"]["status"] == 431 and "16 KiB" in body["error"]["message"], raw[:300]


@pytest.mark.parametrize("piece,pause", [(1024, 0.005), (4096, 0.0), (100, 0.001)])
def test_a_head_of_40_kib_trickled_in_is_answered_without_a_reset(server, piece, pause):
    """The client writes its whole head and reads the JSON answer. Before, the server closed
    with the client's bytes unread: the client's next write failed (EPIPE) or its read was
    reset (ECONNRESET), and a client that stops at that error never reads the answer."""
    head = _head(40 * 1024)
    with _connect(server.url) as s:
        for i in range(0, len(head), piece):
            s.sendall(head[i:i + piece])  # no BrokenPipeError: the server keeps reading
            time.sleep(pause)
        s.settimeout(3)
        raw = b""
        while part := s.recv(65536):  # no ConnectionResetError: a half close, then a FIN
            raw += part
    status, body = _status_and_json(raw)
    assert status == 431 and body["error"]["status"] == 431, raw[:300]


# -- Host, redirects, rerank --------------------------------------------------------------------
def test_the_host_header_is_parsed_strictly(server):
    port = _port(server.url)
    for host in (f"127.0.0.1:{port}@evil.example", f"127.0.0.1:{port}/evil", "127.0.0.1 evil.example",
                 f"evil.example#127.0.0.1:{port}", "localhost.evil.example"):
        r = httpx.get(f"{server.url}/health", headers={"host": host})
        assert r.status_code == 403 and r.json()["error"]["status"] == 403, host  # before: 200 for "@evil"
    for host in (f"127.0.0.1:{port}", "localhost", f"[::1]:{port}", f"[::ffff:127.0.0.1]:{port}"):
        assert httpx.get(f"{server.url}/health", headers={"host": host}).status_code == 200, host


def test_a_trailing_slash_is_a_json_404_not_a_redirect_to_the_requests_host(server):
    for path in ("/search/?query=zephyr", "/health/", "/status/"):
        r = httpx.get(server.url + path, headers={"host": "localhost"}, follow_redirects=False)
        assert r.status_code == 404 and "location" not in r.headers, (path, r.status_code, r.headers)
        assert r.json()["error"]["status"] == 404  # before: a text 307 to http://localhost/...


def test_rerank_true_is_read_by_one_rule_in_a_body_and_in_parameters(server):
    by_get = httpx.get(f"{server.url}/search", params={"query": "zephyr", "rerank": "true"})
    by_post = httpx.post(f"{server.url}/search", json={"query": "zephyr", "rerank": True})
    assert by_get.status_code == by_post.status_code == 400, (by_get.text, by_post.text)  # before: POST 200, depth 1
    assert by_get.json()["error"]["message"] == by_post.json()["error"]["message"]
    off_get = httpx.get(f"{server.url}/search", params={"query": "zephyr", "rerank": "false"})
    off_post = httpx.post(f"{server.url}/search", json={"query": "zephyr", "rerank": False})
    assert off_get.status_code == off_post.status_code == 200
    assert off_get.json()["rerank"] == off_post.json()["rerank"]


# -- IPv4-mapped loopback -----------------------------------------------------------------------
def test_an_ipv4_mapped_loopback_url_never_goes_through_the_proxy(server, monkeypatch):
    from hefsearch.base.hosts import is_loopback, loopback_host
    from hefsearch.serve.remote import RemoteService

    seen = []
    proxy = socket.create_server(("127.0.0.1", 0))
    proxy.settimeout(0.2)

    def record():
        try:
            conn, _ = proxy.accept()
            seen.append(conn.recv(65536))
            conn.close()
        except OSError:
            pass

    listener = threading.Thread(target=record, daemon=True)
    listener.start()
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.getsockname()[1]}")
    monkeypatch.delenv("no_proxy", raising=False)
    try:
        answer = RemoteService(f"http://[::ffff:127.0.0.1]:{_port(server.url)}", "secret-token-0123456789").health()
    finally:
        listener.join(timeout=2)
        proxy.close()
    assert answer["ok"] is True and seen == []  # before: the token and the request went to the proxy
    assert is_loopback("[::ffff:127.0.0.1]") and loopback_host("::ffff:127.0.0.2") == "127.0.0.2"
    assert not is_loopback("::ffff:10.0.0.1")


# -- the recorded server ------------------------------------------------------------------------
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="the listener check reads /proc")
def test_a_record_naming_another_address_on_the_servers_port_is_not_believed(server, tmp_path):
    """The pid is the real server's, the port its port, but the address 127.0.0.2, where
    another program listens: the token and the queries would go there."""
    from hefsearch.serve.trust import Untrusted, trusted_server

    port = _port(server.url)
    other = socket.create_server(("127.0.0.2", port))  # the planter's listener, same port
    try:
        def record(url):
            folder = tmp_path / url.split("//")[1].replace(":", "_")
            folder.mkdir()
            (folder / "serve.json").write_text(json.dumps({"pid": server.proc.popen.pid, "url": url,
                                                           "started": time.time()}))
            (folder / "serve.json").chmod(0o644)
            return folder

        with pytest.raises(Untrusted, match="does not listen on 127.0.0.2"):
            trusted_server(record(f"http://127.0.0.2:{port}"))  # before: trusted
        assert trusted_server(record(f"http://127.0.0.1:{port}")).url == f"http://127.0.0.1:{port}"
        assert trusted_server(record(f"http://localhost:{port}")).url == f"http://127.0.0.1:{port}"
    finally:
        other.close()


# -- MCP sessions -------------------------------------------------------------------------------
def test_one_client_that_walks_away_from_its_sessions_locks_no_one_out(server):
    """--mcp-sessions 4: a client opens 4 sessions and leaves them; the next client gets a
    session at once (before: 503 for the whole --mcp-session-timeout), made by closing the
    one unused for longest, whose next request is a 404 (start a new session)."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-protocol-version": "2025-06-18"}
    left = [_initialize(server.url) for _ in range(4)]
    assert [r.status_code for r in left] == [200] * 4
    newcomer = _initialize(server.url)
    assert newcomer.status_code == 200, newcomer.text
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}

    def ping_in(response):
        return httpx.post(f"{server.url}/mcp", json=ping,
                          headers={**headers, "mcp-session-id": response.headers["mcp-session-id"]}).status_code

    assert ping_in(left[0]) == 404  # the idlest made room
    assert ping_in(newcomer) == 200 and ping_in(left[-1]) == 200


def test_a_503_with_retry_after_only_while_every_session_is_answering():
    from hefsearch.serve.mcp_sessions import McpSessions

    release = anyio.Event()
    opened = []

    async def fake_sdk(scope, receive, send):
        """Opens a session on a POST without one; a request in a session waits for ``release``."""
        session = dict(scope["headers"]).get(b"mcp-session-id")
        if session is None:
            opened.append(f"s{len(opened)}".encode())
            headers = [(b"mcp-session-id", opened[-1])]
        else:
            headers = []
            if scope["method"] != "DELETE":
                await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}"})

    room = McpSessions(fake_sdk, limit=2, idle_s=600)

    async def call(session: bytes | None = None):
        answer = {}

        async def send(message):
            answer.setdefault("status", message.get("status"))
            answer.setdefault("headers", dict(message.get("headers", ())))

        scope = {"type": "http", "path": "/mcp", "method": "POST",
                 "headers": [(b"host", b"127.0.0.1")] + ([(b"mcp-session-id", session)] if session else [])}
        await room(scope, lambda: {"type": "http.request", "body": b"{}"}, send)
        return answer

    async def run():
        await call()
        await call()
        async with anyio.create_task_group() as tg:
            for s in opened[:2]:
                tg.start_soon(call, s)  # both sessions busy
            await anyio.sleep(0.05)
            refused = await call()
            release.set()
        after = await call()  # both idle again: the idlest is closed for it
        return refused, after

    refused, after = anyio.run(run)
    assert refused["status"] == 503 and refused["headers"][b"retry-after"] == b"5"
    assert after["status"] == 200 and len(opened) == 3

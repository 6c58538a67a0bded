"""``hefsearch serve`` against hostile clients, all on 127.0.0.1 with small timeouts given as
options: a body whose framing lies, idle and slow connections, the token before the body,
signals from a service manager, odd input that must be a 4xx and never a 500, one error
shape over HTTP and MCP, capped and expiring MCP sessions."""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import httpx
import pytest

from tests.support.process_helpers import Proc, wait_until
from tests.support.serve_fixtures import Served, build_library, write_docs

TOKEN = "hardening-token-0123456789abcdef"


def _start(lib, env, *extra, token_file=None) -> tuple[Proc, str]:
    args = ["serve", "--library", str(lib), "--port", "0", "--head-timeout", "1", "--idle-timeout", "1",
            "--body-timeout", "1", "--max-connections", "32", "--mcp-sessions", "4", "--mcp-session-timeout", "2",
            *extra]
    if token_file:
        args += ["--token-file", str(token_file)]
    proc = Proc(args, env)
    url = proc.wait_for(r"hefsearch serve: (http://127\.0\.0\.1:\d+)", timeout=90).group(1)
    return proc, url


@pytest.fixture(scope="module")
def hardened(tiny_bert_bundle, tmp_path_factory) -> Served:
    base = tmp_path_factory.mktemp("hardened")
    docs = write_docs(base / "docs")
    lib = build_library(base / "lib", docs, tiny_bert_bundle)
    env = {"HEFSEARCH_HOME": str(base / "home")}
    proc, url = _start(lib, env)
    try:
        yield Served(url, lib, docs, proc, env)
    finally:
        proc.stop()


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _connect(url: str, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", _port(url)), timeout=timeout)


def _answer(sock: socket.socket, limit: float = 5.0) -> bytes:
    """What the server sends until it closes the connection (or ``limit`` seconds pass)."""
    sock.settimeout(limit)
    data = b""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            part = sock.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            break
        if not part:
            break
        data += part
    return data


def _status_and_json(raw: bytes) -> tuple[int, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


# -- the body -----------------------------------------------------------------------------------
def test_a_small_content_length_with_a_chunked_body_is_refused_before_the_body(hardened):
    with _connect(hardened.url) as s:
        s.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 65536
        with pytest.raises(OSError):  # the server answers and closes; sending 200 MB fails early
            for _ in range(200 * 16):
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        status, body = _status_and_json(_answer(s))
    assert status == 400 and "Content-Length and a Transfer-Encoding" in body["error"]["message"]


def test_a_chunked_body_is_counted_as_it_arrives(hardened):
    with _connect(hardened.url) as s:
        s.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b" " * 16384
        try:
            for _ in range(64):  # 1 MiB, far over the 64 KiB limit
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            pass
        status, body = _status_and_json(_answer(s))
    assert status == 413 and "over 65,536 bytes" in body["error"]["message"]
    small = httpx.post(f"{hardened.url}/search", content=iter([b'{"query": "zephyr", ', b'"mode": "keyword"}']),
                       headers={"content-type": "application/json"})  # chunked, small: answered
    assert small.status_code == 200 and small.json()["hits"]


def test_a_body_sent_a_byte_at_a_time_is_dropped(hardened):
    with _connect(hardened.url) as s:
        s.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 200\r\n\r\n")
        t = time.monotonic()
        answer = b""
        s.settimeout(0.3)
        while time.monotonic() - t < 6 and not answer:
            try:
                s.sendall(b" ")
                answer = s.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
        answer += _answer(s, 2)
    status, body = _status_and_json(answer)
    assert status == 408 and "did not arrive within 1 s" in body["error"]["message"]


# -- idle and slow connections --------------------------------------------------------------
def test_idle_connections_do_not_lock_others_out(hardened):
    idle = []
    try:
        for _ in range(300):
            idle.append(_connect(hardened.url))
        r = httpx.get(f"{hardened.url}/health", timeout=5)  # at once: an idle one made room, no 503
        assert r.status_code == 200 and r.json()["ok"], r.text

        def all_closed():
            for s in idle:
                s.settimeout(0.01)
                try:
                    if s.recv(1) != b"":
                        return False
                except socket.timeout:
                    return False
                except OSError:
                    pass
            return True

        wait_until(all_closed, timeout=8, what="the idle connections closed by the server")
    finally:
        for s in idle:
            s.close()


def _trickle_until_closed(s: socket.socket) -> bool:
    """Send a request head a byte at a time; True once the server closes the connection."""
    s.settimeout(0.2)
    for byte in b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200:
        try:
            s.sendall(bytes([byte]))
            if s.recv(1) == b"":
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False


def test_a_request_head_trickled_in_is_cut_off(hardened):
    with _connect(hardened.url) as s:
        t = time.monotonic()
        assert _trickle_until_closed(s) and time.monotonic() - t < 8  # --head-timeout 1 (without it: never)


def test_a_kept_alive_connection_that_trickles_its_next_request_is_cut_off(hardened):
    with _connect(hardened.url) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = b""
        while not first.endswith(b"}"):
            first += s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        t = time.monotonic()
        assert _trickle_until_closed(s) and time.monotonic() - t < 8  # --head-timeout 1 (without it: never)


def test_the_token_is_checked_before_the_body_and_the_connection_closed(hardened, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    proc, url = _start(hardened.library, hardened.env, "--no-mcp", token_file=token_file)
    try:
        with _connect(url) as s:  # a body announced, never sent: refused at the head
            s.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 60000\r\n\r\n")
            raw = _answer(s, 3)
        status, body = _status_and_json(raw)
        assert status == 401 and b"connection: close" in raw.lower()
        assert body["error"]["status"] == 401
        ok = httpx.get(f"{url}/health", headers={"authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200
    finally:
        proc.stop()


# -- one error shape, 4xx for odd input -----------------------------------------------------
@pytest.mark.parametrize("method,path,kwargs,status", [
    ("GET", "/chunks/9223372036854775808", {}, 404),
    ("GET", "/documents/99999999999999999999", {}, 404),
    ("GET", "/similar?id=9223372036854775808", {}, 404),
    ("POST", "/get", {"json": {"ids": [9223372036854775808]}}, 404),
    ("POST", "/get", {"json": {"ids": ["²"]}}, 404),
    ("GET", "/search?query=x&since=" + "9" * 30 + "d", {}, 400),
    ("GET", "/search?query=x&since=12345678901234567", {}, 400),
    ("GET", "/search?query=x&until=9999-12-31T23:59:59%2B14:00", {}, 400),
    ("POST", "/search", {"content": b'{"query": "x", "path": "\\ud800"}'}, 400),
    ("POST", "/search", {"json": {"query": "x", "k": True}}, 400),
    ("POST", "/search", {"content": b'{"query": "\xff\xfe"}'}, 400),
    ("POST", "/search", {"content": b"[" * 30000 + b"]" * 30000}, 400),
    ("GET", "/no-such-route", {}, 404),
    ("DELETE", "/search", {}, 405),
])
def test_odd_requests_get_a_4xx_in_one_json_shape(hardened, method, path, kwargs, status):
    if "content" in kwargs:
        kwargs = {**kwargs, "headers": {"content-type": "application/json"}}
    r = httpx.request(method, hardened.url + path, **kwargs)
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and body["error"]["status"] == status and body["error"]["message"], body


def test_the_host_header_of_any_loopback_address_is_answered(hardened):
    """--host 127.0.0.2 counts as loopback (no token): requests addressed to it are answered."""
    r = httpx.get(f"{hardened.url}/health", headers={"host": f"127.0.0.2:{_port(hardened.url)}"})
    assert r.status_code == 200, r.text
    assert httpx.get(f"{hardened.url}/health", headers={"host": "evil.example"}).status_code == 403


# -- MCP ------------------------------------------------------------------------------------
def test_mcp_tool_errors_are_the_json_error(hardened):
    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def run():
        async with streamable_http_client(f"{hardened.url}/mcp") as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return [await session.call_tool(name, args) for name, args in (
                    ("get", {"ids": ["9223372036854775808"]}),
                    ("search", {"query": "x", "since": "9" * 30 + "d"}),
                    ("search", {"query": "x", "k": True}),
                )]

    big_id, odd_date, bool_k = anyio.run(run)
    for result, status in ((big_id, 404), (odd_date, 400)):
        assert result.is_error
        assert json.loads(result.content[0].text)["error"]["status"] == status
    assert bool_k.is_error and "whole number" in bool_k.content[0].text


def _initialize(url: str) -> httpx.Response:
    return httpx.post(f"{url}/mcp", headers={"accept": "application/json, text/event-stream",
                                             "content-type": "application/json"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "t", "version": "0"}}})


def test_mcp_sessions_are_capped_and_expire(hardened):
    """--mcp-sessions 4: more sessions close the idlest ones (never more than 4 open); an idle
    one expires after --mcp-session-timeout (its next request: 404)."""
    opened = [_initialize(hardened.url) for _ in range(6)]
    assert [r.status_code for r in opened] == [200] * 6
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-protocol-version": "2025-06-18"}

    def ping(r):
        return httpx.post(f"{hardened.url}/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                          headers={**headers, "mcp-session-id": r.headers["mcp-session-id"]}).status_code

    assert [ping(r) for r in opened] == [404, 404, 200, 200, 200, 200]  # the two idlest made room
    time.sleep(3.5)  # --mcp-session-timeout 2: the idle ones are closed
    assert ping(opened[-1]) == 404
    again = _initialize(hardened.url)
    assert again.status_code == 200, again.text


def test_mcp_calls_reusing_one_id_are_all_answered(hardened):
    """Concurrent calls with the same JSON-RPC id in one session: the first is answered, the
    others refused at once (409), none left waiting."""
    import asyncio

    r = _initialize(hardened.url)
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    httpx.post(f"{hardened.url}/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "status", "arguments": {}}}

    async def all_at_once():
        async with httpx.AsyncClient(timeout=8) as client:
            async def one():
                try:
                    return (await client.post(f"{hardened.url}/mcp", headers=headers, json=call)).status_code
                except httpx.TimeoutException:
                    return "no answer"
            return await asyncio.gather(*[one() for _ in range(20)])

    statuses = asyncio.run(all_at_once())
    assert set(statuses) <= {200, 409} and 200 in statuses, statuses
    again = httpx.post(f"{hardened.url}/mcp", headers=headers, json=call, timeout=8)  # the id is free again
    assert again.status_code == 200 and json.loads(again.text)["id"] == 7


# -- signals --------------------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_server_cleanly(tiny_bert_bundle, tmp_path, sig):
    docs = write_docs(tmp_path / "docs")
    lib = build_library(tmp_path / "lib", docs, tiny_bert_bundle)
    proc, url = _start(lib, {"HEFSEARCH_HOME": str(tmp_path / "home")}, "--watch", "--debounce", "300")
    try:
        proc.wait_for(r"watch: caught up", timeout=60)
        assert (lib / "serve.json").exists()
        # an open MCP stream must not keep the server from stopping (graceful-shutdown timeout)
        session = _initialize(url).headers["mcp-session-id"]
        stream = socket.create_connection(("127.0.0.1", _port(url)), timeout=5)
        stream.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                       f"mcp-session-id: {session}\r\nmcp-protocol-version: 2025-06-18\r\n\r\n".encode())
        time.sleep(0.5)
        proc.popen.send_signal(sig)
        code = proc.popen.wait(timeout=30)
        stream.close()
    finally:
        proc.stop()
    wait_until(lambda: any("watcher stopped" in line for line in proc.lines), timeout=5, what="the watcher's stop")
    assert code == 0, proc.lines[-20:]
    assert not (lib / "serve.json").exists()
    assert any(f"stopped ({signal.Signals(sig).name})" in line for line in proc.lines)
    from hefsearch.app.freshness import WatchLock

    lock = WatchLock(lib)  # the watcher let its lock go: another watcher may start
    lock.acquire()
    lock.release()


@pytest.mark.parametrize("head", [b"GARBAGE\r\n\r\n", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
                                  + b"a" * 20_000])
def test_a_request_that_is_not_http_gets_the_json_error(hardened, head):
    with _connect(hardened.url) as s:
        s.sendall(head)  # the second: a head over 16 KiB still incomplete
        time.sleep(0.2)
        try:
            s.sendall(b"\r\n\r\n")
        except OSError:
            pass
        status, body = _status_and_json(_answer(s, 3))
    if head.startswith(b"GARBAGE"):
        assert status == 400 and body["error"]["status"] == 400 and "not valid HTTP/1.1" in body["error"]["message"]
    else:
        assert status == 431 and body["error"]["status"] == 431 and "16 KiB" in body["error"]["message"]


def test_a_fault_of_the_server_is_a_500_in_the_same_shape():
    """In process (no socket): a handler that crashes answers 500 JSON, without its internals."""
    import anyio

    from hefsearch.app.service import Limits
    from hefsearch.serve.http import make_http_app

    class Broken:
        limits = Limits()

        def status(self):
            raise RuntimeError("internal detail")

    async def get():
        transport = httpx.ASGITransport(app=make_http_app(Broken()), raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.get("/status")

    r = anyio.run(get)
    assert r.status_code == 500 and r.json()["error"]["status"] == 500
    assert "internal detail" not in r.text and "fault of the server" in r.json()["error"]["hint"]

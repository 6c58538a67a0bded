"""``hefsearch mcp`` and a recorded server (``serve.json``): a planted record is not believed
(the queries and a token would go where it says), a stale one neither; the token comes from
this user's own configuration; a recorded server is never reached through a proxy. And the
token file: a readable-by-others mode is warned about, a broken one is a clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from tests.support.serve_fixtures import build_library, write_docs


class _Recorder(BaseHTTPRequestHandler):
    seen: list = []

    def _any(self):
        self.seen.append((self.command, self.path, self.headers.get("authorization")))
        body = json.dumps({"documents": 999, "hits": []}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _any

    def log_message(self, *args):
        pass


@pytest.fixture
def planted_server():
    """An HTTP server on 127.0.0.1 that records every request (the attacker's)."""
    _Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_planted_serve_json_is_not_believed(tiny_bert_bundle, tmp_path, planted_server):
    """A record naming a live pid (this test's), a server of the planter's and a private file
    as the token: mcp opens the library itself, says why, and sends nothing anywhere."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    url, seen = planted_server
    docs = write_docs(tmp_path / "docs")
    lib = build_library(tmp_path / "lib", docs, tiny_bert_bundle)
    secret = tmp_path / "api-key"
    secret.write_text("sk-very-private-api-key-0123456789\n")
    secret.chmod(0o600)
    (lib / "serve.json").write_text(json.dumps({"pid": os.getpid(), "url": url, "started": time.time(),
                                                "token_required": True, "token_file": str(secret)}))
    env = {**os.environ, "HEFSEARCH_HOME": str(tmp_path / "home")}

    async def run():
        params = StdioServerParameters(command=sys.executable, args=["-m", "hefsearch", "mcp", "--library", str(lib)],
                                       env=env)
        with open(tmp_path / "stderr", "w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.call_tool("status", {})

    result = anyio.run(run)
    said = (tmp_path / "stderr").read_text()
    assert not result.is_error and json.loads(result.content[0].text)["documents"] == 4  # the real library
    assert seen == []  # neither the queries nor the key went to the planted server
    assert "not using the recorded server" in said and "is not 'hefsearch serve'" in said
    assert "in this process" in said


def _record(lib, **state):
    lib.mkdir(parents=True, exist_ok=True)
    path = lib / "serve.json"
    path.write_text(json.dumps({"pid": os.getpid(), "url": "http://127.0.0.1:9", "started": time.time(), **state}))
    path.chmod(0o644)
    return path


def test_what_makes_a_record_untrusted(tmp_path, monkeypatch):
    from hefsearch.serve import trust
    from hefsearch.serve.trust import Untrusted, trusted_server

    lib = tmp_path / "lib"
    assert trusted_server(lib) is None  # no record
    path = _record(lib)
    path.chmod(0o664)
    with pytest.raises(Untrusted, match="can be changed by other users"):
        trusted_server(lib)
    path.chmod(0o644)
    with pytest.raises(Untrusted, match="is not 'hefsearch serve'"):
        trusted_server(lib)  # this process is pytest
    monkeypatch.setattr(trust, "_is_hefsearch_serve", lambda argv: True)
    _record(lib, started=time.time() - 10 * 365 * 86400)  # the pid was reused since
    with pytest.raises(Untrusted, match="stale"):
        trusted_server(lib)
    _record(lib, url="http://192.168.1.20:8765")
    with pytest.raises(Untrusted, match="not on this machine"):
        trusted_server(lib)
    _record(lib)  # pid and start time fine, but it does not listen on 127.0.0.1:9
    with pytest.raises(Untrusted, match="does not listen on 127.0.0.1:9"):
        trusted_server(lib)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _record(lib, pid=dead.pid)
    assert trusted_server(lib) is None  # the server is gone: no record to speak of
    path.unlink()
    os.symlink(tmp_path / "elsewhere.json", path)
    (tmp_path / "elsewhere.json").write_text("{}")
    with pytest.raises(Untrusted, match="not a regular file"):
        trusted_server(lib)


def test_the_command_lines_of_a_server():
    from hefsearch.serve.trust import _is_hefsearch_serve

    assert _is_hefsearch_serve(["/usr/bin/python3", "/home/u/.venv/bin/hefsearch", "serve", "--host", "0.0.0.0"])
    assert _is_hefsearch_serve(["python", "-m", "hefsearch", "serve", "--port", "0"])
    assert not _is_hefsearch_serve(["python", "-m", "pytest", "tests/test_serve.py", "-k", "serve"])
    assert not _is_hefsearch_serve(["python", "-m", "hefsearch", "watch"])


def test_recorded_addresses_are_reached_on_this_machine_without_a_proxy(monkeypatch):
    from hefsearch.serve.remote import RemoteService
    from hefsearch.serve.trust import connect_url

    assert connect_url("http://0.0.0.0:8765") == "http://127.0.0.1:8765"
    assert connect_url("http://[::]:8765") == "http://[::1]:8765"
    assert connect_url("http://127.0.0.2:8765") == "http://127.0.0.2:8765"
    assert connect_url("http://localhost:8765/") == "http://127.0.0.1:8765"
    for bad in ("http://10.0.0.5:8765", "https://127.0.0.1:1", "http://evil.example:80", "http://127.0.0.1", None, 5):
        assert connect_url(bad) is None, bad

    monkeypatch.setenv("http_proxy", "http://127.0.0.1:3128")
    monkeypatch.delenv("no_proxy", raising=False)

    def proxies(service):
        return next((h.proxies for h in service._opener.handlers if isinstance(h, urllib.request.ProxyHandler)), {})

    for url in ("http://0.0.0.0:8765", "http://[::]:8765", "http://127.0.0.2:8765", "http://[::1]:8765",
                "http://localhost:8765"):
        assert proxies(RemoteService(url, "t")) == {}, url
    assert proxies(RemoteService("http://pi.example:8765", "t", local=True)) == {}
    assert proxies(RemoteService("http://pi.example:8765", "t"))["http"] == "http://127.0.0.1:3128"


def test_the_token_comes_from_local_configuration_not_from_the_record(tmp_path, monkeypatch):
    from hefsearch.serve.mcp_stdio import mcp_token, recorded_server
    from hefsearch.serve import trust

    monkeypatch.setenv("HEFSEARCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HEFSEARCH_TOKEN", raising=False)
    said = []
    assert mcp_token(None, said.append, default=True) is None  # nothing configured here
    lib = tmp_path / "lib"
    recorded = tmp_path / "recorded-token"
    recorded.write_text("recorded-token-0123456789\n")
    _record(lib, token_required=True, token_file=str(recorded))
    monkeypatch.setattr(trust, "_check_process", lambda *a: None)
    url, token, why = recorded_server(lib, None)
    assert url is None and token is None and "needs a token" in why  # the record's token file is not read

    (tmp_path / "home").mkdir()
    (tmp_path / "home/serve-token").write_text("default-token-0123456789\n")
    (tmp_path / "home/serve-token").chmod(0o644)
    assert mcp_token(None, said.append) is None  # --url elsewhere: not this machine's token
    assert recorded_server(lib, None, said.append) == ("http://127.0.0.1:9", "default-token-0123456789", None)
    assert said and "chmod 600" in said[0]
    assert recorded_server(lib, "given-token-0123456789")[1] == "given-token-0123456789"
    monkeypatch.setenv("HEFSEARCH_TOKEN", "env-token-0123456789")
    assert mcp_token(None, said.append) == "env-token-0123456789"
    monkeypatch.delenv("HEFSEARCH_TOKEN")
    (tmp_path / "home/serve-token").write_bytes(b"\xff\xfe")  # broken, and needed: mcp answers itself
    url, token, why = recorded_server(lib, None)
    assert url is None and "not UTF-8" in why


# -- the token file ------------------------------------------------------------------------
@pytest.fixture
def cli(monkeypatch, tmp_path):
    from hefsearch.cli.main import main

    seen = []
    monkeypatch.setattr("hefsearch.serve.server.serve", lambda config: seen.append(config))

    def invoke(*args):
        return CliRunner().invoke(main, list(args))

    return invoke, seen


def test_a_token_file_others_can_read_is_warned_about(cli, tmp_path):
    invoke, seen = cli
    token = tmp_path / "token"
    token.write_text("a-token-of-enough-length-0123\n")
    token.chmod(0o644)
    r = invoke("serve", "--token-file", str(token))
    assert r.exit_code == 0 and seen[0].token == "a-token-of-enough-length-0123"
    assert "mode 0644" in r.output and f"chmod 600 {token}" in r.output
    token.chmod(0o600)
    assert "warning" not in invoke("serve", "--token-file", str(token)).output


def test_broken_token_files_are_clear_errors(cli, tmp_path):
    invoke, seen = cli
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe\x00token")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cases = [(binary, "is not UTF-8 text"), (dangling, "which does not exist"),
             (blocker / "sub" / "token", "Cannot create the folder")]
    for path, words in cases:
        r = invoke("serve", "--host", "0.0.0.0", "--token-file", str(path))
        assert r.exit_code != 0 and words in r.output, r.output
        assert "Traceback" not in r.output and not isinstance(r.exception, (OSError, UnicodeError)), r.exception
    r = invoke("mcp", "--token-file", str(binary))
    assert r.exit_code != 0 and "is not UTF-8 text" in r.output
    assert seen == []

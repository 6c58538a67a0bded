"""Running ``hefsearch serve``: one warm process that holds the encoder (NPU or CPU) and the
library, answers HTTP and MCP (``/mcp``) on one port, and with ``--watch`` also runs the
watcher in a thread of its own.

Binding: 127.0.0.1 by default. Any other address needs a token (:func:`needs_token`): the one
in ``--token-file``, else a generated one written to a 0600 file in hefsearch's data folder
and printed once, when it is made. ``<library>/serve.json`` tells ``hefsearch mcp`` where the
server of a library listens (removed at exit; a stale one is recognised by its pid).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hefsearch.embed.errors import HefsearchError

log = logging.getLogger("hefsearch.serve")

SERVE_STATE = "serve.json"
TOKEN_FILE = "serve-token"
DEFAULT_PORT = 8765


class ServeError(HefsearchError):
    title = "serve"


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def needs_token(host: str) -> bool:
    """Whether a bind to ``host`` must require a token: anything but loopback."""
    return not is_loopback(host)


def default_token_file() -> Path:
    from hefsearch.index.library import data_dir

    return data_dir() / TOKEN_FILE


def load_or_create_token(path: Path) -> tuple[str, bool]:
    """(token, created now): read the token file, or make one (0600, 32 random bytes, URL-safe)."""
    path = Path(path).expanduser()
    with contextlib.suppress(FileNotFoundError):
        token = path.read_text(encoding="utf-8").strip()
        if len(token) < 16:
            raise ServeError(f"The token in {path} is too short ({len(token)} characters).",
                             "Use at least 16 random characters, or delete the file to have one made.")
        return token, False
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token, True


@dataclass
class ServeConfig:
    library: str | None = None
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = None
    token_file: Path | None = None
    bundle: str | None = None
    mcp: bool = True
    watch: bool = False
    watch_options: object = None
    limits: object = None
    #: called with one line per event (startup, watcher runs)
    say: Callable[[str], None] = print
    #: set once the server listens (SIGTERM/SIGINT stop it: uvicorn)
    ready: threading.Event = field(default_factory=threading.Event)
    #: (host, port) listened on, once known
    address: tuple | None = None


def make_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # no Nagle: a keep-alive response in two writes otherwise waits 40 ms for the delayed ACK (asyncio
    # sets TCP_NODELAY only on sockets made with proto IPPROTO_TCP; accepted ones inherit it here)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as e:
        sock.close()
        raise ServeError(f"Cannot listen on {host}:{port}: {e.strerror or e}.",
                         "Pick another port with --port (0: any free port), or stop what uses it.") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(config: ServeConfig) -> None:
    """Open the library, warm the encoder, listen, answer until SIGINT/SIGTERM."""
    import uvicorn

    from hefsearch.app.service import LibraryService, Limits
    from hefsearch.app.session import LibrarySession

    from .http import make_http_app
    from .mcp import make_mcp

    if needs_token(config.host) and not config.token:
        raise ServeError(f"Listening on {config.host} needs a token.", "Pass --token-file FILE (or let serve make one).")
    session = LibrarySession.open(config.library, bundle=config.bundle)
    watcher = None
    try:
        service = LibraryService(session, config.limits or Limits())
        t = time.perf_counter()
        try:
            session.warm_up()  # the encoder (and device) open before the first request
            config.say(f"encoder ready in {time.perf_counter() - t:.1f} s: "
                       f"{session.searcher.encoder_for(session.default_space()).backend_reason}"
                       if session.default_space() else "library has no vector space yet: keyword search only")
        except HefsearchError as e:
            config.say(f"warning: the encoder did not open ({e.message}); vector searches will say why")
        app = make_http_app(service, token=config.token, loopback=is_loopback(config.host),
                            mcp_server=make_mcp(service) if config.mcp else None, host=config.host)
        sock = make_socket(config.host, config.port)
        config.address = sock.getsockname()[:2]
        url = f"http://{_url_host(config.host)}:{config.address[1]}"
        if config.watch:
            watcher = _start_watcher(config, session)
        _write_state(session.library.path, url, config)
        config.say(f"hefsearch serve: {url}  (web page: {url}/; JSON API: /search /similar /chunks/ID /documents/ID /status; "
                   f"OpenAPI: /openapi.json{'; MCP: ' + url + '/mcp' if config.mcp else ''})"
                   + ("; token required" if config.token else ""))
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False,
                                               limit_concurrency=256, timeout_keep_alive=30,
                                               h11_max_incomplete_event_size=16 * 1024))
        config.ready.set()
        server.run(sockets=[sock])
    finally:
        _remove_state(session.library.path)
        if watcher is not None:
            watcher.stop()
        session.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _start_watcher(config: ServeConfig, session):
    from hefsearch.app.watch import Watcher

    def say(event):
        config.say(f"watch: {event.message}")

    watcher = Watcher(session.library.path, options=config.watch_options, on_event=say)
    thread = threading.Thread(target=_run_watcher, args=(watcher, config), name="hefsearch-serve-watch",
                              daemon=True)
    thread.start()
    return watcher


def _run_watcher(watcher, config) -> None:
    try:
        watcher.run()
    except HefsearchError as e:
        config.say(f"watch stopped: {e.message}" + (f" ({e.hint})" if e.hint else ""))


def _write_state(folder, url: str, config: ServeConfig) -> None:
    from hefsearch.embed.atomic_write import write_json_atomic

    state = {"pid": os.getpid(), "url": url, "started": time.time(), "token_required": bool(config.token),
             "token_file": str(config.token_file) if config.token_file else None}
    with contextlib.suppress(OSError):
        write_json_atomic(Path(folder) / SERVE_STATE, state)


def _remove_state(folder) -> None:
    with contextlib.suppress(OSError, ValueError):
        path = Path(folder) / SERVE_STATE
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()


def running_server(folder) -> dict | None:
    """The state of the server of the library at ``folder``, or None when none runs."""
    try:
        state = json.loads((Path(folder) / SERVE_STATE).read_text(encoding="utf-8"))
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state

"""Running ``hefsearch serve``: one warm process that holds the encoder (NPU or CPU) and the
library, answers HTTP and MCP (``/mcp``) on one port, and with ``--watch`` also runs the
watcher in a thread of its own.

Binding: 127.0.0.1 by default. Any other address needs a token (:func:`needs_token`): the one
in ``--token-file``, else a generated one written to a 0600 file in hefsearch's data folder
and printed once, when it is made. ``<library>/serve.json`` tells ``hefsearch mcp`` where the
server of a library listens (removed at exit; :mod:`hefsearch.serve.trust` decides whether
``hefsearch mcp`` believes it).

Signals: the server owns SIGTERM and SIGINT (uvicorn's own handling re-raises the signal after
its shutdown, which killed the process with 143 before the cleanup ran): either one stops
the server (open requests get ``shutdown_timeout_s`` to finish), then ``serve.json`` is
removed, the watcher stopped and the library closed, and the process exits 0.

Slow or idle clients: see :mod:`hefsearch.serve.protocol` (request-head timeout, connection
cap) and :class:`hefsearch.serve.http.Guard` (body size and deadline).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import socket
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hefsearch.base.errors import HefsearchError

from hefsearch.base.hosts import is_loopback

log = logging.getLogger("hefsearch.serve")

SERVE_STATE = "serve.json"
TOKEN_FILE = "serve-token"
DEFAULT_PORT = 8765


class ServeError(HefsearchError):
    title = "serve"


def needs_token(host: str) -> bool:
    """Whether a bind to ``host`` must require a token: anything but loopback."""
    return not is_loopback(host)


def default_token_file() -> Path:
    from hefsearch.base.locations import data_dir

    return data_dir() / TOKEN_FILE


def read_token(path: Path) -> str:
    """The token in ``path`` (its first line), or a :class:`ServeError` that says what is wrong
    with the file (missing, a dangling link, unreadable, not UTF-8, too short)."""
    path = Path(path).expanduser()
    if path.is_symlink() and not path.exists():
        raise ServeError(f"The token file {path} is a link to {os.readlink(path)}, which does not exist.",
                         "Point it at the token file, or remove the link to have a new token made there.")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ServeError(f"Cannot read the token file {path}: {e.strerror or e}.",
                         "Check its permissions, or give another file with --token-file.") from None
    try:
        lines = raw.decode("utf-8").strip().splitlines()
    except UnicodeDecodeError:
        raise ServeError(f"The token file {path} is not UTF-8 text.",
                         "A token file holds one line of text: delete it to have one made, or write "
                         "one there (at least 16 random characters).") from None
    token = lines[0].strip() if lines else ""
    if len(token) < 16:
        raise ServeError(f"The token in {path} is too short ({len(token)} characters).",
                         "Use at least 16 random characters, or delete the file to have one made.")
    return token


def token_file_warning(path: Path) -> str | None:
    """A warning when other users can read the token file (e.g. mode 0644), else None."""
    try:
        st = Path(path).expanduser().stat()
    except OSError:
        return None
    if st.st_mode & 0o077:
        return (f"warning: the token file {path} has mode {stat.S_IMODE(st.st_mode):04o}: other users of this "
                f"machine can read the token. Make it private: chmod 600 {path}")
    return None


def load_or_create_token(path: Path) -> tuple[str, bool]:
    """(token, created now): read the token file, or make one (0600, 32 random bytes, URL-safe)."""
    path = Path(path).expanduser()
    if path.exists() or path.is_symlink():
        return read_token(path), False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ServeError(f"Cannot create the folder {path.parent} for the token file: {e.strerror or e}.",
                         "Give a token file in a folder you can write with --token-file FILE.") from None
    from hefsearch.base.atomic_write import create_bytes_atomic

    token = secrets.token_urlsafe(32)
    try:  # whole or not at all, 0600 from the start, never over a file or link put there meanwhile
        create_bytes_atomic(path, (token + "\n").encode("utf-8"), mode=0o600)
    except OSError as e:
        raise ServeError(f"Cannot create the token file {path}: {e.strerror or e}.",
                         "Give a token file in a folder you can write with --token-file FILE.") from None
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
    #: seconds a request head may take (from the opening, or from a later request's first byte)
    head_timeout_s: float = 10.0
    #: seconds a kept-alive connection may stay quiet between requests
    idle_timeout_s: float = 15.0
    #: seconds a request body may take to arrive in full
    body_timeout_s: float = 15.0
    #: open connections; beyond, the one that waited longest for a request is closed
    max_connections: int = 256
    #: seconds open requests get to finish once asked to stop
    shutdown_timeout_s: float = 5.0
    #: MCP sessions open at once, and the idle time after which one is closed
    mcp_sessions: int = 64
    mcp_session_idle_s: float = 600.0


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
    """Open the library, warm the encoder, listen, answer until SIGINT/SIGTERM (then clean up
    and return: the process exits 0)."""
    if needs_token(config.host) and not config.token:
        raise ServeError(f"Listening on {config.host} needs a token.",
                         "Pass --token-file FILE (or let serve make one).")
    stop = _Signals()
    with stop.installed():
        _serve(config, stop)
    if stop.received:
        config.say(f"hefsearch serve: stopped ({signal.Signals(stop.received[0]).name})")


def _serve(config: ServeConfig, stop: "_Signals") -> None:
    import uvicorn

    from hefsearch.app.service import LibraryService, Limits
    from hefsearch.app.session import LibrarySession

    from .http import McpMount, make_http_app
    from .mcp import make_mcp
    from .protocol import protocol_class

    session = LibrarySession.open(config.library, bundle=config.bundle)
    watcher = thread = None
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
        if stop.received:
            return
        mcp = McpMount(make_mcp(service), config.mcp_sessions, config.mcp_session_idle_s) if config.mcp else None
        app = make_http_app(service, token=config.token, loopback=is_loopback(config.host), mcp=mcp,
                            host=config.host, body_timeout_s=config.body_timeout_s)
        sock = make_socket(config.host, config.port)
        config.address = sock.getsockname()[:2]
        url = f"http://{url_host(config.host)}:{config.address[1]}"
        if config.watch:
            watcher, thread = _start_watcher(config, session)
        _write_state(session.library.path, url, config)
        config.say(f"hefsearch serve: {url}  (web page: {url}/; JSON API: /search /similar /chunks/ID /documents/ID /status; "
                   f"OpenAPI: /openapi.json{'; MCP: ' + url + '/mcp' if config.mcp else ''})"
                   + ("; token required" if config.token else ""))
        server = uvicorn.Server(uvicorn.Config(
            app, log_level="warning", lifespan="on", access_log=False,
            # uvicorn's limit_concurrency counts connections (idle ones too): the protocol's cap
            # and the service's work slots replace it
            limit_concurrency=None,
            http=protocol_class(head_timeout_s=config.head_timeout_s, max_connections=config.max_connections),
            timeout_keep_alive=config.idle_timeout_s, timeout_graceful_shutdown=config.shutdown_timeout_s,
            h11_max_incomplete_event_size=16 * 1024))
        server.capture_signals = contextlib.nullcontext  # _Signals has them; uvicorn's re-raise them
        stop.server = server
        config.ready.set()
        if not stop.received:
            server.run(sockets=[sock])
    finally:
        _remove_state(session.library.path)
        if watcher is not None:
            watcher.stop()
            thread.join(timeout=30)
        session.close()


class _Signals:
    """SIGTERM and SIGINT, for the whole of :func:`serve`: recorded, and passed on to the web
    server once it runs (which then stops); never re-raised."""

    def __init__(self):
        self.received: list[int] = []
        self.server = None

    def handle(self, sig, frame) -> None:
        self.received.append(sig)
        if self.server is not None:
            self.server.handle_exit(sig, frame)

    @contextlib.contextmanager
    def installed(self):
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only (tests run serve in a thread)
            return
        before = {sig: signal.signal(sig, self.handle) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)


def url_host(host: str) -> str:
    """``host`` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _start_watcher(config: ServeConfig, session):
    from hefsearch.app.watch import Watcher

    from hefsearch.base.terminal_text import for_terminal

    def say(event):
        config.say(f"watch: {for_terminal(event.message)}")

    watcher = Watcher(session.library.path, options=config.watch_options, on_event=say)
    thread = threading.Thread(target=_run_watcher, args=(watcher, config), name="hefsearch-serve-watch",
                              daemon=True)
    thread.start()
    return watcher, thread


def _run_watcher(watcher, config) -> None:
    try:
        watcher.run()
    except HefsearchError as e:  # the message may name a file: escaped as every other line
        from hefsearch.base.terminal_text import for_terminal

        config.say(for_terminal(f"watch stopped: {e.message}" + (f" ({e.hint})" if e.hint else "")))


def _write_state(folder, url: str, config: ServeConfig) -> None:
    """``serve.json``, mode 0644 whatever the umask (a group-writable one is not trusted),
    replaced atomically (never half written)."""
    from hefsearch.base.atomic_write import write_json_atomic

    state = {"pid": os.getpid(), "url": url, "started": time.time(), "token_required": bool(config.token),
             "token_file": str(config.token_file) if config.token_file else None}
    path = Path(folder) / SERVE_STATE
    try:
        write_json_atomic(path, state, mode=0o644)
    except OSError as e:
        config.say(f"warning: cannot write {path} ({e.strerror or e}): 'hefsearch mcp' will not find this server")


def _remove_state(folder) -> None:
    with contextlib.suppress(OSError, ValueError):
        path = Path(folder) / SERVE_STATE
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()


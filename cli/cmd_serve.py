"""``hefsearch serve`` (HTTP + MCP, one warm process) and ``hefsearch mcp`` (MCP over stdio)."""

from __future__ import annotations

import click

from .cmd_watch import watch_options, watch_settings
from .options import bundle_option, library_option


@click.command("serve")
@library_option()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback (e.g. 0.0.0.0 to be reached from your "
                   "laptop) needs a token: see --token-file.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port (0: any free one; the address is printed).")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="File holding the Bearer token every request must send. Required off loopback: "
                   "when the file does not exist a token is generated, written there (mode 0600) "
                   "and printed once [default: serve-token in hefsearch's data folder]. Given on "
                   "loopback, the token is required there too.")
@click.option("--watch", "watch", is_flag=True, help="Also keep the library current (hefsearch watch) in this process.")
@watch_options
@click.option("--no-mcp", is_flag=True, help="Serve the JSON API only, no /mcp.")
@click.option("--max-k", type=click.IntRange(1, 1000), default=100, show_default=True,
              help="Largest k a request may ask for.")
@click.option("--max-concurrent", type=click.IntRange(1, 1024), default=16, show_default=True,
              help="Requests answered or waiting at once; more get 503 (busy).")
@click.option("--max-connections", type=click.IntRange(1, 100_000), default=256, show_default=True,
              help="Open connections. Beyond, the connection that has waited longest without sending a "
                   "request is closed to make room.")
@click.option("--head-timeout", type=click.FloatRange(0.1, 3600), default=10.0, show_default=True, metavar="SECONDS",
              help="Time a connection has to send a complete request head; else it is closed.")
@click.option("--idle-timeout", type=click.FloatRange(0.1, 3600), default=15.0, show_default=True, metavar="SECONDS",
              help="Time a kept-alive connection may stay quiet between requests.")
@click.option("--body-timeout", type=click.FloatRange(0.1, 3600), default=15.0, show_default=True, metavar="SECONDS",
              help="Time a request body has to arrive in full; else 408.")
@click.option("--mcp-sessions", type=click.IntRange(1, 100_000), default=64, show_default=True,
              help="MCP sessions open at once; a new one beyond closes the one unused for longest "
                   "(503 only while all are answering).")
@click.option("--mcp-session-timeout", type=click.FloatRange(1, 86_400), default=600.0, show_default=True,
              metavar="SECONDS", help="An MCP session unused this long is closed.")
@bundle_option()
def serve_cmd(library_path, host, port, token_file, watch, poll, poll_interval, debounce_ms, rescan_min,
              no_mcp, max_k, max_concurrent, max_connections, head_timeout, idle_timeout, body_timeout,
              mcp_sessions, mcp_session_timeout, bundle):
    """Serve the library over HTTP (a web page, JSON API + OpenAPI) and MCP from one warm process.

    The encoder (NPU or CPU) is opened once, so a query costs its search and its encoding,
    not a process start. Read-only: it answers from the library's database and never reads
    or returns a file outside the library's folders.

    \b
    On the Pi:      hefsearch serve --host 0.0.0.0 --watch      (prints the token once)
    A browser:      http://pi:8765/?q=rent+due  (asks once for the token; or ssh -L 8765:127.0.0.1:8765 pi)
    From a laptop:  curl -H "Authorization: Bearer $TOKEN" "http://pi:8765/search?query=rent+due"
    MCP clients:    http://pi:8765/mcp (same token), or 'hefsearch mcp' over stdio.
    """
    from pathlib import Path

    from hefsearch.app.service import Limits
    from hefsearch.base.terminal_text import for_terminal
    from hefsearch.serve.server import (ServeConfig, default_token_file, load_or_create_token, needs_token, serve,
                                        token_file_warning)

    token = None
    path = Path(token_file).expanduser() if token_file else None
    if path is not None or needs_token(host):
        path = path or default_token_file()
        token, created = load_or_create_token(path)
        if created:
            click.secho(for_terminal(f"token (saved in {path}, mode 0600; shown only now): {token}"), fg="yellow",
                        err=True)
        else:
            click.echo(for_terminal(f"token: in {path}"), err=True)
            warning = token_file_warning(path)
            if warning:
                click.secho(for_terminal(warning), fg="yellow", err=True)
    serve(ServeConfig(library=library_path, host=host, port=port, token=token, token_file=path, bundle=bundle,
                      mcp=not no_mcp, watch=watch,
                      watch_options=watch_settings(poll, poll_interval, debounce_ms, rescan_min),
                      limits=Limits(max_k=max_k, max_pending=max_concurrent),
                      max_connections=max_connections, head_timeout_s=head_timeout, idle_timeout_s=idle_timeout,
                      body_timeout_s=body_timeout, mcp_sessions=mcp_sessions,
                      mcp_session_idle_s=mcp_session_timeout,
                      say=_say))


@click.command("mcp")
@library_option()
@click.option("--url", default=None, metavar="URL",
              help="Answer from the hefsearch server at URL (e.g. http://pi:8765) [default: the running "
                   "server of this library if there is one, else this process opens the library].")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="The server's token file (for a server that requires one) [default: HEFSEARCH_TOKEN, "
                   "which holds the token itself, else serve-token in hefsearch's data folder].")
@bundle_option()
def mcp_cmd(library_path, url, token_file, bundle):
    """MCP server over stdio, for desktop assistants (tools: search, get, similar, status).

    \b
    Add it to an assistant's MCP configuration, e.g.:
      {"mcpServers": {"hefsearch": {"command": "hefsearch", "args": ["mcp"]}}}
    With 'hefsearch serve' running (here or on a Pi: --url), the answers come from its warm
    process; otherwise this process opens the library and the encoder itself. A server
    recorded in the library (serve.json) is used only when it checks out (file owned by you
    and not writable by others, a live 'hefsearch serve' of yours on that address and port); the token
    never comes from the record.
    """
    from hefsearch.serve.mcp_stdio import serve_stdio

    serve_stdio(library_path, url, token_file, bundle, say=_say)


def _say(line: str) -> None:
    """A line of the server or of ``hefsearch mcp`` on stderr: it names the library, files and
    recorded addresses, so it is escaped as every other front end's output."""
    from hefsearch.base.terminal_text import for_terminal

    click.echo(for_terminal(line, multiline=True), err=True)

"""``hefsearch mcp``: the MCP tools over stdin/stdout, answered by the library's running server
(:class:`~hefsearch.serve.remote.RemoteService`) when there is one it can trust, or by this
process (:class:`~hefsearch.app.service.LibraryService`); the CLI only parses the flags."""

from __future__ import annotations

import contextlib
from pathlib import Path

from hefsearch.base import settings


def serve_stdio(library_path, url: str | None, token_file: str | None, bundle: str | None, say) -> None:
    """Serve the MCP tools over stdio from the server at ``url``, else from the library's
    recorded server, else from this process; ``say(line)`` tells the user (on stderr) which."""
    import sys

    from .remote import RemoteService

    token = mcp_token(token_file, say)
    local = False
    if url is None:
        url, token, why = recorded_server(library_path, token, say)
        local = url is not None
        if why:
            say(f"hefsearch mcp: not using the recorded server: {why}")
    if url is not None:
        say(f"hefsearch mcp: answering from {url}")
        run_stdio(RemoteService(url, token, local=local))
        return
    with local_service(library_path, bundle) as service:
        say(f"hefsearch mcp: answering from {service.session.library_path} in this process")
        sys.stdout.flush()
        run_stdio(service)


@contextlib.contextmanager
def local_service(library_path, bundle):
    """A :class:`~hefsearch.app.service.LibraryService` over the library, in this process."""
    from hefsearch.app.service import LibraryService
    from hefsearch.app.session import LibrarySession

    with LibrarySession.open(library_path, bundle=bundle) as session:
        yield LibraryService(session)


def run_stdio(service) -> None:
    """Serve the MCP tools over stdin/stdout until the client closes them."""
    import anyio

    from .mcp import make_mcp

    anyio.run(make_mcp(service).run_stdio_async)


def mcp_token(token_file: str | None, say, *, default: bool = False) -> str | None:
    """The token from this user's own configuration: ``--token-file``, else ``HEFSEARCH_TOKEN``,
    else (``default``: asked for this machine's own server only, never a ``--url`` elsewhere)
    the default token file when there is one; never a path a server record names."""
    from .server import default_token_file, read_token, token_file_warning

    if token_file:
        path = Path(token_file).expanduser()
    elif settings.TOKEN.value():
        return settings.TOKEN.value().strip()
    elif not default:
        return None
    else:
        path = default_token_file()
        if not (path.exists() or path.is_symlink()):
            return None
    warning = token_file_warning(path)
    if warning:
        say(warning)
    return read_token(path)


def recorded_server(library_path, token: str | None,
                    say=lambda line: None) -> tuple[str | None, str | None, str | None]:
    """(URL of the library's running server, the token to send it, None) when its record checks
    out (:mod:`hefsearch.serve.trust`); (None, None, why not) when a record is there but not
    used; (None, None, None) when there is none. A server that needs a token and was given none
    gets the default token file's (read only then: a broken one matters only when needed)."""
    from hefsearch.app.folders import library_location
    from hefsearch.base.errors import HefsearchError

    from .trust import Untrusted, trusted_server

    local = " This process opens the library itself."
    try:
        found = trusted_server(library_location(library_path))
    except Untrusted as e:
        return None, None, f"{e}{local}"
    if found is None:
        return None, None, None
    if found.state.get("token_required") and not token:
        try:
            token = mcp_token(None, say, default=True)
        except HefsearchError as e:
            return None, None, f"{e.message}{local}"
        if not token:
            return None, None, (f"the server at {found.url} needs a token and none is configured here "
                                f"(--token-file, HEFSEARCH_TOKEN, or the default token file).{local}")
    return found.url, token, None

"""``hefsearch mcp``'s two halves: the service it answers from and the stdio loop."""

from __future__ import annotations

import contextlib
from pathlib import Path

from hefsearch.base import settings


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

    from hefsearch.serve.mcp import make_mcp

    anyio.run(make_mcp(service).run_stdio_async)


def mcp_token(token_file: str | None, say, *, default: bool = False) -> str | None:
    """The token from this user's own configuration: ``--token-file``, else ``HEFSEARCH_TOKEN``,
    else (``default``: asked for this machine's own server only, never a ``--url`` elsewhere)
    the default token file when there is one; never a path a server record names."""
    from hefsearch.serve.server import default_token_file, read_token, token_file_warning

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
    from hefsearch.base.errors import HefsearchError
    from hefsearch.index.library import resolve_library_path
    from hefsearch.serve.trust import Untrusted, trusted_server

    local = " This process opens the library itself."
    try:
        found = trusted_server(resolve_library_path(library_path))
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

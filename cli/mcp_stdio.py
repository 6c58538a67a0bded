"""``hefsearch mcp``'s two halves: the service it answers from and the stdio loop."""

from __future__ import annotations

import contextlib


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

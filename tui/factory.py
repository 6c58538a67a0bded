"""The app factory shared by the ``tui`` command and the tests (as posting's make_posting):
the app gets one :class:`~hefsearch.tui.session.TuiSession` (the library, the searcher,
the re-index encoders and the launcher) and the user's :class:`~hefsearch.tui.settings.TuiSettings`,
so tests run the real app around a library they built."""

from __future__ import annotations

from .app import HefsearchApp
from .history import HISTORY_FILE, QueryHistory
from .session import TuiSession
from .settings import TuiSettings


def make_app(session: TuiSession, settings: TuiSettings | None = None) -> HefsearchApp:
    """Build the TUI around ``session``; query history is kept in ``<library>/tui-history.json``."""
    history = QueryHistory(session.library_path / HISTORY_FILE)
    return HefsearchApp(session, settings or TuiSettings(), history)

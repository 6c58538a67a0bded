"""The app's one door to everything outside it, without Textual: the application layer's
:class:`~hefsearch.app.session.LibrarySession` (library, search API, re-index) plus the programs
that open a hit.

:class:`TuiSession` is the only object the app calls for work; its methods run on the
app's thread workers and return the search API's own types (``SearchResult``, ``Comparison``,
``LibraryStatus``, ``SyncReport``). Tests build one around a library they made, with a
recording launcher, or subclass it to fake a method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from hefsearch.app.session import LibrarySession

from . import launch

if TYPE_CHECKING:
    from hefsearch.search import Hit


class TuiSession(LibrarySession):
    """The application's library session, and how the TUI opens a hit (``launcher(argv, terminal=bool)``;
    ``env`` is where ``$VISUAL``/``$EDITOR`` are looked up, default ``os.environ``)."""

    def __init__(self, library, searcher, *, open_encoders=None,
                 launcher: launch.Launcher = launch.run_argv, env: Mapping[str, str] | None = None):
        super().__init__(library, searcher, open_encoders=open_encoders)
        self.launcher = launcher
        self.env = env

    def plan_open(self, hit: "Hit") -> launch.LaunchPlan:
        line = None if getattr(hit, "message", None) else hit.line  # a message's lines are its own, not its file's
        return launch.plan_open(hit.path, line=line, kind=hit.doc_kind, env=self.env)

    def launch(self, plan: launch.LaunchPlan) -> None:
        self.launcher(plan.argv, terminal=plan.terminal)

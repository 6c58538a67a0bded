"""Query history for the search input: up/down walks it like a shell, and it survives restarts.

Kept next to the library (``<library>/tui-history.json``) so each library remembers its own
queries. A damaged or unwritable file never stops the app: history is a convenience.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from hefsearch.app.searching import query_text
from hefsearch.base.atomic_write import write_json_atomic

log = logging.getLogger("hefsearch.tui")

HISTORY_FILE = "tui-history.json"


class QueryHistory:
    def __init__(self, path: Path | None, limit: int = 200):
        self.path = Path(path) if path is not None else None
        self.limit = limit
        self.entries: list[str] = self._load()
        #: position while walking: len(entries) means "not walking, at the draft"
        self._pos = len(self.entries)
        self._draft = ""

    def _load(self) -> list[str]:
        if self.path is None or not self.path.exists():
            return []
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            # cleaned: a "\\udce9" escape in the file would otherwise break the next save
            queries = (query_text(str(q)) for q in data.get("queries", []))
            return [q for q in queries if q][-self.limit:]
        except (OSError, ValueError, AttributeError) as e:
            log.warning("ignoring unreadable query history %s: %s", self.path, e)
            return []

    def add(self, query: str) -> None:
        """Remember a submitted query (moved to the end if already there) and save."""
        query = query_text(query)  # as searched: clean text, at most MAX_QUERY_CHARS
        if query:
            if query in self.entries:
                self.entries.remove(query)
            self.entries.append(query)
            del self.entries[: -self.limit]
        self._pos = len(self.entries)
        self._draft = ""
        self._save()

    def older(self, current: str) -> str | None:
        """The previous query (Up). ``current`` is kept as the draft to come back to."""
        if not self.entries or self._pos == 0:
            return None
        if self._pos == len(self.entries):
            self._draft = current
        self._pos -= 1
        return self.entries[self._pos]

    def newer(self) -> str | None:
        """The next query (Down); past the newest, the draft typed before walking."""
        if self._pos >= len(self.entries):
            return None
        self._pos += 1
        return self._draft if self._pos == len(self.entries) else self.entries[self._pos]

    def _save(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.path, {"queries": self.entries})
        except OSError as e:
            log.warning("cannot save query history to %s: %s", self.path, e)

"""Folder maps (``--map OLD=NEW``) applied to a restored library's database, and the files it
cannot find at their new place.

A map rewrites the start of every stored path on a folder boundary (the longest OLD first):
documents (their printable path and, for names that are not UTF-8, their real bytes), the
failures table, and the remembered folders (``roots``, the last runs' roots, the bundle).
Sizes, mtimes and hashes stay: the next sync compares them with the files at the new place,
so an unchanged file is not embedded again (a new mtime with the same content costs a hash).
"""

from __future__ import annotations

import json
import os
import posixpath
import sqlite3
from dataclasses import dataclass, field
from typing import Sequence

from hefsearch.base.errors import HefsearchError
from hefsearch.base.terminal_text import printable

from .archive import ArchiveError
from .sync_types import path_bytes, real_path

#: examples kept of each kind of path worth reporting
EXAMPLES = 5


@dataclass
class FolderMap:
    old: str
    new: str

    @classmethod
    def parse(cls, text: str) -> "FolderMap":
        old, sep, new = text.partition("=")
        if not sep or not old or not new:
            raise HefsearchError(f"--map {text!r} is not OLD=NEW.", "Write e.g. --map /home/pi/Documents=/Users/me/Documents")
        old, new = old.rstrip("/") or "/", os.path.expanduser(new).rstrip("/") or "/"
        if not posixpath.isabs(old) or not os.path.isabs(new):
            raise HefsearchError(f"--map {text!r}: both folders must be absolute paths.",
                                 "Write e.g. --map /home/pi/Documents=/Users/me/Documents")
        return cls(posixpath.normpath(old), os.path.normpath(new))

    def apply(self, path: str) -> str | None:
        """``path`` moved to the new folder, or None when it is not under the old one."""
        if path == self.old:
            return self.new
        prefix = self.old if self.old.endswith("/") else self.old + "/"
        if path.startswith(prefix):
            return self.new.rstrip("/") + "/" + path[len(prefix):]
        return None


@dataclass
class RemapReport:
    documents: int = 0
    moved: int = 0
    #: documents under no map's old folder (kept as they were)
    outside: list[str] = field(default_factory=list)
    outside_count: int = 0
    #: documents not found at their (new) place
    missing: list[str] = field(default_factory=list)
    missing_count: int = 0


def map_path(path: str, maps: Sequence[FolderMap]) -> str | None:
    for m in sorted(maps, key=lambda m: -len(m.old)):
        out = m.apply(path)
        if out is not None:
            return out
    return None


def _map_or_keep(path, maps):
    return map_path(path, maps) if isinstance(path, str) else None


def remap_database(con: sqlite3.Connection, maps: Sequence[FolderMap]) -> RemapReport:
    """Rewrite the stored paths of the (not yet installed) library database ``con``."""
    report = RemapReport()
    rows = con.execute("SELECT id, path, path_bytes FROM documents").fetchall()
    report.documents = len(rows)
    updates = []
    for doc_id, shown, raw in rows:
        real = real_path(shown, raw)
        new = map_path(real, maps) if maps else real
        if new is None:
            report.outside_count += 1
            if len(report.outside) < EXAMPLES:
                report.outside.append(shown)
            new = real
        elif new != real:
            updates.append((printable(new), path_bytes(new), doc_id))
        if not _present(new):
            report.missing_count += 1
            if len(report.missing) < EXAMPLES:
                report.missing.append(printable(new))
    report.moved = len(updates)
    try:
        con.execute("BEGIN")
        # two steps: a path may take the place of another one's old path
        con.executemany("UPDATE documents SET path = ? WHERE id = ?", [(f"//moving/{u[2]}", u[2]) for u in updates])
        con.executemany("UPDATE documents SET path = ?, path_bytes = ? WHERE id = ?", updates)
        for (path,) in con.execute("SELECT path FROM failures").fetchall():
            new = map_path(path, maps)
            if new is not None:
                con.execute("UPDATE OR REPLACE failures SET path = ? WHERE path = ?", [new, path])
        settings = {k: json.loads(v) for k, v in con.execute("SELECT key, value FROM settings")}
        for key, value in _mapped_settings(settings, maps).items():
            con.execute("UPDATE settings SET value = ? WHERE key = ?", [json.dumps(value, ensure_ascii=False), key])
        con.execute("COMMIT")
    except sqlite3.IntegrityError as e:
        con.execute("ROLLBACK")
        raise ArchiveError(f"The folder maps put two documents at one path ({e}). Nothing was written.",
                           "Give maps whose new folders do not overlap.") from None
    return report


def _mapped_settings(settings: dict, maps: Sequence[FolderMap]) -> dict:
    """The settings that name folders, with the maps applied."""
    def roots(values):
        return [_map_or_keep(r, maps) or r for r in values or []]

    out = {}
    if settings.get("roots"):
        out["roots"] = roots(settings["roots"])
    for key in ("last_sync", "sync_started"):
        value = settings.get(key)
        if isinstance(value, dict) and value.get("roots"):
            out[key] = {**value, "roots": roots(value["roots"])}
    bundle = _map_or_keep(settings.get("bundle"), maps)
    if bundle:
        out["bundle"] = bundle
    return out


def _present(path: str) -> bool:
    """Whether the file is there: the path itself, or the container (mbox, zip) it lies in."""
    p = path
    while p and p != os.path.dirname(p):
        if os.path.lexists(p):
            return p == path or os.path.isfile(p)
        p = os.path.dirname(p)
    return False

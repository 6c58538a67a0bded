"""The library's folders: the one answer to "which folders does this library index, and which
of them are there now" (``hefsearch index`` without PATHS, the TUI's re-index, ``watch``, and
the server, which shows nothing outside them); where the library itself lives, and opening
an existing one for a verb that reads it.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from hefsearch.index.crawl import is_under

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.index.library import Library


@dataclass
class LibraryFolders:
    """Every folder a sync was given (``recorded``), and those of them there now (``present``,
    looked up on first use only: the server's per-request check needs no disk access, and a
    hung network mount must not stall it); a folder that is gone (an unmounted disk) keeps what
    is indexed from it."""

    recorded: list[Path] = field(default_factory=list)

    @classmethod
    def of(cls, folders: Sequence[str | Path]) -> "LibraryFolders":
        """``folders`` (e.g. those named on a command line)."""
        return cls([Path(f) for f in folders])

    @cached_property
    def present(self) -> list[Path]:
        return [r for r in self.recorded if os.path.exists(r)]

    @property
    def gone(self) -> list[Path]:
        return [r for r in self.recorded if r not in self.present]


def library_folders(library: "Library") -> LibraryFolders:
    """The folders of ``library`` (``Library.recorded_roots``: each sync records the folders it
    was given); none when the library cannot be read now."""
    try:
        recorded = library.recorded_roots()
    except Exception:  # a library that cannot be read now: no folders known
        recorded = []
    return LibraryFolders.of(recorded)


def library_location(name_or_path=None) -> Path:
    """The folder of the library a front end names (``--library NAME_OR_PATH``; None: the
    default one, ``$HEFSEARCH_LIBRARY`` or the data folder's), whether it exists or not."""
    from hefsearch.index.library import resolve_library_path

    return resolve_library_path(name_or_path)


def open_existing_library(name_or_path=None) -> "Library":
    """The library a front end names, opened for a verb that reads it; never created (a missing
    one is an error that says how to make it). The caller closes it."""
    from hefsearch.index.library import Library

    return Library.open(name_or_path, create=False)


@contextmanager
def existing_library(name_or_path=None) -> Iterator["Library"]:
    """:func:`open_existing_library`, closed again at the end of the ``with``."""
    library = open_existing_library(name_or_path)
    try:
        yield library
    finally:
        library.close()


def under_roots(path: str, roots: Sequence[str | Path]) -> bool:
    """Whether ``path`` lies in one of the library's folders."""
    return any(is_under(path, str(r)) for r in roots)

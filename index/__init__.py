"""hefsearch.index: the library (SQLite + one FAISS index per vector space), crawl, chunk and
incremental sync; reading a document is :mod:`hefsearch.readers`.

The names below are imported on first use, so ``import hefsearch.index`` stays cheap.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Library": "library", "ChunkRecord": "library", "LibraryStatus": "library",
    "resolve_library_path": "library_folder", "data_dir": "library",
    "Space": "spaces", "SpaceInfo": "spaces",
    "LibraryError": "errors", "SpaceError": "errors", "FingerprintMismatch": "errors",
    "LibraryBusy": "errors",
    "SyncReport": "sync", "ProgressEvent": "sync", "SyncOptions": "sync",  # the function: hefsearch.index.sync.sync
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""hefsearch.search: answering queries (vector, keyword, hybrid), snippets, FP32 re-ranking,
derived spaces (language-neutral) and comparing spaces. Names are imported on first
use, so importing the package loads no FAISS."""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Searcher": "searcher", "SearchResult": "searcher", "Hit": "searcher", "SearchError": "searcher", "MODES": "request",
    "compare": "comparison", "Comparison": "comparison", "ranking_agreement": "comparison",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

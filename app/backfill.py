"""``hefsearch backfill`` as one operation: FP32 vectors for every chunk the library's
``cpu-fp32`` space lacks, computed on the CPU ahead of time (so a quantised space's results
re-rank without encoding at query time), batch by batch, each batch committed on its own.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ContextManager

from .requests import BackfillRequest

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.search.rerank import BackfillReport

#: what shows a back-fill's progress: called with the chunks to do, gives the callback that
#: takes (done, todo) while it runs
BackfillDisplay = Callable[[int], ContextManager[Callable[[int, int], None]]]


@dataclass
class BackfillResult:
    library_path: str
    #: the chunks this run set out to encode (0: nothing to do)
    todo: int
    #: what was done; None when there was nothing to do
    report: "BackfillReport | None" = None


def run_backfill(request: BackfillRequest, progress: BackfillDisplay | None = None) -> BackfillResult:
    """Fill the FP32 space of the library (at most ``request.limit`` chunks); the library must
    be writable (said before any encoding). Creates the ``cpu-fp32`` space when missing."""
    from hefsearch.embed.reference import open_reference_encoder
    from hefsearch.index.encoders import resolve_bundle
    from hefsearch.index.library import Library
    from hefsearch.search.rerank import backfill, missing_fp32

    library = Library.open(request.library_path, create=False)
    try:
        library.require_writable()  # say so before any encoding, not after the first batch
        todo = len(missing_fp32(library))
        if request.limit is not None:
            todo = min(todo, request.limit)
        result = BackfillResult(str(library.path), todo)
        if todo == 0:
            return result
        shown = progress(todo) if progress is not None else contextlib.nullcontext(None)
        with open_reference_encoder(resolve_bundle(library, request.bundle), bulk=True) as enc, shown as update:
            result.report = backfill(library, enc, batch=request.batch, limit=request.limit, progress=update)
        return result
    finally:
        library.close()

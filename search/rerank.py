"""Quality recovery: re-rank the NPU's top-N with FP32 vectors, and back-fill them over time.

An 8-bit encoder mostly finds the right chunks but orders them worse than FP32 (recall@10
holds, recall@1 drops). Re-scoring its top-N candidates with FP32 vectors restores the FP32
order of those candidates exactly, at the cost of one CPU query encoding plus whatever
candidate vectors are missing:

- FP32 vectors of candidate chunks are computed on demand on the CPU and cached in the
  library's ``cpu-fp32`` space (``Space.add``), so each chunk is encoded at most once. A
  search never waits for that: when another writer holds the library's write lock, the
  library is read-only, or the disk is full, the vectors are used without caching;
- :func:`backfill` fills the FP32 space in batches (``hefsearch backfill``, or a TUI worker
  while idle; it stops between batches when asked), so re-ranking becomes free over time.

``Searcher.search(..., rerank=N)`` calls :func:`rerank_candidates`. ``rerank=None`` means the
default: on (depth :data:`DEFAULT_DEPTH`) when the space searched is not FP32 and the library
has an FP32 space; ``rerank=0`` switches it off.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from hefsearch.embed.errors import HefsearchError
from hefsearch.embed.space_names import FP32_SPACE, is_quantised

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library

log = logging.getLogger("hefsearch.search")

#: default re-rank depth: our MiniLM study recovered FP32 quality from the top 10-50
DEFAULT_DEPTH = 30
BACKFILL_BATCH = 64
#: seconds of back-fill work per write-lock window
BACKFILL_WINDOW_S = 20.0


def default_depth(library: "Library", space: str | None) -> int:
    """The re-rank depth when the caller did not choose: on when FP32 vectors are available."""
    if not space or space == FP32_SPACE:
        return 0
    # space names, not Library.spaces(): that counts every space's members (3 ms per query at
    # 100k chunks, growing with the library)
    if FP32_SPACE not in library.space_names():
        return 0
    # only a quantised space gains from FP32 scores; a derived FP32 space (centred,
    # language-neutral) would lose its transform's ordering to them
    return DEFAULT_DEPTH if is_quantised(library.space(space).info.kind) else 0


def _fp32_encoder(searcher) -> "Encoder | None":
    """The CPU FP32 encoder of the library's FP32 space, creating the space when missing;
    None when it is missing and cannot be created right now (read-only, another writer)."""
    lib = searcher.library
    if FP32_SPACE in lib.space_names():
        return searcher.encoder_for(FP32_SPACE)
    if lib.read_only:
        log.info("re-rank skipped: the library has no FP32 space and is read-only here")
        return None
    from hefsearch.embed.reference import open_reference_encoder

    enc = open_reference_encoder(searcher.bundle_path())
    try:
        lib.ensure_space(enc, FP32_SPACE, wait=False)
    except (HefsearchError, OSError) as e:
        enc.close()
        log.info("re-rank skipped: cannot create the FP32 space now: %s", _reason(e))
        return None
    searcher.adopt_encoder(FP32_SPACE, enc)  # reuse it for later queries
    return searcher.encoder_for(FP32_SPACE)


def _reason(error: BaseException) -> str:
    return getattr(error, "message", None) or str(error)


def fp32_vectors(library: "Library", encoder: "Encoder", chunk_ids: Sequence[int], *,
                 cache: bool = True) -> tuple[np.ndarray, int]:
    """FP32 vectors of ``chunk_ids`` (in order): stored ones read, missing ones encoded on the
    CPU and, with ``cache``, added to the FP32 space. Returns (vectors, how many were encoded)."""
    ids = [int(i) for i in chunk_ids]
    if not ids:
        return np.empty((0, encoder.dim), np.float32), 0
    space = library.space(FP32_SPACE)
    have = space.has(ids)
    out = np.empty((len(ids), encoder.dim), np.float32)
    if have.any():
        out[have] = space.vectors([i for i, h in zip(ids, have) if h])
    missing = [i for i, h in zip(ids, have) if not h]
    if missing:
        records = {r.id: r for r in library.chunks(missing)}
        texts = [records[i].text if i in records else "" for i in missing]
        vecs = encoder.encode_passages(texts)
        out[~have] = vecs
        if cache:
            known = [j for j, i in enumerate(missing) if i in records]
            _cache_without_waiting(library, space, [missing[j] for j in known], vecs[known])
    return out, len(missing)


def _cache_without_waiting(library: "Library", space, ids: list[int], vecs: np.ndarray) -> None:
    """Store FP32 vectors only if that costs no wait: while an indexer or back-fill holds the
    write lock, on a read-only library or a full disk, the search goes on uncached."""
    if library.read_only or not ids:
        return
    try:
        with library.write_lock(wait=False):
            space.add(ids, vecs)
    except (HefsearchError, OSError) as e:  # busy, read-only, disk full: cache next time
        log.info("FP32 cache not updated: %s", _reason(e))


def rerank_candidates(searcher, *, query: str, space: str, ids: Sequence[int], scores: dict,
                      top: int) -> tuple[list[int], dict]:
    """Re-order the first ``top`` of ``ids`` (the space's ranking) by FP32 cosine to the query.

    Returns the new id order (re-ranked head, then the rest unchanged) and scores: FP32
    scores for the head, the space's own scores for the rest.
    """
    ids = [int(i) for i in ids]
    if space == FP32_SPACE or top <= 0 or not ids:
        return ids, dict(scores)
    enc = _fp32_encoder(searcher)
    if enc is None:
        return ids, dict(scores)
    head, rest = ids[:top], ids[top:]
    vecs, encoded = fp32_vectors(searcher.library, enc, head)
    q = enc.encode_queries([query])[0]
    s = vecs @ q
    order = np.argsort(-s, kind="stable")
    new_head = [head[j] for j in order]
    new_scores = {head[j]: float(s[j]) for j in order}
    for i in rest:
        new_scores[i] = float(scores.get(i, 0.0))
    if encoded:
        log.info("re-rank: encoded %d of %d candidates on the CPU", encoded, len(head))
    return new_head + rest, new_scores


# -- back-fill ---------------------------------------------------------------------------------
@dataclass
class BackfillReport:
    added: int
    remaining: int
    total: int
    seconds: float
    stopped: bool

    @property
    def done(self) -> bool:
        return self.remaining == 0


def missing_fp32(library: "Library") -> np.ndarray:
    """Chunk ids the FP32 space does not hold yet (all chunks when there is no FP32 space)."""
    ids = library.chunk_ids()
    if FP32_SPACE not in library.space_names():
        return ids
    return ids[~np.isin(ids, library.member_ids(FP32_SPACE))]


def backfill(library: "Library", encoder: "Encoder", *, batch: int = BACKFILL_BATCH,
             limit: int | None = None, should_stop: Callable[[], bool] | None = None,
             progress: Callable[[int, int], None] | None = None,
             window_seconds: float = BACKFILL_WINDOW_S) -> BackfillReport:
    """Encode chunks missing from the FP32 space on the CPU and add them, batch by batch.

    ``encoder`` must be the CPU FP32 encoder of the library's bundle (its fingerprint is
    checked; the space is created when missing). ``should_stop`` is asked between batches (a
    TUI worker passes "the user started typing"); ``progress(done, todo)`` after each batch.
    Safe to interrupt: every batch is committed on its own (the library's reconcile step
    rebuilds a FAISS file left behind by a crash); the write lock is held for windows of
    ``window_seconds`` so the index file is not rewritten after every batch.
    """
    t0 = time.perf_counter()
    space = library.ensure_space(encoder, FP32_SPACE)
    todo = missing_fp32(library)
    if limit is not None:
        todo = todo[:limit]
    total = int(len(library.chunk_ids()))
    added = 0
    stopped = False
    starts = list(range(0, len(todo), max(1, batch)))
    while starts and not stopped:
        # One write lock per window of batches: the FAISS file is saved when it is released,
        # so not after every batch, and an indexer in another process waits at most a window.
        window_end = time.perf_counter() + window_seconds
        with library.write_lock():
            while starts and time.perf_counter() < window_end:
                if should_stop and should_stop():
                    stopped = True
                    break
                i = starts.pop(0)
                records = library.chunks(todo[i : i + batch].tolist())
                if not records:
                    continue
                vecs = encoder.encode_passages([r.text for r in records])
                space.add([r.id for r in records], vecs)
                added += len(records)
                if progress:
                    progress(added, len(todo))
    remaining = int(len(missing_fp32(library)))
    return BackfillReport(added=added, remaining=remaining, total=total,
                          seconds=time.perf_counter() - t0, stopped=stopped)

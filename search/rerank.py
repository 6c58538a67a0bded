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

``Searcher.search`` calls :func:`rerank_candidates` with the request's ``rerank_depth``: None
means the default, on (depth :data:`DEFAULT_DEPTH`) when the space searched is not FP32 and the
library has an FP32 space; 0 switches it off.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from hefsearch.base.errors import HefsearchError
from hefsearch.embed.space_names import FP32_SPACE, NEUTRAL_SUFFIX, is_quantised
from hefsearch.embed.in_context import passage_vectors
from hefsearch.index.passages import stored_sections

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library

log = logging.getLogger("hefsearch.search")

#: default re-rank depth: our MiniLM study recovered FP32 quality from the top 10-50
DEFAULT_DEPTH = 30
#: milliseconds a search may spend computing missing FP32 vectors of its candidates (the CPU
#: encodes ~10-40 chunks in that on an x86 laptop, a few on a Pi); the rest keep the 8-bit
#: space's order and are computed later (the next search, ``hefsearch backfill``)
DEFAULT_BUDGET_MS = 250.0
#: candidates encoded per step while the budget lasts
RERANK_BATCH = 4
BACKFILL_BATCH = 64
#: seconds of back-fill work per write-lock window
BACKFILL_WINDOW_S = 20.0


class RerankError(HefsearchError):
    title = "re-rank setting"


def parse_depth(value) -> int | None:
    """A re-rank setting as people write it: a depth (0-1000), ``off`` (0), or None / ``auto``
    / empty (the default for the space searched)."""
    if value is None or isinstance(value, bool):
        return None if value is None else (DEFAULT_DEPTH if value else 0)
    text = str(value).strip().lower()
    if text in ("", "auto", "default"):
        return None
    if text in ("off", "no", "none", "false"):
        return 0
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n <= 1000:
        raise RerankError(f"Re-rank {value!r} is not a depth.", "Give a number of candidates (0-1000) or 'off'.")
    return n


def neutral_fp32_space() -> str:
    return f"{FP32_SPACE}{NEUTRAL_SUFFIX}"


def rerank_space(library: "Library") -> str | None:
    """The FP32 space re-ranking scores in: the language-neutral one when the library has it
    (it ranks cross-lingual hits as the CPU default does), else the plain one, else None."""
    names = library.space_names()
    for name in (neutral_fp32_space(), FP32_SPACE):
        if name in names:
            return name
    return None


def default_depth(library: "Library", space: str | None) -> int:
    """The re-rank depth when the caller did not choose: on for a quantised space when FP32
    vectors can re-score it without undoing its order: a language-neutral space is re-ranked
    only in the neutral FP32 space (plain FP32 scores would restore the plain order)."""
    if not space:
        return 0
    # space names, not Library.spaces(): that counts every space's members (3 ms per query at
    # 100k chunks, growing with the library)
    target = rerank_space(library)
    if target is None:
        return 0
    # only a quantised space gains from FP32 scores; a derived FP32 space (centred,
    # language-neutral) would lose its transform's ordering to them
    if not is_quantised(library.space(space).info.kind):
        return 0
    if space.endswith(NEUTRAL_SUFFIX) and target == FP32_SPACE:
        return 0
    return DEFAULT_DEPTH


@dataclass
class RerankInfo:
    """Whether and how deep a search re-ranked: every answer carries one."""

    #: the note of a search in a space that is not re-ranked by design (an FP32 space)
    NOT_NEEDED = "not needed for this space"

    #: depth asked (0: off)
    depth: int = 0
    #: the FP32 space that re-scored the candidates (None: not re-ranked)
    space: str | None = None
    #: candidates re-scored (stored FP32 vectors plus those computed now)
    rescored: int = 0
    #: FP32 vectors computed for this search on the CPU
    computed: int = 0
    #: candidates whose FP32 vector did not fit the budget: they keep the 8-bit order
    deferred: int = 0
    budget_ms: float | None = None
    #: why it did not re-rank, or did only part
    note: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def worth_saying(self) -> bool:
        """Whether a person gains from reading :meth:`describe`: not for a space that is never
        re-ranked (a CPU-only user's every search), where the line would tell nothing."""
        return bool(self.depth) or self.note != self.NOT_NEEDED

    def describe(self) -> str:
        if not self.depth:
            return "not re-ranked" + (f" ({self.note})" if self.note else "")
        if not self.rescored:
            return f"not re-ranked (top {self.depth} asked: {self.note or 'no FP32 vectors'})"
        out = f"re-ranked {self.rescored} of the top {self.depth} in {self.space}"
        if self.computed:
            out += f" ({self.computed} FP32 vectors computed now)"
        if self.deferred:
            out += (f"; {self.deferred} kept the 8-bit order (their FP32 vectors did not fit the "
                    f"{self.budget_ms:.0f} ms budget: hefsearch backfill computes them)")
        return out


def _create_fp32_space(searcher) -> "Encoder | None":
    """Create the library's FP32 space and return its encoder; None when it cannot be created
    right now (read-only, another writer)."""
    lib = searcher.library
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
        vecs = passage_vectors(encoder, texts, stored_sections(library, missing))
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
                      top: int, budget_ms: float | None = DEFAULT_BUDGET_MS) -> tuple[list[int], dict, RerankInfo]:
    """Re-order the first ``top`` of ``ids`` (the space's ranking) by FP32 cosine to the query
    in :func:`rerank_space` (the neutral FP32 space when there is one).

    FP32 vectors the space does not hold are computed on the CPU while ``budget_ms`` lasts
    (None: no limit), and cached; candidates left without one keep their places, and the
    others are re-ordered among the places they held. The FP32 encoder is not opened for a
    search that has no stored FP32 vector among its candidates: a one-shot search on an empty
    FP32 space adds nothing. Returns the new id order, scores (FP32 for the re-scored, the
    space's own for the rest) and what was done.
    """
    ids = [int(i) for i in ids]
    lib = searcher.library
    target = rerank_space(lib)
    info = RerankInfo(depth=max(0, int(top)), budget_ms=budget_ms)
    if not info.depth or not ids:
        return ids, dict(scores), info
    if not is_quantised(lib.space(space).info.kind):
        info.note = f"{space} is an FP32 space"
        return ids, dict(scores), info
    head, rest = ids[:top], ids[top:]
    have = lib.space(target).has(head) if target else np.zeros(len(head), bool)
    # opening the FP32 encoder (a second model load) to compute every candidate would cost a
    # one-shot search far more than its budget: only an unbounded search, or one whose
    # searcher has the encoder open already, starts from an empty FP32 space
    if not have.any() and budget_ms is not None and not searcher.has_open_encoder(target or FP32_SPACE):
        info.deferred = len(head)
        info.note = (f"no FP32 vectors of these candidates in {target} yet" if target else
                     "the library has no FP32 space yet")
        return ids, dict(scores), info
    enc = searcher.encoder_for(target) if target else _create_fp32_space(searcher)
    if enc is None:
        info.note = "the FP32 space cannot be created now (read-only, or another writer)"
        return ids, dict(scores), info
    target = target or FP32_SPACE
    sp = lib.space(target)
    q = enc.encode_queries([query])[0]
    known = [i for i, h in zip(head, have) if h]
    vecs = dict(zip(known, sp.vectors(known))) if known else {}
    missing = [i for i, h in zip(head, have) if not h]
    # the budget is for computing candidates: the model load and the query are paid once a
    # library has FP32 vectors to use, whatever the budget
    computed = _compute_within(lib, enc, sp, missing, budget_ms, time.perf_counter())
    vecs.update(computed)
    info.space, info.computed = target, len(computed)
    info.deferred = len(missing) - len(computed)
    head, new_scores, info.rescored = _reorder_in_place(head, vecs, q, scores)
    if computed:
        log.info("re-rank: computed %d of %d candidates' FP32 vectors on the CPU", len(computed), len(missing))
    return head + rest, new_scores, info


def _reorder_in_place(head: list[int], vecs: dict, q: np.ndarray, scores: dict) -> tuple[list[int], dict, int]:
    """The candidates with an FP32 vector re-ordered by FP32 cosine among the places they
    held; the others stay in place with their own scores. Returns (head, scores, re-scored)."""
    slots = [j for j, i in enumerate(head) if i in vecs]
    new_scores = dict(scores)
    if not slots:
        return head, new_scores, 0
    chosen = [head[j] for j in slots]
    s = np.stack([vecs[i] for i in chosen]) @ q
    new_head = list(head)
    for slot, j in zip(slots, np.argsort(-s, kind="stable")):
        new_head[slot] = chosen[j]
        new_scores[chosen[j]] = float(s[j])
    return new_head, new_scores, len(slots)


def _compute_within(library, encoder, space, missing: list[int], budget_ms: float | None, t0: float) -> dict:
    """FP32 vectors of ``missing`` chunks, a few at a time while the budget lasts (the next
    step's cost estimated from the steps so far, at first from one chunk), cached without
    waiting. {chunk id: vector}."""
    out: dict[int, np.ndarray] = {}
    if not missing:
        return out
    records = {r.id: r for r in library.chunks(missing)}
    todo = [i for i in missing if i in records]
    per_chunk = None
    step = 1  # the first step measures one chunk
    while todo:
        spent = (time.perf_counter() - t0) * 1000.0
        if budget_ms is not None:
            guess = (per_chunk or 0.0) * step
            if spent + guess > budget_ms or (per_chunk is None and spent >= budget_ms):
                break
        batch, todo = todo[:step], todo[step:]
        t = time.perf_counter()
        vecs = passage_vectors(encoder, [records[i].text for i in batch], stored_sections(library, batch))
        took = (time.perf_counter() - t) * 1000.0 / len(batch)
        per_chunk = took if per_chunk is None else max(per_chunk, took)
        out.update(zip(batch, vecs))
        step = RERANK_BATCH
    if out:
        _cache_without_waiting(library, space, list(out), np.stack(list(out.values())))
    return out


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
                vecs = passage_vectors(encoder, [r.text for r in records],
                                       stored_sections(library, [r.id for r in records]))
                space.add([r.id for r in records], vecs)
                added += len(records)
                if progress:
                    progress(added, len(todo))
    remaining = int(len(missing_fp32(library)))
    return BackfillReport(added=added, remaining=remaining, total=total,
                          seconds=time.perf_counter() - t0, stopped=stopped)

"""Vector spaces: one per encoder fingerprint, each with raw vectors and a FAISS index.

The public Space API; its parts live in their own modules:

- :mod:`~hefsearch.index.space_ids`: sets of chunk ids as sorted arrays (:class:`IdSet`);
- :mod:`~hefsearch.index.segments`: the raw vectors, append-only segment files and their
  merging (:class:`RawVectors`), the source of truth;
- :mod:`~hefsearch.index.faiss_index`: the FAISS index (which index a size gets, building,
  tuning, compression, the search kernels), a cache rebuilt from the raw vectors at will;
- :mod:`~hefsearch.index.space_checks`: that index checked against the raw vectors, its recall.

Which ids a space really holds is decided by SQLite alone (``space_members``, committed in
the same transaction as the chunks). A segment written for a batch whose transaction never
committed holds ids SQLite does not list; they are ignored and deleted by the reconcile step
(:meth:`Space.load` with ``repair=True``), and the FAISS index is brought to exactly the
member set at load and on every refresh. See :mod:`hefsearch.index.library` for the protocol.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from hefsearch.base.atomic_write import write_atomic
from hefsearch.embed.fingerprint import describe_difference

from .errors import FingerprintMismatch, SpaceError
from .factory_check import check_factory
from .faiss_index import (  # noqa: F401  (re-exported: the Space API's names)
    DEFAULT_SQ8_THRESHOLD, HNSW_TARGET_RECALL, SQ8_FACTORY, tune_ef_search,
    COMPRESSED_CODES, COMPRESSED_FACTORY, DEFAULT_COMPRESS_THRESHOLD, DEFAULT_HNSW_FACTORY,
    DEFAULT_HNSW_THRESHOLD, EXACT_FILTER_LIMIT, INDEX_FILE, INDEX_META_FILE, LOAD_CHECK_SAMPLE,
    MAX_THRESHOLD, MIN_COMPRESSED, OWN_FACTORIES, PARALLEL_SCAN_CODES, RECALL_LEAVE_OUT,
    RECALL_QUERIES, RESCORE_CANDIDATES, RETRAIN_GROWTH, SELF_FIND_SHARE, TARGET_RECALL, ann_search,
    compressed_factory, describe_index, doubling_steps, exact_scores, exact_top_k, factory_problem, faiss_reason,
    index_ids, inner_index, ivf_of, load_faiss, make_index, outside_own_document, read_index_stats, tune_nprobe,
    using_all_threads, vectors_to_train)
from .space_checks import IndexChecks
from .segments import (  # noqa: F401  (re-exported)
    FULL_COMPACT_ROWS, IDS_SUFFIX, MAX_SEGMENTS, MERGE_FANIN, SEGMENT_RE, RawVectors, ids_file,
    record_dtype)
from .space_ids import IdSet, in_sorted, sorted_ids  # noqa: F401  (re-exported)

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder

log = logging.getLogger("hefsearch.index")

#: rebuild a non-removable index (HNSW) when this share of its ids are deleted ones
TOMBSTONE_REBUILD_SHARE = 0.1


@dataclass
class SpaceInfo:
    name: str
    kind: str
    fingerprint: str
    parts: dict
    dim: int
    count: int
    backend: str
    backend_opts: dict = field(default_factory=dict)
    label: str = ""
    index_factory: str = "Flat"
    #: ``index.json`` of the space (type, bytes, trained_on, recall_at_10...): filled by status
    index_stats: dict = field(default_factory=dict)

    @property
    def compressed(self) -> bool:
        """Whether the index is the compressed one (IVF of 4-bit codes, re-scored from the raw vectors)."""
        return self.index_factory == COMPRESSED_FACTORY


class Space(IndexChecks):
    """One vector space of a library. Get it from ``Library.space(name)``."""

    def __init__(self, library, info: SpaceInfo):
        self.library = library
        self.info = info
        self.folder = Path(library.path) / "spaces" / info.name
        self.folder.mkdir(parents=True, exist_ok=True)
        self.raw = RawVectors(self.folder, info.dim, writable=not getattr(library, "read_only", False))
        self._lock = threading.RLock()
        #: a flat index not read yet (``load(defer_flat=True)``): searches score the raw vectors
        #: exactly, as the flat index would, and anything else reads it first
        self._deferred = False
        self._index = None
        #: committed members (SQLite ``space_members``) and ids in the FAISS index: sorted
        #: arrays, 8 bytes an id (see IdSet)
        self._members = IdSet()
        self._indexed = IdSet()
        self._seen_version: int | None = None
        self._dirty = False
        #: what the index is and what it was measured to do (saved as ``index.json``)
        self.index_stats: dict = {}

    # -- identity ------------------------------------------------------------------------
    def check_encoder(self, encoder: "Encoder") -> None:
        check_fingerprint(self.info, encoder.fingerprint_parts(), encoder.fingerprint)

    @property
    def count(self) -> int:
        return len(self._members)

    # -- the FAISS index, read on first use when deferred ---------------------------------
    @property
    def index(self):
        if self._deferred:
            self._attach_index()
        return self._index

    @index.setter
    def index(self, value) -> None:
        self._index, self._deferred = value, False

    @property
    def _in_index(self) -> IdSet:
        if self._deferred:
            self._attach_index()
        return self._indexed

    @_in_index.setter
    def _in_index(self, value: IdSet) -> None:
        self._indexed = value

    # -- loading and reconciling ---------------------------------------------------------
    def load(self, members: Iterable[int], *, repair: bool, defer_flat: bool = False) -> dict:
        """Bring the in-memory FAISS index to exactly ``members`` (the committed SQLite set:
        an array from :meth:`Library.member_ids` or any iterable of ints).

        With ``repair`` (the caller holds the library write lock) it also deletes segments
        holding no member (left by a batch that never committed) and id sidecars without a
        segment, removes member rows whose vector is gone, and saves the FAISS file when it
        changed. Returns what it did (``lost_ids``: a sorted array).

        With ``defer_flat`` (a reader, no ``repair``) a space whose saved index is flat is not
        read: its searches score the raw vectors exactly (what a flat index does; a one-shot
        search then never imports FAISS, ~50 ms), and the index is read, synced and checked as
        here the first time anything else needs it.
        """
        with self._lock:
            done = {"orphan_segments": 0, "lost": 0, "added": 0, "removed": 0, "rebuilt": False}
            self.raw.reload()
            members = IdSet(members)
            if repair:
                for f in self.folder.glob("*.tmp"):
                    f.unlink(missing_ok=True)
                orphans = [n for n in self.raw.segment_names()
                           if n in self.raw._segments
                           and not members.contains(self.raw.segment_ids(n)).any()]
                if orphans:
                    self.raw.delete_segments(orphans)
                    done["orphan_segments"] = len(orphans)
                stray = self.raw.delete_stray_sidecars()
                if stray:
                    done["stray_sidecars"] = stray
            lost = members.ids[~self.raw.has(members.ids)]
            if len(lost):
                log.warning("space %s: %d chunks have no stored vector; they will be re-embedded "
                            "by the next sync", self.info.name, len(lost))
                done["lost"] = len(lost)
                members = members - lost
            elif repair and self.raw.unreadable:
                # every member has a readable vector again (its chunks were re-embedded): the
                # unreadable segment holds nothing needed, and would only warn on every open
                done["unreadable_segments"] = len(self.raw.unreadable)
                self.raw.delete_segments(sorted(self.raw.unreadable))
            self._members = members
            stats = read_index_stats(self.folder) if defer_flat and not repair else {}
            if stats.get("type") == "Flat":
                self._index, self._deferred = None, True
                self.index_stats = stats
            else:
                done.update(self._attach_index())
            if repair and (done["rebuilt"] or done["added"] or done["removed"] or self._dirty):
                self.save()
            done["lost_ids"] = lost
            return done

    def _attach_index(self) -> dict:
        """Read the saved FAISS index and bring it to the members (rebuilt from the raw vectors
        when missing, unreadable or not matching them); what it did."""
        with self._lock:
            done = {"added": 0, "removed": 0, "rebuilt": False}
            self.index = self._read_index()  # clears _deferred
            if self._index is None:
                self._rebuild()
                done["rebuilt"] = True
                return done
            self._in_index = IdSet(index_ids(self._index))
            done["added"], done["removed"] = self._sync_index()
            mismatch = self.index_mismatch()
            if mismatch:
                log.warning("space %s: the FAISS index does not match the raw vectors (%s); "
                            "rebuilding it from them", self.info.name, mismatch)
                self._rebuild()
                done["rebuilt"], done["index_mismatch"] = True, mismatch
            return done

    def _read_index(self):
        path = self.folder / INDEX_FILE
        if not path.exists():
            return None
        try:
            index = load_faiss().read_index(str(path))
        except Exception as e:
            log.warning("rebuilding unreadable FAISS index %s: %s", path, e)
            return None
        if index.d != self.info.dim or not (hasattr(index, "id_map") or ivf_of(index) is not None):
            log.warning("rebuilding FAISS index %s: wrong dimension or layout", path)
            return None
        stats = read_index_stats(self.folder)
        self.index_stats = stats if stats.get("type") == describe_index(index) else {}
        return index

    def _sync_index(self) -> tuple[int, int]:
        """Add members missing from the index, remove ids that are no members."""
        add = self._members - self._in_index
        rem = self._in_index - self._members
        if add:
            self._add_to_index(add.ids, self.raw.get(add.ids))
        if rem:
            self._remove_from_index(rem)
        return len(add), len(rem)

    def _add_to_index(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        fresh = ~self._in_index.contains(ids)
        if not fresh.any():
            return
        ids, vectors = ids[fresh], np.ascontiguousarray(vectors[fresh], np.float32)
        if not self.index.is_trained:
            self._rebuild()
            return
        self.index.add_with_ids(vectors, ids)
        self._in_index = self._in_index | ids
        self._dirty = True

    def _remove_from_index(self, ids: Iterable[int]) -> None:
        arr = sorted_ids(ids)
        try:
            self.index.remove_ids(arr)
            self._in_index = self._in_index - arr
        except RuntimeError:
            pass  # e.g. HNSW: stays as a tombstone, filtered at search, gone at the next rebuild
        self._dirty = True
        if len(self._in_index) - len(self._members) > TOMBSTONE_REBUILD_SHARE * max(1, len(self._in_index)):
            self._rebuild()

    def _rebuild(self) -> None:
        """Build a fresh index over the members from the raw vectors (no re-encoding)."""
        factory = self._buildable_factory()
        try:
            self._build(factory)
        except (RuntimeError, ValueError, MemoryError, SpaceError) as e:
            if factory in OWN_FACTORIES:
                raise
            # defence in depth: a factory the child-process check passed, failing on real vectors
            self._give_up_factory(factory, faiss_reason(e) if not isinstance(e, SpaceError) else e.message)
            self._build(self.info.index_factory)

    def _build(self, factory: str) -> None:
        ids = self._members.ids  # sorted
        t0 = time.perf_counter()
        index = make_index(factory, self.info.dim, len(ids))
        if not index.is_trained:
            if len(ids) < vectors_to_train(factory, self.info.dim):  # Flat until then: see _needs_retrain
                log.warning("space %s: %d vectors are too few to train %r; using Flat",
                            self.info.name, len(ids), factory)
                index = make_index("Flat", self.info.dim)
            else:
                ivf = ivf_of(index)
                n_train = max(100_000, 64 * ivf.nlist) if ivf is not None else 100_000
                pick = np.sort(np.random.default_rng(0).permutation(len(ids))[:n_train])
                with using_all_threads():
                    index.train(self.raw.get(ids[pick]))
        with using_all_threads():  # block by block from the memory-mapped segments: bounded RAM
            for s in range(0, len(ids), 262_144):
                index.add_with_ids(self.raw.get(ids[s : s + 262_144]), ids[s : s + 262_144])
        self.index = index
        self._in_index = IdSet._of(ids)
        self._dirty = True
        self.index_stats = {"type": describe_index(index), "factory": factory,
                            "trained_on": int(len(ids)),
                            "build_seconds": round(time.perf_counter() - t0, 1)}
        if not self._is_flat() and len(ids):
            self.index_stats.update(self.measure_recall())

    def _buildable_factory(self) -> str:
        """The space's factory, unless it is a string of the user's that FAISS cannot run
        (:mod:`~hefsearch.index.factory_check`, in a child process: some abort or segfault);
        then the size rules' factory, with a warning (:meth:`_give_up_factory`)."""
        factory = self.info.index_factory
        problem = factory_problem(factory, self.info.dim)
        if problem:
            self._give_up_factory(factory, problem)
        return self.info.index_factory

    def _give_up_factory(self, factory: str, reason: str) -> None:
        fallback = self.size_rule(len(self._members), self.library.hnsw_threshold())
        log.warning("space %s: FAISS cannot use the index factory %r (%s); it gets %s instead, by the size "
                    "rules. Set another with 'hefsearch settings index_factory VALUE', or 'default'.",
                    self.info.name, factory, reason.rstrip("."), fallback)
        self.info.index_factory = fallback
        self.library._set_space_factory(self.info.name, fallback)

    def size_rule(self, n: int, hnsw_threshold: int) -> str:
        """The factory the size rules give a space of ``n`` vectors (flat, SQ8, HNSW, compressed;
        measured in :mod:`~hefsearch.index.faiss_index`)."""
        return (COMPRESSED_FACTORY if n >= self.library.compress_threshold() else
                DEFAULT_HNSW_FACTORY if n >= hnsw_threshold else
                SQ8_FACTORY if n >= DEFAULT_SQ8_THRESHOLD else "Flat")

    def save(self) -> None:
        """Persist the FAISS index atomically (a cache: reconcile repairs a stale one)."""
        with self._lock:
            faiss = load_faiss()
            write_atomic(self.folder / INDEX_FILE, lambda tmp: faiss.write_index(self.index, tmp))
            stats = {**self.index_stats, "type": describe_index(self.index),
                     "vectors": int(self.index.ntotal)}
            stats.pop("bytes", None)
            write_atomic(self.folder / INDEX_META_FILE,
                         lambda tmp: Path(tmp).write_text(json.dumps(stats, sort_keys=True)))
            self.index_stats = stats
            self._dirty = False

    @property
    def dirty(self) -> bool:
        return self._dirty

    # -- keeping up with other processes -------------------------------------------------
    def refresh(self) -> None:
        """See batches committed by other connections since the last look (cheap if none)."""
        lib = self.library
        version = lib.data_version()
        if version == self._seen_version:
            return
        members = IdSet._of(sorted_ids(lib.member_ids(self.info.name)))  # a new array: no copy
        with self._lock:
            self._seen_version = version
            if members == self._members:  # another space changed (10M ids: 6 ms to compare)
                return
            new = (members - self._members).ids
            if len(new):
                if not self.raw.has(new).all():
                    self.raw.reload()
                missing = new[~self.raw.has(new)]
                if len(missing):  # members whose vector is not (yet) readable: leave them out
                    members = members - missing
            self._members = members
            self._sync_index()

    # -- the write path (the library holds the write lock) -------------------------------
    def stage(self, chunk_ids: Sequence[int], vectors: np.ndarray) -> str:
        """Write vectors durably BEFORE the SQLite transaction that makes them members."""
        vectors = np.asarray(vectors, np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.info.dim:
            raise SpaceError(
                f"Vectors of shape {vectors.shape} do not fit space {self.info.name!r} "
                f"(dimension {self.info.dim})."
            )
        self._check_finite(chunk_ids, vectors)
        return self.raw.write(chunk_ids, vectors)

    def _check_finite(self, chunk_ids: Sequence[int], vectors: np.ndarray) -> None:
        """Refuse NaN/inf before anything is written: the batch then never commits."""
        bad = ~np.isfinite(vectors).all(axis=1)
        if not bad.any():
            return
        ids = np.asarray(chunk_ids, np.int64)[bad][:5].tolist()
        raise SpaceError(
            f"The encoder of space {self.info.name!r} ({self.info.label or self.info.backend}) returned "
            f"{int(bad.sum())} of {len(vectors)} vectors that are not numbers (NaN or infinity; chunk "
            f"ids {ids}). Nothing of this batch was stored; what was indexed before is kept.",
            "The encoder files may be damaged: run 'hefsearch doctor --verify' on the bundle, copy "
            "the bundle again or re-export it, then run 'hefsearch index' again.",
        )

    def unstage(self, segment: str) -> None:
        self.raw.delete_segments([segment])

    def committed(self, added_ids: Sequence[int], vectors: np.ndarray | None = None,
                  removed_ids: Iterable[int] = ()) -> None:
        """Apply a committed transaction to the in-memory index."""
        with self._lock:
            removed = IdSet(removed_ids)
            if removed:
                self._members = self._members - removed
                self._remove_from_index(removed & self._in_index)
            ids = np.asarray(added_ids, np.int64)
            if len(ids):
                self._members = self._members | ids
                vecs = self.raw.get(ids) if vectors is None else np.asarray(vectors, np.float32)
                self._add_to_index(ids, vecs)
                # a batch's segment is in: keep the segments of a long run few (open files, maps)
                self.raw.merge_full_tiers(self._members)

    def forget(self, removed_ids: Iterable[int]) -> None:
        self.committed([], None, removed_ids)

    def maintain(self, *, hnsw_threshold: int, factory_override: str | None) -> bool:
        """After a sync: switch factory when the size calls for it (flat, HNSW, compressed
        from the library's ``compress_threshold``), retrain a compressed index that has grown,
        merge segments."""
        with self._lock:
            changed = False
            n = len(self._members)
            want = factory_override or self.size_rule(n, hnsw_threshold)
            if want != self.info.index_factory:
                self.info.index_factory = want
                self.library._set_space_factory(self.info.name, want)
                self._rebuild()
                changed = True
            elif self._needs_retrain():
                log.info("space %s: training its %s index again (%d vectors, trained on %s)",
                         self.info.name, self.info.index_factory, n, self.index_stats.get("trained_on"))
                self._rebuild()
                changed = True
            if self.raw.compact(self._members):
                changed = True
            if self._dirty:
                self.save()
            return changed

    def _needs_retrain(self) -> bool:
        """A space whose index is Flat only because it was too small to train its factory
        (a compressed one, or a library ``index_factory`` such as ``IVF16,Flat``) and now is
        big enough, or a compressed space that outgrew its training."""
        if self.index is None:
            return False
        factory, n = self.info.index_factory, len(self._members)
        if self._is_flat():
            return n >= vectors_to_train(factory, self.info.dim) and self._factory_needs_training()
        if factory != COMPRESSED_FACTORY or ivf_of(self.index) is None:
            return False
        trained = self.index_stats.get("trained_on") or self.index.ntotal
        return n >= RETRAIN_GROWTH * max(int(trained), 1)

    def _factory_needs_training(self) -> bool:
        """Whether the space's factory builds an index that must be trained (an empty one is
        made to ask: cheap; 'Flat', 'HNSW32' or a factory string need none)."""
        factory = self.info.index_factory
        if factory in ("Flat", "FlatIP", ""):
            return False
        if factory not in OWN_FACTORIES:  # never built here before the child-process check
            check = check_factory(factory, self.info.dim)
            return check.ok and check.needs_training
        return not make_index(factory, self.info.dim, len(self._members)).is_trained

    def add(self, chunk_ids: Sequence[int], vectors: np.ndarray) -> None:
        """Store vectors for existing chunks (FP32 back-fill, caches). Ids of chunks that no
        longer exist are ignored; ids already in the space are kept as they are."""
        ids = np.asarray(chunk_ids, np.int64)
        vectors = np.asarray(vectors, np.float32)
        if len(ids) != len(vectors):
            raise SpaceError(f"{len(ids)} chunk ids but {len(vectors)} vectors.")
        if not len(ids):
            return
        lib = self.library
        with lib.write_lock():
            seg = self.stage(ids, vectors)
            try:
                with lib.transaction():
                    lib.db.conn.executemany(
                        "INSERT OR IGNORE INTO space_members(space, chunk_id) "
                        "SELECT ?, id FROM chunks WHERE id = ?",
                        [(self.info.name, int(i)) for i in ids],
                    )
                    added = lib.member_ids(self.info.name, ids)
            except BaseException:
                self.unstage(seg)
                raise
            keep = np.isin(ids, added)
            self.committed(ids[keep], vectors[keep])

    # -- reading -------------------------------------------------------------------------
    def has(self, chunk_ids) -> np.ndarray:
        self.refresh()
        with self._lock:
            return self._members.contains(np.asarray(chunk_ids, np.int64).ravel())

    def vectors(self, chunk_ids: Sequence[int]) -> np.ndarray:
        """The stored vectors (the source of truth) of chunks this space holds."""
        ids = np.asarray(chunk_ids, np.int64)
        if not len(ids):
            return np.empty((0, self.info.dim), np.float32)
        self.refresh()
        with self._lock:
            outside = ids[~self._members.contains(ids)].tolist()
            if outside:
                raise SpaceError(
                    f"Space {self.info.name!r} holds no vector for chunk ids {outside[:5]}.",
                    "Run 'hefsearch index' with this space's backend to embed them.",
                )
            return self.raw.get(ids)

    def search(self, query_vectors: np.ndarray, k: int, *,
               allowed: Iterable[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k by inner product: (scores [Q,k], chunk ids [Q,k]); id -1 marks an empty slot.

        ``allowed`` restricts the candidates (path/kind filters); small sets are scored exactly.
        """
        self.refresh()
        q = np.ascontiguousarray(np.asarray(query_vectors, np.float32).reshape(-1, self.info.dim))
        scores = np.full((len(q), k), -np.inf, np.float32)
        ids = np.full((len(q), k), -1, np.int64)
        with self._lock:
            if k <= 0 or not self._members:
                return scores, ids
            if self._deferred:  # the flat index not read: the same exact scores from the raw vectors
                cand = self._members.ids
                if allowed is not None:
                    cand = sorted_ids(allowed)
                    cand = cand[self._members.contains(cand)]
                return self._raw_exact(q, cand, k, scores, ids) if len(cand) else (scores, ids)
            if allowed is not None:
                cand = sorted_ids(allowed)
                if not len(cand):
                    return scores, ids
                if not self._is_flat() and len(cand) <= EXACT_FILTER_LIMIT:
                    # approximate indexes miss filtered-out neighbourhoods: score exactly
                    cand = cand[self._members.contains(cand)]
                    return self._exact(q, cand, k, scores, ids) if len(cand) else (scores, ids)
                extra = len(self._in_index) - len(self._members)
                d, i = self._ann(q, min(k + extra, len(cand)), load_faiss().IDSelectorBatch(cand))
            else:
                extra = len(self._in_index) - len(self._members)  # tombstones (HNSW)
                d, i = self._ann(q, min(k + extra, self.index.ntotal))
            member = (i >= 0) & self._members.contains(i)  # tombstones and -1 slots out
            for r in range(len(q)):
                keep = np.flatnonzero(member[r])[:k]
                scores[r, : len(keep)], ids[r, : len(keep)] = d[r][keep], i[r][keep]
            return scores, ids

    def _ann(self, q: np.ndarray, k: int, sel=None) -> tuple[np.ndarray, np.ndarray]:
        return ann_search(self.index, self.raw, q, k, sel, ef_search=self._ef_search())

    def _ef_search(self) -> int | None:
        """An HNSW index's efSearch tuned at build (``index.json``; None: the default)."""
        ef = self.index_stats.get("ef_search")
        return int(ef) if isinstance(ef, int) and ef > 0 else None

    def removable(self) -> bool:
        """Whether the FAISS index can delete ids (flat, IVF: yes; HNSW: no, tombstones)."""
        return not hasattr(inner_index(self.index), "hnsw")

    def _is_flat(self) -> bool:
        return isinstance(inner_index(self.index), load_faiss().IndexFlat)

    def _exact(self, q, cand, k, scores, ids):
        return exact_scores(q, self.raw.get(cand), cand, k, scores, ids)

    def _raw_exact(self, q, cand, k, scores, ids):
        """Exact top-k over ``cand`` block by block from the raw vectors (bounded memory)."""
        top = exact_top_k(q, cand, self.raw.get, k)
        for r in range(len(q)):
            scores[r, : top.shape[1]] = self.raw.get(top[r]) @ q[r]
            ids[r, : top.shape[1]] = top[r]
        return scores, ids


def check_fingerprint(info: SpaceInfo, parts: dict, fingerprint: str) -> None:
    if fingerprint != info.fingerprint:
        raise FingerprintMismatch(
            f"Space {info.name!r} holds vectors of another encoder than the one given "
            f"({describe_difference(info.parts, parts)}). Vectors of different encoders never mix.",
            "Use the bundle and backend this space was built with (see 'hefsearch status'), "
            "or index into another space or library.",
        )

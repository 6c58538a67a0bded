"""The raw vectors of a space: append-only segment files, the source of truth (:class:`RawVectors`).

On disk, in ``spaces/<name>/``:

- ``seg-<seq>-<tag>.npy``: the raw vectors, the source of truth. Each write is one segment,
  a structured ``.npy`` of records ``(id int64, v float32[dim])``, written to a temp file,
  fsynced and renamed into place (then the folder is fsynced). Segments are never modified;
  compaction writes one merged segment and then deletes the old ones. When the same id is in
  two segments (a crash between those two steps) the newest segment wins; both hold the same
  vector anyway, because a chunk id is never reused for other text once committed. During a
  run, once a space holds more than ``MAX_SEGMENTS + MERGE_FANIN`` segments, each committed
  batch merges the oldest :data:`MERGE_FANIN` segments of the lowest full size tier into one
  (like an LSM tree, :meth:`RawVectors.merge_full_tiers`; each vector is rewritten about
  log16(n/256) times), with the same write-then-delete crash protocol: one index run of 10M
  chunks keeps a few dozen segments, not 39,000 (each an open file and a memory map).
- ``seg-<seq>-<tag>.ids.npy``: a segment's ids alone, written after it and deleted before it (a
  cache: reading the id column of a memory-mapped segment touches every page of it, 15 GB at
  10M vectors); trusted only when its length and first and last ids match the segment.

Crash protocol: see :mod:`hefsearch.index.library`; which ids a space really holds is decided by
SQLite alone, so a segment is only ever a candidate until its batch commits.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from hefsearch.base.atomic_write import fsync_dir, write_atomic

from .errors import SpaceError
from .space_ids import IdSet, in_sorted, sorted_ids, with_room

log = logging.getLogger("hefsearch.index")

SEGMENT_RE = re.compile(r"^seg-(\d{10})-([0-9a-f]+)\.npy$")
#: merge segments when there are more than this many
MAX_SEGMENTS = 32
#: after a batch, merge this many segments of one size tier into one (RawVectors.merge_full_tiers)
MERGE_FANIN = 16
#: a space of at most this many stored vectors is merged into one segment when it holds more
#: than MAX_SEGMENTS (400 MB at dim 384); a bigger one only merges its full size tiers: the size
#: tiers of a 10M space hold up to 15 segments each, and rewriting 15 GB at the end of every
#: index run because of that would be the cost of a whole re-index, on an SD card
FULL_COMPACT_ROWS = 262_144


# -- files -----------------------------------------------------------------------------------
def record_dtype(dim: int) -> np.dtype:
    return np.dtype([("id", "<i8"), ("v", "<f4", (dim,))])


#: a segment's ids, ``seg-<seq>-<tag>.ids.npy`` beside ``seg-<seq>-<tag>.npy`` (SEGMENT_RE does
#: not match it): a cache, so opening a space does not read the id column of every segment
IDS_SUFFIX = ".ids.npy"


def ids_file(segment: str) -> str:
    """The name of the id sidecar of segment file ``segment``."""
    return segment[: -len(".npy")] + IDS_SUFFIX


def _newest_copies(ids: np.ndarray) -> np.ndarray:
    """Positions in ``ids`` (oldest copy first: segments in sequence order, rows in order) of
    the newest copy of each id, in ascending id order: the id map's rule, the newest segment
    wins and within one segment the last row. Ids already ascending cost one check."""
    if len(ids) < 2 or bool((ids[1:] > ids[:-1]).all()):
        return np.arange(len(ids), dtype=np.int64)
    order = np.argsort(ids, kind="stable")  # equal ids keep their order: the newest comes last
    ids = ids[order]
    return order[np.r_[ids[1:] != ids[:-1], True]]




def _save_npy(path: str, arr: np.ndarray) -> None:
    with open(path, "wb") as f:  # a file object: np.save would add ".npy" to a temp name
        np.save(f, arr, allow_pickle=False)


class RawVectors:
    """The append-only segment store of one space. Reads memory-map the segments.

    ``writable``: whether this process may add id sidecars it finds missing (a reader of a
    read-only library may not; a sidecar it cannot write is skipped silently anyway)."""

    def __init__(self, folder: Path, dim: int, *, writable: bool = True):
        self.folder = folder
        self.dim = dim
        self.writable = writable
        self._segments: dict[str, np.ndarray] = {}  # file name -> memmap of records
        #: file name -> (its memmap, that map's vector column as a plain ndarray): _vectors_of
        self._plain: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        #: file name -> its ids, read once (segments never change) from the segment's id
        #: sidecar: reading the id column of a memory-mapped segment touches every page of it
        #: (1.5 GB per 1M vectors at dim 384)
        self._segment_ids: dict[str, np.ndarray] = {}
        self._ids = np.empty(0, np.int64)  # sorted unique ids
        self._seg = np.empty(0, np.int32)  # index into self._order
        self._row = np.empty(0, np.int64)
        #: buffers behind ``_ids/_seg/_row`` with room to append into (None: no room yet)
        self._room: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._order: list[str] = []
        #: segments whose content cannot be used (torn, wrong layout): warned about once, then
        #: deleted by the reconcile step once every member has a readable vector again
        self.unreadable: set[str] = set()
        self.reload()

    # -- listing -------------------------------------------------------------------------
    def segment_names(self) -> list[str]:
        names = [n for n in os.listdir(self.folder) if SEGMENT_RE.match(n)]
        return sorted(names, key=lambda n: (int(SEGMENT_RE.match(n).group(1)), n))

    def reload(self) -> None:
        """Rescan the folder (another process may have added or merged segments)."""
        for _attempt in range(5):
            try:
                names = self.segment_names()
                segs = {}
                for n in names:
                    segs[n] = self._segments.get(n)
                    if segs[n] is None and n not in self.unreadable:
                        segs[n] = self._open_segment(n)
                break
            except FileNotFoundError:  # merged away between listing and opening: list again
                continue
        else:  # pragma: no cover
            raise SpaceError(f"The vector files in {self.folder} keep changing under us.")
        self._segments = {n: a for n, a in segs.items() if a is not None}
        self._plain = {n: c for n, c in self._plain.items() if self._segments.get(n) is c[0]}  # maps let go
        self._segment_ids = {n: self._segment_ids[n] if n in self._segment_ids else self._read_ids(n, a)
                             for n, a in self._segments.items()}
        self.unreadable &= set(names)
        self._order = list(self._segments)
        ids, seg, row = [], [], []
        for i, n in enumerate(self._order):
            a = self._segments[n]
            ids.append(self._segment_ids[n])
            seg.append(np.full(len(a), i, np.int32))
            row.append(np.arange(len(a), dtype=np.int64))
        if not ids:
            self._set_map(np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, np.int64))
            return
        ids_a, seg_a, row_a = np.concatenate(ids), np.concatenate(seg), np.concatenate(row)
        pick = _newest_copies(ids_a)
        self._set_map(ids_a[pick], seg_a[pick], row_a[pick])

    def _set_map(self, ids: np.ndarray, seg: np.ndarray, row: np.ndarray) -> None:
        """Replace the id -> (segment, row) map by new arrays (never changed in place: ``ids``
        may be held by a caller). ``_ids`` last: a thread that sees it sees ``_seg/_row`` too."""
        self._room = None
        self._seg, self._row = seg, row
        self._ids = ids

    # -- one new segment: its ids merged into the map (O(batch), not O(space)) -------------
    def _knows_all(self, names: list[str]) -> bool:
        """Whether ``names`` (the folder's segments) are exactly the ones this object has open
        or knows to be unreadable: no other process added or merged segments since we last
        looked, so a new segment of ours can be merged in without the rescan of :meth:`reload`
        (a name that failed to open for a passing reason is not known: reload tries it again)."""
        return len(names) == len(self._segments) + len(self.unreadable) and \
            set(names) == self._segments.keys() | self.unreadable

    def _add_segment(self, name: str) -> None:
        """Open our own just-written segment ``name`` (the newest) and merge its ids into the
        map, with the rule of :meth:`reload`: for an id in several segments the newest copy
        wins, and within one segment the last row."""
        try:
            arr = self._open_segment(name)
        except FileNotFoundError:
            arr = None
        if arr is None:  # could not be opened: reload decides exactly as it always does
            self.reload()
            return
        self._segments[name] = arr
        self._order.append(name)
        seg = len(self._order) - 1
        rows = _newest_copies(self._segment_ids[name])
        ids = self._segment_ids[name][rows]
        if not len(ids):
            return
        if not len(self._ids) or ids[0] > self._ids[-1]:  # new chunks: ids above every stored one
            self._append_map(ids, np.full(len(ids), seg, np.int32), rows)
        else:
            self._merge_map(ids, seg, rows)

    def _append_map(self, ids: np.ndarray, seg: np.ndarray, row: np.ndarray) -> None:
        """Append to the map, into the room behind its arrays (a quarter of their length is
        added whenever it runs out: O(batch) amortised). Only the room past the current end is
        written, so an array handed out before (``ids``) never changes."""
        n, k = len(self._ids), len(ids)
        if self._room is None or len(self._room[0]) < n + k:
            size = n + k + max(n // 4, 4096)
            self._room = tuple(with_room(a, size) for a in (self._ids, self._seg, self._row))
        for buf, extra in zip(self._room, (ids, seg, row)):
            buf[n : n + k] = extra
        room = self._room
        self._seg, self._row = room[1][: n + k], room[2][: n + k]
        self._ids = room[0][: n + k]

    def _merge_map(self, ids: np.ndarray, seg: int, rows: np.ndarray) -> None:
        """Merge sorted unique ``ids`` of the newest segment ``seg`` anywhere into the map
        (ids of stored chunks again, as compaction writes them): O(space) copies, no sort."""
        n = len(self._ids)
        pos = np.searchsorted(self._ids, ids)
        dup = pos < n
        dup[dup] = self._ids[pos[dup]] == ids[dup]
        segs, row = self._seg.copy(), self._row.copy()
        segs[pos[dup]], row[pos[dup]] = seg, rows[dup]  # the newest copy wins
        new = ~dup
        self._set_map(np.insert(self._ids, pos[new], ids[new]), np.insert(segs, pos[new], seg),
                      np.insert(row, pos[new], rows[new]))

    def _open_segment(self, name: str) -> np.ndarray | None:
        path = self.folder / name
        try:
            arr = np.load(path, mmap_mode="r")
        except FileNotFoundError:
            raise
        except OSError as e:  # permissions, I/O: maybe passing, so keep the file and try again
            log.warning("cannot read vector segment %s now: %s", path, e)
            return None
        except Exception as e:  # a torn file cannot exist (atomic rename), but never crash on one
            self._mark_unreadable(name, f"unreadable: {e}")
            return None
        if arr.dtype != record_dtype(self.dim):
            self._mark_unreadable(name, f"unexpected layout {arr.dtype}")
            return None
        return arr

    def _mark_unreadable(self, name: str, why: str) -> None:
        self.unreadable.add(name)
        log.warning("ignoring vector segment %s (%s); its chunks are embedded again by the next "
                    "index run, then it is deleted", self.folder / name, why)

    # -- id sidecars (a cache: the segment is the truth) ---------------------------------
    def _read_ids(self, name: str, records: np.ndarray) -> np.ndarray:
        """A segment's ids in record order: from its sidecar when that fits the segment, else
        from the id column (then written as a sidecar for the next open)."""
        ids = self._load_sidecar(name, records)
        if ids is None:
            ids = np.array(records["id"])
            if self.writable and len(ids):
                self._write_sidecar(name, ids)
        return ids

    def _load_sidecar(self, name: str, records: np.ndarray) -> np.ndarray | None:
        """The sidecar's ids, or None when it is missing, unreadable or does not fit: its
        length must be the segment's record count (from the header: no vector is read) and its
        first and last ids those of the segment (two records read)."""
        n = len(records)
        if not n:
            return None
        try:  # memory-mapped: the ids stay in the page cache, not in this process's own memory
            ids = np.load(self.folder / ids_file(name), mmap_mode="r", allow_pickle=False)
        except Exception:  # none yet, torn (EOFError, ValueError), not an array: read the column
            return None
        if ids.dtype != np.dtype("<i8") or ids.shape != (n,):
            return None
        if ids[0] != records[0]["id"] or ids[n - 1] != records[n - 1]["id"]:
            return None
        return ids

    def _write_sidecar(self, name: str, ids: np.ndarray) -> None:
        """Best effort: where this process cannot write (read-only folder, full disk) the id
        column is simply read again at the next open."""
        try:
            write_atomic(self.folder / ids_file(name), lambda tmp: _save_npy(tmp, ids))
        except OSError as e:
            log.debug("no id sidecar for %s: %s", self.folder / name, e)

    def delete_stray_sidecars(self) -> int:
        """Delete sidecars whose segment is gone (a crash between deleting the two, or a reader
        that wrote one while a writer merged its segment away). Returns how many."""
        names = set(os.listdir(self.folder))
        stray = [n for n in names
                 if n.endswith(IDS_SUFFIX) and n[: -len(IDS_SUFFIX)] + ".npy" not in names]
        for n in stray:
            (self.folder / n).unlink(missing_ok=True)
        return len(stray)

    # -- reading -------------------------------------------------------------------------
    @property
    def ids(self) -> np.ndarray:
        return self._ids

    def has(self, ids: Sequence[int]) -> np.ndarray:
        return in_sorted(self._ids, np.asarray(ids, dtype=np.int64))

    def get(self, ids: Sequence[int]) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if not self.has(ids).all():
            self.reload()
        found = self.has(ids)
        if not found.all():
            missing = ids[~found][:5].tolist()
            raise SpaceError(f"No stored vector for chunk ids {missing} in {self.folder}.")
        pos = np.searchsorted(self._ids, ids)
        out = np.empty((len(ids), self.dim), np.float32)
        seg, row = self._seg[pos], self._row[pos]
        for s in np.flatnonzero(np.bincount(seg)):  # the segments used (np.unique imports numpy.ma)
            sel = np.flatnonzero(seg == s)
            out[sel] = self._vectors_of(self._order[s])[row[sel]]
        return out

    def _vectors_of(self, name: str) -> np.ndarray:
        """The vector column of segment ``name`` as a plain array over its memory map, made
        once per map: indexing the memmap itself builds a memmap view per call (at 100k
        chunks in 40 segments that was 1.5 ms of a 64-candidate re-score)."""
        records = self._segments[name]
        cached = self._plain.get(name)
        if cached is None or cached[0] is not records:
            cached = self._plain[name] = (records, records.view(np.ndarray)["v"])
        return cached[1]

    def segment_ids(self, name: str) -> np.ndarray:
        return self._segment_ids[name]

    # -- writing (under the library write lock) ------------------------------------------
    def write(self, ids: Sequence[int], vectors: np.ndarray) -> str:
        ids = np.array(ids, dtype=np.int64)  # a copy: kept as the segment's ids
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        names = self.segment_names()
        name = self._write_segment(names, ids, lambda rows: vectors[rows])
        if self._knows_all(names):  # nothing changed under us: merge just this segment's ids
            self._add_segment(name)
        else:
            self.reload()
        return name

    @staticmethod
    def _next_name(names: list[str]) -> str:
        """A new segment's file name: the next sequence number after the folder's ``names``."""
        seq = int(SEGMENT_RE.match(names[-1]).group(1)) + 1 if names else 1
        return f"seg-{seq:010d}-{secrets.token_hex(4)}.npy"

    def _write_segment(self, names: list[str], ids: np.ndarray, vectors_of) -> str:
        """Write a new segment (named after the folder's ``names``) of ``ids``, whose vectors
        ``vectors_of(slice)`` gives :data:`COPY_BLOCK_ROWS` rows at a time (merging 1M vectors at
        dim 384 must not hold 1.5 GB), atomically, then its sidecar: a crash before the sidecar
        only costs reading the segment's id column once. Returns the segment's file name; the
        map is the caller's to update."""
        name = self._next_name(names)
        dtype = record_dtype(self.dim)
        header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
                  "shape": (len(ids),)}

        def fill(tmp: str) -> None:  # the bytes np.save writes, produced block by block
            with open(tmp, "wb") as f:
                np.lib.format.write_array_header_1_0(f, header)
                for start in range(0, len(ids), self.COPY_BLOCK_ROWS):
                    rows = slice(start, start + self.COPY_BLOCK_ROWS)
                    rec = np.empty(len(ids[rows]), dtype)
                    rec["id"], rec["v"] = ids[rows], vectors_of(rows)
                    f.write(rec.tobytes())

        write_atomic(self.folder / name, fill)
        if len(ids):
            self._write_sidecar(name, ids)
        self._segment_ids[name] = ids
        return name

    def _write_copy(self, ids: np.ndarray) -> str:
        """A new segment holding the stored vectors of the sorted unique ``ids``. The map is
        left alone: the caller deletes the segments copied from, which reloads it."""
        return self._write_segment(self.segment_names(), ids, lambda rows: self.get(ids[rows]))

    # -- size-tiered merging during a run (the writer, under the library write lock) ----------
    #: rows read and written at a time when segments are copied into a new one (25 MB at dim 384)
    COPY_BLOCK_ROWS = 16_384
    #: segments below this many rows form tier 0; tier t holds TIER0_ROWS x MERGE_FANIN^(t-1) to
    #: TIER0_ROWS x MERGE_FANIN^t rows. 1024 = 4 x 256 puts a 256-chunk batch in the middle of tier 0 and
    #: 16 merged batches (4096) in the middle of tier 1, so batches a few times smaller or larger
    #: than the default still climb exactly one tier per merge
    TIER0_ROWS = 1024

    @staticmethod
    def tier(rows: int) -> int:
        """The size tier of a segment of ``rows`` records (see :data:`TIER0_ROWS`)."""
        tier, top = 0, RawVectors.TIER0_ROWS
        while rows >= top:
            tier, top = tier + 1, top * MERGE_FANIN
        return tier

    def _full_tier(self) -> list[str] | None:
        """The oldest :data:`MERGE_FANIN` segments of the lowest tier holding that many, or None."""
        tiers: dict[int, list[str]] = {}
        for name in self._order:  # oldest first (sequence order)
            tiers.setdefault(self.tier(len(self._segments[name])), []).append(name)
        full = [t for t, names in tiers.items() if len(names) >= MERGE_FANIN]
        return tiers[min(full)][:MERGE_FANIN] if full else None

    def merge_full_tiers(self, members: IdSet, *, eager: bool = False) -> int:
        """Bound the number of segments during a long run, like an LSM tree's size-tiered
        compaction: once the space holds more than ``MAX_SEGMENTS + MERGE_FANIN`` segments,
        merge the oldest :data:`MERGE_FANIN` segments of the lowest size tier holding that many
        into one segment (one tier up), again while a tier is full (cascading). The count then
        stays at most max(MAX_SEGMENTS + MERGE_FANIN, (MERGE_FANIN - 1) x tiers) + 1. A run of
        fewer segments is left to ``maintain``'s compaction at the end of the sync, which
        above MAX_SEGMENTS merges a small space into one segment (merging first would write it
        twice) and merges a big one's full tiers eagerly (:meth:`compact`).
        Returns the merges done.

        Only ids in ``members`` (the committed set) are kept, each with the copy every reader
        uses now (the newest): an id whose newest copy is in a segment not merged is left out,
        so the map after the merge equals the one before for every member. The merged segment is
        written first (atomic, fsynced, with its sidecar), then the merged ones are deleted, as
        :meth:`compact` does: a crash in between leaves duplicates of the same vectors, the
        merged (newest) copy wins, and as the old segments still fill their tier the next merge
        finds all their ids superseded and only deletes them.

        Cost (write amplification): each vector is rewritten once per tier it climbs, about
        log_16(n / 256) times (10M vectors: 4 tiers); ``maintain``'s compaction adds one more
        for spaces of at most :data:`FULL_COMPACT_ROWS` vectors. ``eager``: merge full tiers
        whatever the count (:meth:`compact` of a big space)."""
        if not eager and len(self._order) <= MAX_SEGMENTS + MERGE_FANIN:
            return 0
        merges = 0
        while (group := self._full_tier()) is not None:
            self._merge(group, members)
            merges += 1
        return merges

    def _merge(self, group: list[str], members: IdSet) -> None:
        """Merge the segments ``group`` into one new segment (see :meth:`merge_full_tiers`)."""
        where = np.array([self._order.index(n) for n in group], np.int32)
        # sorted_ids, not np.unique: with numpy 2.4 np.unique took 3.7 s for 4M ids
        ids = sorted_ids(np.concatenate([self._segment_ids[n] for n in group]))
        ids = ids[members.contains(ids)]
        newest_here = np.isin(self._seg[np.searchsorted(self._ids, ids)], where)
        ids = ids[newest_here]
        if len(ids):
            self._write_copy(ids)
        self.delete_segments(group)  # reloads: the map is exactly a full rescan's

    def delete_segments(self, names: Iterable[str]) -> None:
        for n in names:
            # the sidecar first: a crash in between leaves a segment without one (read again),
            # not a stray sidecar
            (self.folder / ids_file(n)).unlink(missing_ok=True)
            (self.folder / n).unlink(missing_ok=True)
            self.unreadable.discard(n)
        fsync_dir(self.folder)
        self.reload()

    def compact(self, keep: Iterable[int]) -> bool:
        """Merge every segment into one holding only ``keep`` ids (any iterable of ints, an
        array, an :class:`IdSet`) when a quarter of the stored vectors are garbage, or when there
        are more than :data:`MAX_SEGMENTS` segments in a space of at most
        :data:`FULL_COMPACT_ROWS` vectors; a bigger space with too many segments only merges its
        full size tiers (:meth:`merge_full_tiers`). Returns True if anything was merged."""
        names = list(self._order)
        keep_ids = sorted_ids(keep)
        keep_ids = keep_ids[self.has(keep_ids)]
        garbage = len(self._ids) - len(keep_ids)
        if garbage <= max(1000, len(self._ids) // 4):
            if len(names) <= MAX_SEGMENTS:
                return False
            if len(self._ids) > FULL_COMPACT_ROWS:
                return self.merge_full_tiers(IdSet._of(keep_ids), eager=True) > 0
        if len(keep_ids):  # block by block: 10M vectors at dim 384 are 15 GB
            self._write_copy(keep_ids)
        self.delete_segments(names)
        return True


"""Vector spaces: one per encoder fingerprint, each with raw vectors and a FAISS index.

On disk, ``spaces/<name>/`` holds

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
- ``index.faiss``: the FAISS index, whose ids are chunk ids: an ``IndexIDMap2`` over flat inner
  product by default, over HNSW above ``hnsw_threshold``, and a compressed IVF index above
  ``compress_threshold`` (library settings), or a factory string from the settings. It is a
  cache: it can always be rebuilt from the raw vectors without re-encoding.
- ``index.json``: what the index is and what it was measured to do (type, bytes, vectors it
  was trained on, recall@10 against exact search), written with ``index.faiss``; ``status``
  shows it without loading FAISS.

Compressed spaces (libraries of millions of chunks). Above ``compress_threshold`` the index
becomes ``IVF<lists>,<codes>`` (:func:`compressed_factory`), trained on the space's own vectors
and retrained when the space has grown :data:`RETRAIN_GROWTH` times since; every search takes
the top :data:`RESCORE_CANDIDATES` of the codes and re-scores them exactly from the raw
vectors. Why these choices (clustered synthetic vectors, dim 384, see ``bench/scale.py``):

- Codes: :data:`COMPRESSED_CODES` = 4-bit scalar (SQ4, 192 B/vector at dim 384: 13.1% of
  float32 flat with ids and lists; the budget was 15%). At 200k vectors, IVF512 at nprobe 32,
  re-scoring 200 candidates: recall@10 0.99 with SQ4, 0.97 with PQ96 (96 B; 0.99 needs 500
  candidates), 0.85 with PQ48, 0.99 with SQ8 (384 B, 25% of flat: over budget). SQ4 trains in
  seconds (min/max per dimension; the lists' k-means is the cost), PQ96 took 254 s on 65k
  vectors (2 loaded cores): a Pi retraining a grown space should not wait for that. With SQ4
  the recall is bound by the lists probed, not by the codes (same recall as IVF-Flat).
- nprobe is tuned at build (:meth:`Space.measure_recall`, :func:`_tune_nprobe`: doubling, then
  bisection) to about the smallest value reaching :data:`TARGET_RECALL` on
  :data:`RECALL_QUERIES` stored vectors as queries, each without its own document's chunks
  (:data:`RECALL_LEAVE_OUT`). A query that scans more than :data:`PARALLEL_SCAN_CODES` codes
  splits its lists over every core.
- Measured with ``bench/scale.py`` (2 cores shared with other jobs; p50 of single queries, new
  queries, recall@10 against exact search; ``bench/synthetic.py`` for the two kinds of vectors):

  ===========  =====  =========  ======  ======  =========  ========  ==============
  vectors      n      index      nprobe  recall  p50 / p99  flat p50  index memory
  ===========  =====  =========  ======  ======  =========  ========  ==============
  documents    1M     IVF1024    32      0.965   2.4 / 3.1  55 ms     202 MB (13.1%)
  isotropic    1M     IVF1024    72      0.971   8.4 / 9.1  56 ms     202 MB (13.1%)
  documents    10M    IVF4096    26      0.971   3.8 / 5.8  --        2.0 GB (13.1%)
  isotropic    10M    IVF4096    288     0.972   37 / 93    --        2.0 GB (13.1%)
  ===========  =====  =========  ======  ======  =========  ========  ==============

  ``documents`` vectors have the local intrinsic dimension of real text embeddings (measured
  against a real library by ``bench/realism.py``); ``isotropic`` ones are a far harder worst
  case (its 10M row was measured while the test suite shared the 2 cores). At 10M: build 372 s
  after the raw vectors were written, open 1.8 s, 2.4 GB of private memory (the codes; ids
  are int64 arrays, 8 bytes each).
- IVF ids: an IVF index holds its own ids, so it is not wrapped in ``IndexIDMap2`` (which
  renumbers its map after a removal while IVF keeps the old internal ids: after removing 100
  ids, searches returned the ids of vectors 100 places further on).
- Raw vectors stay float32 and are only memory-mapped: re-scoring reads a few hundred rows per
  query from the page cache, so RAM holds the codes, not the vectors. A float16 mirror would
  halve the disk but add a second copy to keep crash-safe; the segments stay the one truth.

Which ids a space really holds is decided by SQLite alone (``space_members``, committed in
the same transaction as the chunks). A segment written for a batch whose transaction never
committed holds ids SQLite does not list; they are ignored and deleted by the reconcile step
(:meth:`Space.load` with ``repair=True``), and the FAISS index is brought to exactly the
member set at load and on every refresh. See :mod:`hefsearch.index.library` for the protocol.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from hefsearch.embed.atomic_write import fsync_dir, write_atomic
from hefsearch.embed.fingerprint import describe_difference

from .errors import FingerprintMismatch, SpaceError
from .factory_check import check_factory

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder

log = logging.getLogger("hefsearch.index")

INDEX_FILE = "index.faiss"
SEGMENT_RE = re.compile(r"^seg-(\d{10})-([0-9a-f]+)\.npy$")
#: chunk count from which a space switches from exact flat search to HNSW (library setting
#: ``hnsw_threshold`` overrides; ``index_factory`` forces a factory string)
DEFAULT_HNSW_THRESHOLD = 200_000
DEFAULT_HNSW_FACTORY = "HNSW32"
#: filtered searches over at most this many candidate chunks are answered exactly
EXACT_FILTER_LIMIT = 50_000
#: rebuild a non-removable index (HNSW) when this share of its ids are deleted ones
TOMBSTONE_REBUILD_SHARE = 0.1
#: merge segments when there are more than this many
MAX_SEGMENTS = 32
#: after a batch, merge this many segments of one size tier into one (RawVectors.merge_full_tiers)
MERGE_FANIN = 16
#: a space of at most this many stored vectors is merged into one segment when it holds more
#: than MAX_SEGMENTS (400 MB at dim 384); a bigger one only merges its full size tiers: the size
#: tiers of a 10M space hold up to 15 segments each, and rewriting 15 GB at the end of every
#: index run because of that would be the cost of a whole re-index, on an SD card
FULL_COMPACT_ROWS = 262_144
#: vectors compared between the FAISS index and the raw vectors when a space is loaded
LOAD_CHECK_SAMPLE = 32
#: a search-only index (IVF-PQ, ...) must find at least this share of sampled vectors themselves
SELF_FIND_SHARE = 0.5
#: chunk count from which a space's index is compressed (library setting ``compress_threshold``):
#: a 384-dim flat index of 500k vectors already takes 770 MB of a Pi's RAM
DEFAULT_COMPRESS_THRESHOLD = 500_000
#: the factory name a compressed space records; the concrete string depends on its size
COMPRESSED_FACTORY = "IVF-compressed"
#: codes of a compressed index: 4-bit scalar quantisation (dim/2 bytes per vector; module doc)
COMPRESSED_CODES = "SQ4"
#: retrain a compressed index when the space holds this many times the vectors it was trained on
RETRAIN_GROWTH = 2.0
#: candidates a compressed index returns per query, re-scored exactly from the raw vectors
RESCORE_CANDIDATES = 256
#: a compressed index's search uses every core once a query scans this many codes on average
#: (nprobe x vectors / lists): at 2M vectors, IVF1024,SQ4, nprobe 96 (430k codes) took 14.4 ms
#: on one core and 7.9 ms on two; below this, OpenMP's start-up costs more than it saves
PARALLEL_SCAN_CODES = 100_000
#: sampled stored vectors used as queries when recall@10 is measured at build/retrain. nprobe
#: stops at the first value whose measured recall reaches the target, so the noise of a small
#: sample turns into optimism: with 100 queries, 10M vectors were tuned to 0.971 and new queries
#: got 0.954 (the standard error of the mean over 100 queries is about 0.01)
RECALL_QUERIES = 300
#: ids on either side of a recall query's own id left out of its lists. Chunks of a document get
#: consecutive ids, and a stored chunk finds its own document's other chunks far more easily
#: than a user's query finds anything: at 10M vectors (``bench/scale.py``), nprobe tuned with
#: only the query's own id left out reached 0.971 on stored vectors but 0.954 on new queries
RECALL_LEAVE_OUT = 32
#: recall@10 an IVF index's nprobe is tuned to at build (stored vectors as queries)
TARGET_RECALL = 0.97
#: vectors a compressed index needs at least (fewer: flat, exact): IVF16 lists with 62 training
#: vectors each; a user who sets compress_threshold that low gets what they asked for
MIN_COMPRESSED = 1_000
INDEX_META_FILE = "index.json"
#: factories hefsearch itself picks (size rules); any other string is the user's and goes
#: through the child-process check before it is built (:mod:`~hefsearch.index.factory_check`)
OWN_FACTORIES = frozenset({"Flat", "FlatIP", "", DEFAULT_HNSW_FACTORY, COMPRESSED_FACTORY})
#: largest hnsw_threshold / compress_threshold a library accepts (more chunks than any holds)
MAX_THRESHOLD = 10**12


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


# -- sets of chunk ids -----------------------------------------------------------------------
def sorted_ids(ids) -> np.ndarray:
    """Any iterable of ints (a set, a list, an array, an :class:`IdSet`) as a sorted int64
    array without duplicates. Sorted input (SQLite's member rows) costs one O(n) check.

    Not ``np.unique``: with numpy 2.4 it took 11 s for 10M ids where a stable sort of the
    same array takes 0.1 s."""
    if isinstance(ids, IdSet):
        return ids.ids
    if isinstance(ids, np.ndarray):
        arr = ids.astype(np.int64, copy=False).ravel()
    else:
        arr = np.fromiter(ids, np.int64)
    if len(arr) < 2 or bool((arr[1:] > arr[:-1]).all()):
        return arr
    arr = np.sort(arr)
    return arr[np.r_[True, arr[1:] != arr[:-1]]]


def in_sorted(hay: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """For each of ``ids``, whether the sorted array ``hay`` holds it."""
    ids = np.asarray(ids, np.int64)
    if not len(hay) or not ids.size:
        return np.zeros(ids.shape, bool)
    if ids.size * 8 < len(hay):  # a few ids: binary search (np.isin would build a table of hay)
        pos = np.minimum(np.searchsorted(hay, ids), len(hay) - 1)
        return hay[pos] == ids
    return np.isin(ids, hay)  # as many as hay: a lookup table over their range (10M: 55 ms)


class IdSet:
    """A set of chunk ids held as one sorted int64 array, never changed in place (every
    operation returns a new set).

    8 bytes an id where a Python ``set[int]`` of ids took about 60 with its int objects: 10M
    members and 10M indexed ids take 160 MB instead of about 1 GB. Supports what ``Space`` used
    of ``set`` (``len``, ``in``, iteration, ``&``, ``-``, ``|``, ``==``) and, for whole arrays,
    :meth:`contains`; ``np.asarray`` gives the sorted array.
    """

    __slots__ = ("ids", "_room")

    def __init__(self, ids=()):
        arr = sorted_ids(ids)
        if isinstance(ids, np.ndarray) and np.may_share_memory(arr, ids):
            arr = arr.copy()  # the caller's array: changing it later must not change the set
        self.ids = _frozen(arr)
        self._room = None

    @classmethod
    def _of(cls, sorted_unique: np.ndarray, room: "_Room | None" = None) -> "IdSet":
        out = cls.__new__(cls)
        out.ids = _frozen(sorted_unique)
        out._room = room
        return out

    def contains(self, ids) -> np.ndarray:
        return in_sorted(self.ids, ids)

    def __len__(self) -> int:
        return len(self.ids)

    def __bool__(self) -> bool:
        return len(self.ids) > 0

    def __iter__(self):  # Python ints, a block at a time (no list of 10M ints)
        for start in range(0, len(self.ids), 65_536):
            yield from self.ids[start : start + 65_536].tolist()

    def __contains__(self, chunk_id) -> bool:
        return bool(self.contains(np.array([chunk_id], np.int64))[0])

    def __array__(self, dtype=None, copy=None):
        return self.ids if dtype is None else self.ids.astype(dtype)

    def __and__(self, other) -> "IdSet":
        return IdSet._of(self.ids[in_sorted(sorted_ids(other), self.ids)])

    def __sub__(self, other) -> "IdSet":
        other = sorted_ids(other)
        if not len(other):
            return self
        if len(other) * 8 < len(self.ids):  # a few ids: find them, copy the rest once
            pos = np.minimum(np.searchsorted(self.ids, other), len(self.ids) - 1)
            pos = pos[self.ids[pos] == other]
            return IdSet._of(np.delete(self.ids, pos)) if len(pos) else self
        return IdSet._of(self.ids[~in_sorted(other, self.ids)])

    def __or__(self, other) -> "IdSet":
        other = sorted_ids(other)
        if len(other) and (not len(self.ids) or other[0] > self.ids[-1]):
            return self._appended(other)  # new chunks: ids above every id of the set
        extra = other[~in_sorted(self.ids, other)]
        if not len(extra):
            return self
        both = np.concatenate([self.ids, extra])
        both.sort(kind="stable")  # two sorted runs: timsort merges them in O(n)
        return IdSet._of(both)

    def __eq__(self, other) -> bool:
        if not isinstance(other, (IdSet, set, frozenset, np.ndarray, list, tuple)):
            return NotImplemented
        return bool(np.array_equal(self.ids, sorted_ids(other)))

    __hash__ = None  # compared by value, like set

    def _appended(self, extra: np.ndarray) -> "IdSet":
        """This set and ``extra`` (sorted, all above this set's ids), written into the room
        behind this set's array when this set is the newest of its chain of appends, else into
        a new buffer with a quarter more room: O(len(extra)) amortised where a copy of the set
        cost 20 ms at 10M ids per batch. Earlier sets of the chain keep seeing their own prefix."""
        n, k = len(self.ids), len(extra)
        room = self._room
        with _ROOM_LOCK:  # claim the room: only one set may append behind the same prefix
            if room is not None and room.used == n and n + k <= len(room.buf):
                room.used = n + k
            else:
                room = _Room(_with_room(self.ids, n + k + max(n // 4, 1024)), n + k)
        room.buf[n : n + k] = extra
        return IdSet._of(room.buf[: n + k], room)

    def __repr__(self) -> str:
        return f"IdSet({len(self.ids)} ids)"


class _Room:
    """The buffer behind a chain of IdSets made by appends: ``buf[:used]`` is the newest set,
    each older one a shorter prefix (never written again)."""

    __slots__ = ("buf", "used")

    def __init__(self, buf: np.ndarray, used: int):
        self.buf, self.used = buf, used


_ROOM_LOCK = threading.Lock()


def _frozen(arr: np.ndarray) -> np.ndarray:
    """``arr`` made read-only: an IdSet's array is shared (``_rebuild`` gives the members' array
    to the index's set), so sorting it in place anywhere would be a silent bug."""
    arr = np.ascontiguousarray(arr, np.int64)
    arr.flags.writeable = False
    return arr


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


def _with_room(arr: np.ndarray, size: int) -> np.ndarray:
    """A new buffer of ``size`` elements starting with a copy of ``arr``."""
    buf = np.empty(size, arr.dtype)
    buf[: len(arr)] = arr
    return buf


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
            self._room = tuple(_with_room(a, size) for a in (self._ids, self._seg, self._row))
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
        for s in np.unique(seg):
            sel = np.flatnonzero(seg == s)
            out[sel] = self._segments[self._order[s]]["v"][row[sel]]
        return out

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


# -- FAISS -----------------------------------------------------------------------------------
_FAISS = None


def _faiss():
    """FAISS, imported on first use (``hefsearch --help`` stays fast).

    Searches run one query at a time, where OpenMP's thread start-up and barriers cost more
    than the scan itself (18 ms instead of 0.1 ms for a small index on 2 cores), so FAISS runs
    single-threaded except while building an index (:func:`_threads`).
    """
    global _FAISS
    if _FAISS is None:
        import faiss

        faiss.omp_set_num_threads(1)
        _FAISS = faiss
    return _FAISS


class _threads:
    """Let FAISS use every core for a bulk build or a big scan, then go back to one thread."""

    def __enter__(self):
        _faiss().omp_set_num_threads(os.cpu_count() or 1)

    def __exit__(self, *exc):
        _faiss().omp_set_num_threads(1)


def compressed_factory(n: int) -> str:
    """The concrete factory of a compressed space of ``n`` vectors: ``IVF<lists>,<codes>`` with
    about sqrt(n) lists (a power of two in 16..4096, at least 39 training vectors each)."""
    lists = 2 ** int(round(np.log2(max(np.sqrt(max(n, 1)), 16))))
    most = 2 ** int(np.log2(max(n // 39, 16)))
    return f"IVF{int(min(4096, max(16, min(lists, most))))},{COMPRESSED_CODES}"


def faiss_reason(e: Exception) -> str:
    """FAISS's own words for a refusal, without the C++ location and the failed assertion,
    which tell a user nothing."""
    reason = re.sub(r"Error in .*? at \S+:\d+: |Error: '.*?' failed: ", "", str(e))
    return reason.strip().rstrip(". ") + "."


def make_index(factory: str, dim: int, n: int = 0):
    """An empty index for ``factory`` (``COMPRESSED_FACTORY``: chosen for ``n`` vectors).

    IVF indexes hold their own ids and are returned as they are; every other index is wrapped
    in ``IndexIDMap2`` (ids are chunk ids)."""
    faiss = _faiss()
    if factory == COMPRESSED_FACTORY:
        factory = compressed_factory(n)
    if factory in ("Flat", "FlatIP", ""):
        base = faiss.IndexFlatIP(dim)
    else:
        try:
            base = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
        except Exception as e:
            err = SpaceError(
                f"FAISS cannot build an index from the factory string {factory!r}: {faiss_reason(e)}",
                "Use 'Flat', 'HNSW32' or another faiss.index_factory string "
                "(library setting index_factory).",
            )
            err.reason = faiss_reason(e)
            raise err from None
    ivf = faiss.try_extract_index_ivf(base)
    if ivf is None:
        return faiss.IndexIDMap2(base)
    ivf.cp.niter = 10  # k-means on a Pi: 10 rounds instead of 25 (nprobe is tuned after)
    pq = getattr(faiss.downcast_index(ivf), "pq", None)
    if pq is not None:
        pq.cp.niter = 10
    ivf.nprobe = min(ivf.nlist, max(16, ivf.nlist // 8))  # a start: tuned by measure_recall
    return base


def inner_index(index):
    """The index under the id map (or the index itself: IVF keeps its own ids)."""
    faiss = _faiss()
    return faiss.downcast_index(index.index) if hasattr(index, "id_map") else faiss.downcast_index(index)


def ivf_of(index):
    """The IVF part of an index, or None."""
    return _faiss().try_extract_index_ivf(index) if index is not None else None


def index_ids(index) -> np.ndarray:
    faiss = _faiss()
    if not index.ntotal:
        return np.empty(0, np.int64)
    if hasattr(index, "id_map"):
        return faiss.vector_to_array(index.id_map).astype(np.int64)
    ivf = ivf_of(index)
    lists = ivf.invlists
    parts = [faiss.rev_swig_ptr(lists.get_ids(i), lists.list_size(i)).copy()
             for i in range(ivf.nlist) if lists.list_size(i)]
    return np.concatenate(parts).astype(np.int64)


def describe_index(index) -> str:
    """'Flat', 'HNSW32', 'IVF1024,PQ96', ... as read from the index itself."""
    faiss = _faiss()
    inner = inner_index(index)
    if isinstance(inner, faiss.IndexFlat):
        return "Flat"
    if hasattr(inner, "hnsw"):
        return f"HNSW{inner.hnsw.nb_neighbors(1)}"
    ivf = ivf_of(index)
    if ivf is not None:
        codes = (f"PQ{inner.pq.M}" if hasattr(inner, "pq") else
                 f"SQ{inner.sq.code_size * 8 // max(inner.d, 1)}" if hasattr(inner, "sq") else "Flat")
        return f"IVF{ivf.nlist},{codes}"
    return type(inner).__name__


def read_index_stats(folder: Path) -> dict:
    """``index.json`` of a space folder (``{}`` when missing or unreadable), with the index
    file's current size as ``bytes`` (what the loaded index takes in memory, about)."""
    try:
        stats = json.loads((folder / INDEX_META_FILE).read_text())
    except (OSError, ValueError):
        stats = {}
    if not isinstance(stats, dict):
        stats = {}
    try:
        stats["bytes"] = (folder / INDEX_FILE).stat().st_size
    except OSError:
        stats.pop("bytes", None)
    return stats


class Space:
    """One vector space of a library. Get it from ``Library.space(name)``."""

    def __init__(self, library, info: SpaceInfo):
        self.library = library
        self.info = info
        self.folder = Path(library.path) / "spaces" / info.name
        self.folder.mkdir(parents=True, exist_ok=True)
        self.raw = RawVectors(self.folder, info.dim, writable=not getattr(library, "read_only", False))
        self.index = None
        self._lock = threading.RLock()
        #: committed members (SQLite ``space_members``) and ids in the FAISS index: sorted
        #: arrays, 8 bytes an id (see IdSet)
        self._members = IdSet()
        self._in_index = IdSet()
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

    # -- loading and reconciling ---------------------------------------------------------
    def load(self, members: Iterable[int], *, repair: bool) -> dict:
        """Bring the in-memory FAISS index to exactly ``members`` (the committed SQLite set:
        an array from :meth:`Library.member_ids` or any iterable of ints).

        With ``repair`` (the caller holds the library write lock) it also deletes segments
        holding no member (left by a batch that never committed) and id sidecars without a
        segment, removes member rows whose vector is gone, and saves the FAISS file when it
        changed. Returns what it did (``lost_ids``: a sorted array).
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
            self.index = self._read_index()
            if self.index is None:
                self._rebuild()
                done["rebuilt"] = True
            else:
                self._in_index = IdSet(index_ids(self.index))
                a, r = self._sync_index()
                done["added"], done["removed"] = a, r
                mismatch = self.index_mismatch()
                if mismatch:
                    log.warning("space %s: the FAISS index does not match the raw vectors (%s); "
                                "rebuilding it from them", self.info.name, mismatch)
                    self._rebuild()
                    done["rebuilt"], done["index_mismatch"] = True, mismatch
            if repair and (done["rebuilt"] or done["added"] or done["removed"] or self._dirty):
                self.save()
            done["lost_ids"] = lost
            return done

    def index_mismatch(self, sample: int = LOAD_CHECK_SAMPLE) -> str | None:
        """Why the FAISS index does not hold the raw vectors, or None when a sample agrees.

        An index that stores vectors exactly (flat, HNSW over flat) must give back the raw
        vector of each sampled id; any other (IVF, PQ: lossy) must find most sampled raw
        vectors themselves. Raw vectors that are not finite are left to ``doctor``.
        """
        with self._lock:
            if self.index is None:
                return None
            ids = (self._members & self._in_index).ids
            if not len(ids):
                return None
            pick = np.random.default_rng().choice(ids, min(sample, len(ids)), replace=False)
            raw = self.raw.get(pick)
            keep = np.isfinite(raw).all(axis=1)
            pick, raw = pick[keep], np.ascontiguousarray(raw[keep])
            if not len(pick):
                return None
            if self._stores_exact_vectors():
                got = self.index.reconstruct_batch(pick)
                differ = int((~np.isclose(got, raw, rtol=1e-5, atol=1e-6).all(axis=1)).sum())
                if differ:
                    return f"{differ} of {len(pick)} sampled vectors differ"
                return None
            # the index's own ranking, without re-scoring (which would hide any index
            # whose candidates cover the space)
            _scores, found = self.index.search(raw, min(10, self.index.ntotal))
            share = float(np.mean([self._finds_itself(q, row) for q, row in zip(raw, found)]))
            if share < SELF_FIND_SHARE:
                return f"only {share:.0%} of {len(pick)} sampled vectors find themselves"
            return None

    def _finds_itself(self, query: np.ndarray, found: np.ndarray) -> bool:
        """Whether a search hit holds the query's own raw vector (by value: a chunk repeated
        more often than the search returns finds a twin, not necessarily its own id)."""
        ids = found[(found >= 0) & self._members.contains(found)].astype(np.int64)
        if not len(ids):
            return False
        return bool(np.isclose(self.raw.get(ids), query, rtol=1e-5, atol=1e-6).all(axis=1).any())

    def nonfinite_ids(self, block: int = 65536) -> np.ndarray:
        """Member ids whose stored vector holds NaN or infinity (reads every vector: doctor)."""
        with self._lock:
            ids = self._members.ids
        ids = ids[self.raw.has(ids)] if len(ids) else ids
        bad = [part[~np.isfinite(self.raw.get(part)).all(axis=1)]
               for part in (ids[i : i + block] for i in range(0, len(ids), block))]
        return np.concatenate(bad) if bad else np.empty(0, np.int64)

    def _stores_exact_vectors(self) -> bool:
        faiss = _faiss()
        base = inner_index(self.index)
        if hasattr(base, "hnsw"):
            base = faiss.downcast_index(base.storage)
        return isinstance(base, faiss.IndexFlat)

    def _read_index(self):
        path = self.folder / INDEX_FILE
        if not path.exists():
            return None
        try:
            index = _faiss().read_index(str(path))
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
            if len(ids) < _vectors_to_train(factory, self.info.dim):  # Flat until then: see _needs_retrain
                log.warning("space %s: %d vectors are too few to train %r; using Flat",
                            self.info.name, len(ids), factory)
                index = make_index("Flat", self.info.dim)
            else:
                ivf = ivf_of(index)
                n_train = max(100_000, 64 * ivf.nlist) if ivf is not None else 100_000
                pick = np.sort(np.random.default_rng(0).permutation(len(ids))[:n_train])
                with _threads():
                    index.train(self.raw.get(ids[pick]))
        with _threads():  # block by block from the memory-mapped segments: bounded RAM
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
        """The factory the size rules give a space of ``n`` vectors (flat, HNSW, compressed)."""
        return (COMPRESSED_FACTORY if n >= self.library.compress_threshold() else
                DEFAULT_HNSW_FACTORY if n >= hnsw_threshold else "Flat")

    def measure_recall(self, queries: int = RECALL_QUERIES, k: int = 10) -> dict:
        """recall@k of this space's search (re-scoring included) against exact search, with
        ``queries`` stored vectors of the space as queries, each query's own document left out
        of both lists (ids within :data:`RECALL_LEAVE_OUT` of its own id; reads every raw
        vector once). An IVF index first gets the smallest
        ``nprobe`` reaching :data:`TARGET_RECALL` (:func:`_tune_nprobe`): how far neighbours
        spread over the lists depends on the data, not only on its size."""
        with self._lock:
            ids = (self._members & self._in_index).ids  # sorted
            if len(ids) <= k:
                return {}
            rng = np.random.default_rng(1)
            q_ids = np.sort(rng.choice(ids, min(queries, len(ids)), replace=False))
            q = np.ascontiguousarray(self.raw.get(q_ids))
            wide = k + 2 * RECALL_LEAVE_OUT + 1  # enough to keep k after leaving out
            truth = exact_top_k(q, ids, self.raw.get, wide)

            def recall() -> float:
                found = self._ann(q, wide)[1]
                hits = [len(_without(f, own, k) & _without(t, own, k)) / k
                        for f, t, own in zip(found, truth, q_ids)]
                return float(np.mean(hits))

            ivf = ivf_of(self.index)
            r = recall() if ivf is None else _tune_nprobe(ivf, recall)
            out = {"recall_at_10": round(r, 4), "recall_queries": len(q), "recall_vectors": int(len(ids))}
            if ivf is not None:
                out["nprobe"] = int(ivf.nprobe)
            return out

    def save(self) -> None:
        """Persist the FAISS index atomically (a cache: reconcile repairs a stale one)."""
        with self._lock:
            faiss = _faiss()
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
            return n >= _vectors_to_train(factory, self.info.dim) and self._factory_needs_training()
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
            if allowed is not None:
                cand = sorted_ids(allowed)
                if not len(cand):
                    return scores, ids
                if not self._is_flat() and len(cand) <= EXACT_FILTER_LIMIT:
                    # approximate indexes miss filtered-out neighbourhoods: score exactly
                    cand = cand[self._members.contains(cand)]
                    return self._exact(q, cand, k, scores, ids) if len(cand) else (scores, ids)
                extra = len(self._in_index) - len(self._members)
                d, i = self._ann(q, min(k + extra, len(cand)), _faiss().IDSelectorBatch(cand))
            else:
                extra = len(self._in_index) - len(self._members)  # tombstones (HNSW)
                d, i = self._ann(q, min(k + extra, self.index.ntotal))
            member = (i >= 0) & self._members.contains(i)  # tombstones and -1 slots out
            for r in range(len(q)):
                keep = np.flatnonzero(member[r])[:k]
                scores[r, : len(keep)], ids[r, : len(keep)] = d[r][keep], i[r][keep]
            return scores, ids

    def _ann(self, q: np.ndarray, k: int, sel=None) -> tuple[np.ndarray, np.ndarray]:
        """The index's top-k (``sel``: an id selector). A compressed (IVF) index returns
        :data:`RESCORE_CANDIDATES` candidates, re-scored exactly from the raw vectors."""
        faiss = _faiss()
        inner = inner_index(self.index)
        ivf = ivf_of(self.index)
        fetch = min(max(k, RESCORE_CANDIDATES), self.index.ntotal) if ivf is not None else k
        if hasattr(inner, "hnsw"):
            if sel is None:
                inner.hnsw.efSearch, params = max(64, 2 * k), None
            else:  # filtered: a wider search, for this call only
                params = faiss.SearchParametersHNSW(sel=sel, efSearch=max(256, 4 * k))
        elif ivf is not None:
            params = faiss.SearchParametersIVF(sel=sel, nprobe=ivf.nprobe) if sel is not None else None
        else:
            params = faiss.SearchParameters(sel=sel) if sel is not None else None
        big = ivf is not None and ivf.ntotal * ivf.nprobe >= PARALLEL_SCAN_CODES * max(ivf.nlist, 1)
        if big:  # one query's lists are split over every core (parallel_mode 1), a batch by query (0)
            ivf.parallel_mode = 1 if len(q) < max(2, os.cpu_count() or 1) else 0
        with _threads() if big else contextlib.nullcontext():
            d, i = self.index.search(q, fetch, params=params)
        return (d, i) if ivf is None else self._rescore(q, i, k)

    def _rescore(self, q: np.ndarray, found: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact inner products of the candidates from the (memory-mapped) raw vectors."""
        scores = np.full((len(q), k), -np.inf, np.float32)
        ids = np.full((len(q), k), -1, np.int64)
        for r in range(len(q)):
            cand = found[r][found[r] >= 0]
            cand = cand[self.raw.has(cand)] if len(cand) else cand
            if not len(cand):
                continue
            sims = self.raw.get(cand) @ q[r]
            top = np.argsort(-sims, kind="stable")[:k]
            scores[r, : len(top)], ids[r, : len(top)] = sims[top], cand[top]
        return scores, ids

    def removable(self) -> bool:
        """Whether the FAISS index can delete ids (flat, IVF: yes; HNSW: no, tombstones)."""
        return not hasattr(inner_index(self.index), "hnsw")

    def _is_flat(self) -> bool:
        return isinstance(inner_index(self.index), _faiss().IndexFlat)

    def _exact(self, q, cand, k, scores, ids):
        vecs = self.raw.get(cand)
        sims = q @ vecs.T
        kk = min(k, len(cand))
        for r in range(len(q)):
            top = np.argpartition(-sims[r], kk - 1)[:kk]
            top = top[np.argsort(-sims[r][top], kind="stable")]
            scores[r, :kk], ids[r, :kk] = sims[r][top], cand[top]
        return scores, ids


def exact_top_k(q: np.ndarray, ids: np.ndarray, get, k: int, block: int = 65_536) -> np.ndarray:
    """Ids of the exact top-``k`` inner products of each query over ``ids``, best first
    (vectors read with ``get(ids)`` block by block: bounded memory at any size)."""
    k = min(k, len(ids))
    best_s = np.full((len(q), k), -np.inf, np.float32)
    best_i = np.full((len(q), k), -1, np.int64)
    for s in range(0, len(ids), block):
        part = ids[s : s + block]
        sims = q @ get(part).T
        both_s = np.concatenate([best_s, sims], axis=1)
        both_i = np.concatenate([best_i, np.broadcast_to(part, sims.shape)], axis=1)
        top = np.argpartition(-both_s, k - 1, axis=1)[:, :k]
        best_s, best_i = np.take_along_axis(both_s, top, 1), np.take_along_axis(both_i, top, 1)
    return np.take_along_axis(best_i, np.argsort(-best_s, axis=1, kind="stable"), 1)


def _vectors_to_train(factory: str, dim: int) -> int:
    """Vectors a space needs before an index of ``factory`` that must be trained is built
    (fewer: Flat, exact): at least 1000, and as many as FAISS needs (an IVF's lists, 2^bits
    for a PQ's codebooks), measured by the factory check."""
    if factory == COMPRESSED_FACTORY:
        return MIN_COMPRESSED
    if factory in OWN_FACTORIES:
        return 1000
    return max(1000, check_factory(factory, dim).train_min)


def factory_problem(factory: str, dim: int) -> str | None:
    """Why FAISS cannot serve a space of ``dim`` with ``factory`` (a crash, an error, an index
    that finds nothing: :mod:`~hefsearch.index.factory_check`), or None. hefsearch's own
    factories are not checked."""
    if factory in OWN_FACTORIES:
        return None
    check = check_factory(factory, dim)
    return None if check.ok else check.reason


def _without(row: np.ndarray, own: int, k: int) -> set[int]:
    """The first ``k`` ids of ``row`` outside the query's own document (module doc)."""
    return set([int(i) for i in row.tolist() if i >= 0 and abs(i - own) > RECALL_LEAVE_OUT][:k])


def _tune_nprobe(ivf, recall) -> float:
    """Set ``ivf.nprobe`` to about the smallest value whose ``recall()`` reaches
    :data:`TARGET_RECALL` (or to nlist); returns that recall. Doubles from nlist/256 first, then
    bisects the last doubling to within 1/8: at 10M vectors the step from 256 to 512 lists alone
    is 30 ms per query."""
    lo, r = None, 0.0
    for nprobe in _doubling(max(8, ivf.nlist // 256), ivf.nlist):
        ivf.nprobe = nprobe
        r = recall()
        if r >= TARGET_RECALL:
            break
        lo = nprobe
    if r < TARGET_RECALL or lo is None:
        return r
    hi, best = ivf.nprobe, r
    while hi - lo > max(1, hi // 8):
        ivf.nprobe = mid = (lo + hi) // 2
        got = recall()
        if got >= TARGET_RECALL:
            hi, best = mid, got
        else:
            lo = mid
    ivf.nprobe = hi
    return best


def _doubling(start: int, stop: int) -> list[int]:
    out = [min(start, stop)]
    while out[-1] < stop:
        out.append(min(out[-1] * 2, stop))
    return out


def check_fingerprint(info: SpaceInfo, parts: dict, fingerprint: str) -> None:
    if fingerprint != info.fingerprint:
        raise FingerprintMismatch(
            f"Space {info.name!r} holds vectors of another encoder than the one given "
            f"({describe_difference(info.parts, parts)}). Vectors of different encoders never mix.",
            "Use the bundle and backend this space was built with (see 'hefsearch status'), "
            "or index into another space or library.",
        )

"""Sets of chunk ids as sorted int64 arrays (:class:`IdSet`): 8 bytes an id, where two Python
sets of 10M ids took 1.16 GB. A space keeps its members and the ids of its FAISS index in them."""

from __future__ import annotations

import threading

import numpy as np


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
                room = _Room(with_room(self.ids, n + k + max(n // 4, 1024)), n + k)
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



def with_room(arr: np.ndarray, size: int) -> np.ndarray:
    """A new buffer of ``size`` elements starting with a copy of ``arr``."""
    buf = np.empty(size, arr.dtype)
    buf[: len(arr)] = arr
    return buf

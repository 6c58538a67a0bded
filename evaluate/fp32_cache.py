"""FP32 vectors for ``bench quality`` on a library that has none, kept between runs.

The bench measures every space against FP32, so it needs an FP32 vector of each chunk. A
library indexed only into an 8-bit space (``cpu-int8``, an NPU space) has none: they were
computed again on every run, for minutes, and the report said so only at the end. Now the run
says up front how many chunks it must encode, shows progress with the time left, and keeps the
vectors in ``<library>/bench-cache/fp32-<fingerprint>.npz`` (chunk id, a hash of the chunk's
text, vector), so the next run encodes only new or changed chunks. ``hefsearch index
--also-fp32`` stores them in the library itself instead (which also turns on FP32 re-ranking).
A library that cannot be written keeps nothing, and says so.
"""

from __future__ import annotations

import hashlib
import io
import logging
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from hefsearch.embed.in_context import passage_vectors
from hefsearch.index.passages import stored_sections

log = logging.getLogger("hefsearch.evaluate")

CACHE_DIR = "bench-cache"
#: chunks encoded between two progress lines
BATCH = 256


def cache_path(library, encoder) -> Path:
    return Path(library.path) / CACHE_DIR / f"fp32-{encoder.fingerprint[:16]}.npz"


def _text_hash(text: str) -> bytes:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest()[:12]


def _load(path: Path) -> dict[tuple[int, bytes], np.ndarray]:
    try:
        with np.load(path) as z:
            return {(int(i), bytes(h)): v for i, h, v in zip(z["ids"], z["hashes"], z["vectors"])}
    except (OSError, ValueError, KeyError) as e:
        if path.exists():
            log.info("bench FP32 cache %s not read: %s", path, e)
        return {}


def _save(path: Path, ids: list[int], hashes: list[bytes], vectors: np.ndarray) -> str | None:
    """Write the cache atomically; the reason when it cannot be written."""
    from hefsearch.base.atomic_write import write_bytes_atomic

    buf = io.BytesIO()
    np.savez(buf, ids=np.asarray(ids, np.int64), hashes=np.array(hashes, dtype="S12"), vectors=vectors)
    try:
        path.parent.mkdir(exist_ok=True)
        write_bytes_atomic(path, buf.getvalue())
    except OSError as e:
        return e.strerror or str(e)
    return None


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    return f"{s // 60}:{s % 60:02d}"


def fp32_vectors_for_bench(library, encoder, chunk_ids: Sequence[int],
                           say: Callable[[str], None]) -> tuple[np.ndarray, int, str | None]:
    """FP32 vectors of ``chunk_ids`` (in order) from the cache, the rest encoded now with
    progress. Returns (vectors, how many were encoded, why they were not kept or None)."""
    ids = [int(i) for i in chunk_ids]
    records = {r.id: r for r in library.chunks(ids)}
    texts = [records[i].text if i in records else "" for i in ids]
    sections = stored_sections(library, ids)  # a passage's vector is made with its section's
    hashes = [_text_hash(t if s is None else f"{t}\0{s}") for t, s in zip(texts, sections)]
    path = cache_path(library, encoder)
    cached = _load(path)
    out = np.empty((len(ids), encoder.dim), np.float32)
    todo = []
    for row, key in enumerate(zip(ids, hashes)):
        vec = cached.get(key)
        if vec is None or vec.shape != (encoder.dim,):
            todo.append(row)
        else:
            out[row] = vec
    kept = None
    if todo:
        say(f"library: no FP32 space, so {len(todo)} of {len(ids)} chunks are encoded on the CPU in FP32 "
            f"for the ground truth ({len(ids) - len(todo)} from an earlier run's cache); kept in "
            f"{path.parent.name}/ for the next run. 'hefsearch index --also-fp32' stores them in the library.")
        t0 = time.perf_counter()
        for start in range(0, len(todo), BATCH):
            rows = todo[start:start + BATCH]
            out[rows] = passage_vectors(encoder, [texts[r] for r in rows], [sections[r] for r in rows])
            done = start + len(rows)
            rate = done / max(time.perf_counter() - t0, 1e-6)
            if done < len(todo):
                say(f"library: FP32 {done}/{len(todo)} chunks, {rate:.1f} chunks/s, about "
                    f"{_clock((len(todo) - done) / rate)} left")
        if not getattr(library, "read_only", False):
            kept = _save(path, ids, hashes, out)
        else:
            kept = library.read_only_reason
    return out, len(todo), kept

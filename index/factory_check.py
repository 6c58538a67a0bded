"""Whether a FAISS ``index_factory`` string can serve a vector space, decided in a child process.

Some strings FAISS accepts build an index that later takes the whole process down: ``HNSW0``
aborts on its first ``add`` (``Faiss assertion 'i < end' failed``), ``HNSW1``,
``IVF16_HNSW1,Flat`` and ``RQ1x0`` segfault, ``PQ16x0`` and ``OPQ16_0,PQ16`` divide by zero
(SIGFPE), ``NSG0`` never returns. Others raise on add, search or save (``IDMap,Flat`` and
``IDMap2,HNSW32`` inside hefsearch's own id map: "add does not make sense with IndexIDMap";
``IVF0,Flat``; ``PQ16x1``), or run and find nothing (``SQ0``, ``PCA0,Flat``: every query gets
the same answer). :func:`check_factory` therefore runs, in a child process (``python -m
hefsearch.index.factory_check FACTORY DIM``), the steps a space takes, on random unit
vectors: build (:func:`~hefsearch.index.spaces.make_index`), train with as many vectors as
FAISS asks for, add with ids, search, remove, save and load, search again; most stored
vectors must find themselves among their 10 nearest. A crash, a hang
(:data:`PROBE_TIMEOUT_S`) or an exception becomes a refusal with FAISS's own words; the
caller survives.

``hefsearch settings index_factory`` refuses such a string before storing it; an index run
that meets one already stored (written by an older hefsearch, or straight into the database)
checks it the same way, warns and keeps the size rules (:meth:`Space._buildable_factory`).
An IVF of more than :data:`PROBE_KMEANS_LISTS` lists gets random coarse centroids in the
probe instead of k-means (a minute of k-means on a Pi proves nothing more); its fine codes are
still trained. Results are cached per process: one child per factory and dimension, about a
second each.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["FactoryCheck", "check_factory", "PROBE_TIMEOUT_S"]

#: how long the child may take (some factories make FAISS loop forever)
PROBE_TIMEOUT_S = 60.0
#: vectors the child stores and searches
PROBE_VECTORS = 256
PROBE_QUERIES = 32
#: IVF lists above which the child seeds the coarse quantizer instead of running k-means
PROBE_KMEANS_LISTS = 1024
#: lists beyond any library this tool serves (a 10M-chunk space uses 4096); the probe would
#: need gigabytes for the centroids alone
MAX_LISTS = 1 << 18
#: most training vectors a factory may need (FAISS says how many when it has too few)
MAX_TRAINING = 1 << 20
_TOO_FEW = re.compile(r"should be at least as large as number of clusters \((\d+)\)")
_ASSERTION = re.compile(r"(Faiss assertion '.*?' failed)")


@dataclass(frozen=True)
class FactoryCheck:
    """The verdict on one factory string for one dimension."""

    factory: str
    dim: int
    ok: bool
    reason: str = ""
    #: vectors FAISS needs to train the index (0: it needs no training)
    train_min: int = 0

    @property
    def needs_training(self) -> bool:
        return self.train_min > 0


_CACHE: dict[tuple[str, int], FactoryCheck] = {}


def check_factory(factory: str, dim: int) -> FactoryCheck:
    """Run ``factory`` for vectors of ``dim`` in a child process (module docstring); cached."""
    key = (factory, int(dim))
    if key not in _CACHE:
        _CACHE[key] = _run_child(factory, int(dim))
    return _CACHE[key]


def _run_child(factory: str, dim: int) -> FactoryCheck:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "hefsearch.index.factory_check", factory, str(dim)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env=env,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return FactoryCheck(factory, dim, False, f"FAISS did not finish building, filling and searching an "
                                                 f"index of {PROBE_VECTORS} vectors within {PROBE_TIMEOUT_S:.0f} s "
                                                 "(it loops forever on some factories, such as NSG0).")
    except OSError as e:
        return FactoryCheck(factory, dim, False, f"the check could not run ({e}).")
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode == 0 and lines:
        answer = json.loads(lines[-1])
        return FactoryCheck(factory, dim, answer["ok"], answer.get("reason", ""), answer.get("train_min", 0))
    return FactoryCheck(factory, dim, False, _crash_reason(done.returncode, done.stderr))


def _crash_reason(returncode: int, stderr: str) -> str:
    """FAISS's words for a child that died: its assertion, else the signal that killed it."""
    m = _ASSERTION.search(stderr)
    if m:
        return f"{m.group(1)} and FAISS aborted the process."
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        what = {"SIGSEGV": "a segmentation fault", "SIGFPE": "a division by zero (SIGFPE)",
                "SIGBUS": "a bus error", "SIGABRT": "an abort"}.get(name, name)
        return f"FAISS crashed with {what} while building, filling or searching the index."
    tail = [line.strip() for line in stderr.splitlines() if line.strip()]
    return tail[-1] if tail else f"the check exited with code {returncode}."


# -- the child ---------------------------------------------------------------------------------
def probe(factory: str, dim: int) -> dict:
    """What the child prints: {"ok", "reason", "train_min"}. FAISS errors are caught here;
    aborts and segfaults end the child, and the parent names them."""
    import numpy as np

    from .errors import SpaceError
    from .faiss_index import faiss_reason, ivf_of, load_faiss, make_index

    faiss = load_faiss()
    rng = np.random.default_rng(0)

    def unit(n: int) -> np.ndarray:
        x = rng.standard_normal((n, dim)).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    try:
        index = make_index(factory, dim)
    except SpaceError as e:
        return {"ok": False, "reason": e.reason}
    ivf = ivf_of(index)
    if ivf is not None and ivf.nlist > MAX_LISTS:
        return {"ok": False, "reason": f"{ivf.nlist:,} IVF lists are more than any library needs (at most "
                                       f"{MAX_LISTS:,}; a space of 10 million chunks uses 4096)."}
    train_min = 0
    try:
        if not index.is_trained:
            train_min = max(1000, ivf.nlist if ivf is not None else 0)
            if ivf is not None and ivf.nlist > PROBE_KMEANS_LISTS:
                ivf.quantizer.add(unit(ivf.nlist))  # IndexIVF.train then skips k-means
            train_min = _train(index, unit, 1000 if ivf is not None and ivf.nlist > PROBE_KMEANS_LISTS
                               else train_min, train_min)
        x, ids = unit(PROBE_VECTORS), np.arange(1, PROBE_VECTORS + 1, dtype=np.int64) * 7  # sparse, like chunk ids
        index.add_with_ids(x, ids)
        share = _self_found(index, x, ids)
        try:
            index.remove_ids(ids[:4])  # a changed file's chunks; HNSW cannot (the library keeps tombstones)
        except RuntimeError:
            pass
        index = faiss.deserialize_index(faiss.serialize_index(index))  # saved and opened again
        index.search(x[:PROBE_QUERIES], 10)
    except (RuntimeError, ValueError, TypeError, MemoryError) as e:
        return {"ok": False, "reason": faiss_reason(e), "train_min": train_min}
    if share < 0.5:
        return {"ok": False, "train_min": train_min,
                "reason": f"it finds a stored vector among its own 10 nearest for only {share:.0%} of them "
                          f"(random unit vectors of dimension {dim}): searches would return the wrong documents."}
    return {"ok": True, "train_min": train_min}


def _train(index, unit, n: int, train_min: int) -> int:
    """Train with ``n`` vectors, or as many as FAISS asks for; the number it needed."""
    for _ in range(3):
        try:
            index.train(unit(n))
            return max(train_min, n)
        except RuntimeError as e:
            m = _TOO_FEW.search(str(e))
            if not m or int(m.group(1)) <= n:
                raise
            n = int(m.group(1))
            if n > MAX_TRAINING:
                raise RuntimeError(f"it needs {n:,} vectors to train, more than {MAX_TRAINING:,}.") from None
    raise RuntimeError(f"FAISS kept asking for more training vectors (last: {n:,}).")


def _self_found(index, x, ids) -> float:
    _, found = index.search(x[:PROBE_QUERIES], 10)
    return float(sum(int(ids[i]) in found[i] for i in range(len(found))) / len(found))


if __name__ == "__main__":
    print(json.dumps(probe(sys.argv[1], int(sys.argv[2]))), flush=True)

"""The FAISS index of a space: which index a size gets, building, tuning, searching, compression.

In ``spaces/<name>/``:

- ``index.faiss``: ids are chunk ids. By size: flat inner product below
  :data:`DEFAULT_SQ8_THRESHOLD`, 8-bit scalar codes re-scored exactly from the raw vectors up to
  ``hnsw_threshold``, HNSW (efSearch tuned to recall@10 >= :data:`HNSW_TARGET_RECALL`) above it,
  ``IVF<lists>,SQ4`` (:func:`compressed_factory`) above ``compress_threshold``; or a factory
  string from the library settings. A cache: always rebuilt from the raw vectors, no re-encoding.
- ``index.json``: what the index is and measured (type, bytes, training vectors, recall@10
  against exact search, HNSW ``ef_search``); ``status`` reads it without loading FAISS.

Compressed spaces: trained on the space's own vectors, retrained after :data:`RETRAIN_GROWTH`
times growth; ``nprobe`` tuned at build (:func:`tune_nprobe`) to about the smallest value
reaching :data:`TARGET_RECALL` on :data:`RECALL_QUERIES` stored vectors, each without its own
document's chunks; every search re-scores the top :data:`RESCORE_CANDIDATES` from the raw
vectors (float32, memory-mapped); a scan over :data:`PARALLEL_SCAN_CODES` codes uses every core.
An IVF index keeps its own ids: never wrapped in ``IndexIDMap2``. Why SQ4, and the figures:
docs/decisions.md, docs/scaling.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

import numpy as np

from .errors import SpaceError
from .factory_check import check_factory

INDEX_FILE = "index.faiss"
INDEX_META_FILE = "index.json"
#: chunk count from which a space switches from exact flat search to HNSW (library setting
#: ``hnsw_threshold`` overrides; ``index_factory`` forces a factory string)
DEFAULT_HNSW_THRESHOLD = 200_000
DEFAULT_HNSW_FACTORY = "HNSW32"
#: chunk count from which a space below ``hnsw_threshold`` scans 8-bit scalar codes instead of
#: float32 (a quarter of the memory traffic), re-scoring the best candidates exactly from the raw
#: vectors. Measured (bench/index_choice.py, dim 384, 1 thread, candidates for top 50, load ~2-3):
#: at 10k flat and SQ8 both take 0.25-0.33 ms; at 25k 1.6 vs 0.8 ms, at 100k 7.0 vs 2.2-3.2 ms,
#: recall@10 1.000 against exact on both random and document-like vectors
DEFAULT_SQ8_THRESHOLD = 20_000
SQ8_FACTORY = "SQ8"
#: candidates an SQ8 index returns per query at least (twice the asked k if more), re-scored
#: exactly from the raw vectors: 64 kept recall@10 at 1.000 in the measurement above
SQ8_RESCORE_CANDIDATES = 64
#: recall@10 an HNSW index's efSearch is tuned to at build (doubling from HNSW_EF_START up to
#: HNSW_EF_MAX; stored vectors as queries, their own document left out)
HNSW_TARGET_RECALL = 0.99
HNSW_EF_START = 64
HNSW_EF_MAX = 1024
#: filtered searches over at most this many candidate chunks are answered exactly
EXACT_FILTER_LIMIT = 50_000
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
#: factories hefsearch itself picks (size rules); any other string is the user's and goes
#: through the child-process check before it is built (:mod:`~hefsearch.index.factory_check`)
OWN_FACTORIES = frozenset({"Flat", "FlatIP", "", SQ8_FACTORY, DEFAULT_HNSW_FACTORY, COMPRESSED_FACTORY})
#: largest hnsw_threshold / compress_threshold a library accepts (more chunks than any holds)
MAX_THRESHOLD = 10**12


_FAISS = None


def load_faiss():
    """FAISS, imported on first use (``hefsearch --help`` stays fast).

    Searches run one query at a time, where OpenMP's thread start-up and barriers cost more
    than the scan itself (18 ms instead of 0.1 ms for a small index on 2 cores), so FAISS runs
    single-threaded except while building an index (:func:`using_all_threads`).
    """
    global _FAISS
    if _FAISS is None:
        import faiss

        faiss.omp_set_num_threads(1)
        _FAISS = faiss
    return _FAISS


class using_all_threads:
    """Let FAISS use every core for a bulk build or a big scan, then go back to one thread."""

    def __enter__(self):
        load_faiss().omp_set_num_threads(os.cpu_count() or 1)

    def __exit__(self, *exc):
        load_faiss().omp_set_num_threads(1)


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
    faiss = load_faiss()
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
    faiss = load_faiss()
    return faiss.downcast_index(index.index) if hasattr(index, "id_map") else faiss.downcast_index(index)


def ivf_of(index):
    """The IVF part of an index, or None."""
    return load_faiss().try_extract_index_ivf(index) if index is not None else None


def index_ids(index) -> np.ndarray:
    faiss = load_faiss()
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
    faiss = load_faiss()
    inner = inner_index(index)
    if isinstance(inner, faiss.IndexFlat):
        return "Flat"
    if isinstance(inner, faiss.IndexScalarQuantizer):
        return f"SQ{inner.sq.code_size * 8 // max(inner.d, 1)}"
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


def ann_search(index, raw, q: np.ndarray, k: int, sel=None, *,
               ef_search: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The index's top-k (``sel``: an id selector). A compressed (IVF) index returns
    :data:`RESCORE_CANDIDATES` candidates, an SQ8 one :data:`SQ8_RESCORE_CANDIDATES` (or 2k),
    re-scored exactly from the raw vectors. ``ef_search``: an HNSW index's tuned efSearch."""
    faiss = load_faiss()
    inner = inner_index(index)
    ivf = ivf_of(index)
    codes = isinstance(inner, faiss.IndexScalarQuantizer)
    fetch = (min(max(k, RESCORE_CANDIDATES), index.ntotal) if ivf is not None else
             min(max(2 * k, SQ8_RESCORE_CANDIDATES), index.ntotal) if codes else k)
    if hasattr(inner, "hnsw"):
        ef = max(ef_search or HNSW_EF_START, 2 * k)
        if sel is None:
            inner.hnsw.efSearch, params = ef, None
        else:  # filtered: a wider search, for this call only
            params = faiss.SearchParametersHNSW(sel=sel, efSearch=max(256, 4 * k, ef))
    elif ivf is not None:
        params = faiss.SearchParametersIVF(sel=sel, nprobe=ivf.nprobe) if sel is not None else None
    else:
        params = faiss.SearchParameters(sel=sel) if sel is not None else None
    big = ivf is not None and ivf.ntotal * ivf.nprobe >= PARALLEL_SCAN_CODES * max(ivf.nlist, 1)
    if big:  # one query's lists are split over every core (parallel_mode 1), a batch by query (0)
        ivf.parallel_mode = 1 if len(q) < max(2, os.cpu_count() or 1) else 0
    with using_all_threads() if big else contextlib.nullcontext():
        d, i = index.search(q, fetch, params=params)
    return (d, i) if ivf is None and not codes else rescore(raw, q, i, k)


def tune_ef_search(hnsw, recall) -> tuple[int, float]:
    """The smallest efSearch of a doubling from :data:`HNSW_EF_START` whose ``recall(ef)``
    reaches :data:`HNSW_TARGET_RECALL` (else :data:`HNSW_EF_MAX`), and that recall."""
    r = 0.0
    for ef in doubling_steps(HNSW_EF_START, HNSW_EF_MAX):
        r = recall(ef)
        if r >= HNSW_TARGET_RECALL:
            return ef, r
    return HNSW_EF_MAX, r


def rescore(raw, q: np.ndarray, found: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact inner products of the candidates from the (memory-mapped) raw vectors."""
    scores = np.full((len(q), k), -np.inf, np.float32)
    ids = np.full((len(q), k), -1, np.int64)
    for r in range(len(q)):
        cand = found[r][found[r] >= 0]
        cand = cand[raw.has(cand)] if len(cand) else cand
        if not len(cand):
            continue
        sims = raw.get(cand) @ q[r]
        top = np.argsort(-sims, kind="stable")[:k]
        scores[r, : len(top)], ids[r, : len(top)] = sims[top], cand[top]
    return scores, ids


def exact_scores(q, vecs, cand, k, scores, ids):
    """Exact top-k of ``q`` over the vectors ``vecs`` of ids ``cand``, into ``scores``/``ids``."""
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


def vectors_to_train(factory: str, dim: int) -> int:
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


def outside_own_document(row: np.ndarray, own: int, k: int) -> set[int]:
    """The first ``k`` ids of ``row`` outside the query's own document (module doc)."""
    return set([int(i) for i in row.tolist() if i >= 0 and abs(i - own) > RECALL_LEAVE_OUT][:k])


def tune_nprobe(ivf, recall) -> float:
    """Set ``ivf.nprobe`` to about the smallest value whose ``recall()`` reaches
    :data:`TARGET_RECALL` (or to nlist); returns that recall. Doubles from nlist/256 first, then
    bisects the last doubling to within 1/8: at 10M vectors the step from 256 to 512 lists alone
    is 30 ms per query."""
    lo, r = None, 0.0
    for nprobe in doubling_steps(max(8, ivf.nlist // 256), ivf.nlist):
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


def doubling_steps(start: int, stop: int) -> list[int]:
    out = [min(start, stop)]
    while out[-1] < stop:
        out.append(min(out[-1] * 2, stop))
    return out

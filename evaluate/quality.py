"""``hefsearch bench quality``: what does the 8-bit encoder cost against FP32, and what wins it back?

Two measurements, basis-invariant metrics first (a HEF's output may live in another basis):

1. **Parallel set** (bundled, :mod:`hefsearch.evaluate.parallel`): every space's encoder embeds
   168 sentence pairs in 11 languages. Per space: top-1 translation retrieval (within each
   language pair, both directions), the same on the near-duplicate rows only (one number,
   negation or entity differs), the retrieval margin, the correlation of its similarity matrix
   with FP32's, the paired cosine to FP32 (only meaningful in the same basis), the mean
   pairwise cosine (collapse detector) and milliseconds per text.
2. **Your library** (optional): queries from a file, or pseudo-queries cut from random chunks.
   FP32 over the same chunks is the ground truth (its top-1 is "the" answer): per space
   recall@1/5/10 and MRR, the recall of FP32's top-1 within the space's top-N (the ceiling of
   re-ranking at depth N), the same metrics after FP32 re-ranking of the top-N, overlap@10 with
   FP32's top 10, the mean document-document cosine, and ms per query. Searches are exact
   (numpy over the stored vectors), so an approximate index cannot blur the comparison.

The build configuration (bits per site group, mask handling, sequence length, calibration) is
reported beside the numbers of each space.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from hefsearch.base.errors import HefsearchError

from hefsearch.embed import metrics as M
from hefsearch.embed import space_names
from hefsearch.embed.reference import REFERENCE_BACKEND
from .parallel import ParallelPair, by_language_pair, languages, load_parallel, near_duplicate_rows
from .query_sets import QuerySet, expected_chunks, pseudo_queries

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library

log = logging.getLogger("hefsearch.evaluate")

FP32 = space_names.FP32_SPACE
RECALL_KS = (1, 5, 10)
#: candidate chunks the by-file metrics group, as a search with k=10 does (5 per hit)
GROUP_DEPTH = 50
PLOT_KS = (1, 2, 3, 5, 10, 20, 30, 50)
DEFAULT_QUERIES = 200
DOC_COSINE_ROWS = 4000


class QualityError(HefsearchError):
    title = "quality benchmark error"


# -- which spaces ------------------------------------------------------------------------------
@dataclass
class SpaceSpec:
    """A vector space to measure: where its encoder comes from, whether a library holds it."""

    name: str
    backend: str
    backend_opts: dict = field(default_factory=dict)
    in_library: bool = False


def bundle_spaces(bundle) -> list[SpaceSpec]:
    """Spaces a bundle can produce here without a library: FP32, every NPU simulation, a HEF,
    the int8 CPU encoder."""
    out = [SpaceSpec(FP32, REFERENCE_BACKEND)]
    for e in bundle.encoder_entries(space_names.NPU_SIM):
        name = e.extra.get("name", e.file)
        out.append(SpaceSpec(space_names.space_name(space_names.NPU_SIM, name), "npu-sim", {"profile": name}))
    if bundle.encoder_entries(space_names.HEF):
        out.append(SpaceSpec(space_names.HEF, "hailo"))
    if bundle.encoder_entries(space_names.CPU_INT8):
        out.append(SpaceSpec(space_names.CPU_INT8, "cpu-int8"))
    return out


def choose_spaces(bundle, library: "Library | None", wanted: Sequence[str] | None) -> list[SpaceSpec]:
    """The library's spaces (or the bundle's), restricted to ``wanted``; FP32 always first."""
    known: dict[str, SpaceSpec] = {s.name: s for s in bundle_spaces(bundle)}
    if library is not None:
        for info in library.spaces():
            known[info.name] = SpaceSpec(info.name, info.backend, dict(info.backend_opts or {}), True)
    if wanted:
        missing = [w for w in wanted if w not in known]
        if missing:
            raise QualityError(
                f"Unknown space(s) {', '.join(missing)}.",
                f"Known here: {', '.join(known)}. An NPU simulation needs 'hefsearch compile sim' first.")
        names = list(dict.fromkeys([FP32, *wanted]))
    else:
        names = list(known)
        if library is not None:  # the library's spaces, plus simulations it does not hold
            names = list(dict.fromkeys([FP32, *names]))
    names.sort(key=lambda n: n != FP32)
    return [known[n] for n in names]


def build_config(encoder: "Encoder") -> dict:
    """The build configuration of an encoder, for the report (bits, mask, seq, calibration)."""
    be = encoder.backend
    cfg: dict = {"backend": be.name, "label": encoder.label, "space_kind": encoder.space_kind,
                 "seq_len": encoder.max_tokens, "dim": encoder.dim, "model": encoder.bundle.model_id}
    try:
        d = be.describe()
        if isinstance(d, dict):
            cfg.update({k: v for k, v in d.items() if k not in cfg or k == "label"})
    except Exception:  # pragma: no cover - a report must not fail on a description
        pass
    entry = be.entry
    if entry is not None and be.space_kind != space_names.NPU_SIM:  # a simulation's describe() says it all
        extra = entry.extra or {}
        for k in ("precision", "calibration", "dfc_version", "hw_arch"):
            if k in extra and k not in cfg:
                cfg[k] = extra[k]
    prec = cfg.get("precision")
    if isinstance(prec, dict):
        cfg["sixteen_bit"] = list(prec.get("sixteen_bit", []))
        cfg["bits"] = prec.get("bits")
    if be.space_kind == space_names.FP32:
        cfg["precision"] = "fp32"
    return cfg


def config_line(cfg: dict) -> str:
    """One line: 'a8 · 16-bit: none · mask inside softmax · seq 256 · calib 36 texts'."""
    if cfg.get("precision") == "fp32":
        return f"FP32 · seq {cfg.get('seq_len')}"
    parts = []
    if cfg.get("space_kind") == space_names.CPU_INT8:
        parts.append("int8 weights, dynamic uint8 activations")
    prec = cfg.get("precision")
    if isinstance(prec, dict):
        parts.append(str(prec.get("name", "?")))
        parts.append("16-bit: " + (", ".join(cfg.get("sixteen_bit") or []) or "none"))
    mask = cfg.get("mask") or (prec.get("mask") if isinstance(prec, dict) else None)
    if isinstance(mask, dict):
        parts.append("mask inside softmax" if mask.get("mode") == "softmax" else f"mask additive {mask.get('value'):g}")
    elif isinstance(mask, str):
        parts.append("mask inside softmax" if mask == "softmax" else f"mask {mask}")
    parts.append(f"seq {cfg.get('seq_len')}")
    cal = cfg.get("calibration")
    if isinstance(cal, dict):
        n = cal.get("texts") or cal.get("rows")
        if n:
            parts.append(f"calib {n} texts")
    return " · ".join(parts)


# -- results -----------------------------------------------------------------------------------
@dataclass
class ParallelResult:
    top1: float
    top1_near_duplicates: float
    margin: float
    similarity_pearson: float | None
    similarity_spearman: float | None
    cosine_to_fp32: float | None
    mean_pairwise_cosine: float
    ms_per_text: float
    top1_by_pair: dict[str, float]


@dataclass
class LibraryResult:
    queries: int
    chunks: int
    recall: dict[str, float]  # "1", "5", "10" -> recall of FP32's top-1
    mrr: float
    recall_at_depth: float | None  # FP32 top-1 within the top-N (re-rank ceiling)
    overlap_at_10: float
    #: labelled relevance: pseudo-queries -> the chunk they were cut from; a queries file with
    #: an "expected" column -> any chunk of that document
    source_found: dict[str, float] | None
    reranked: dict | None  # {"depth", "recall", "mrr", "source_found"}
    doc_cosine: float
    ms_per_query: float
    curve: dict[str, float]  # recall@k for the plot
    curve_reranked: dict[str, float] | None = None
    #: hubs (:func:`hubness`): {"top1_share": the share of top-1 places that the 3 documents
    #: taking most of them hold among queries answered wrongly, "k10_skew": skewness of how often
    #: each chunk is among the 10 nearest chunks of the others}
    hubness: dict | None = None
    #: labelled queries, judged by file: {"chunks": {k: found@k}, "per_file": {k: ...}}: the
    #: file of the source (or the expected file) among the files of the top k chunks as ranked,
    #: and among the top k hits of the default one-hit-per-file results (copies folded)
    file_found: dict | None = None
    #: the space whose ranking is the ground truth: cpu-fp32, or for a language-neutral space
    #: cpu-fp32-neutral when the library has it (the neutral spaces side by side)
    reference: str = FP32


@dataclass
class SpaceResult:
    name: str
    label: str
    config: dict
    parallel: ParallelResult | None = None
    library: LibraryResult | None = None
    error: str | None = None


@dataclass
class QualityReport:
    bundle: dict
    parallel: dict
    library: dict | None
    spaces: list[SpaceResult]
    notices: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def space(self, name: str) -> SpaceResult:
        return next(s for s in self.spaces if s.name == name)


# -- the parallel set ----------------------------------------------------------------------------
def _encode_timed(enc: "Encoder", texts: list[str], passages: bool = False) -> tuple[np.ndarray, float]:
    t = time.perf_counter()
    v = enc.encode_passages(texts) if passages else enc.encode_queries(texts)
    return v, (time.perf_counter() - t) * 1000.0 / max(1, len(texts))


def parallel_vectors(enc: "Encoder", pairs: list[ParallelPair]) -> tuple[np.ndarray, np.ndarray, float]:
    """Both sides embedded as queries (a symmetric task; e5 models want "query: " on both)."""
    v, ms = _encode_timed(enc, [p.text_a for p in pairs] + [p.text_b for p in pairs])
    return v[: len(pairs)], v[len(pairs):], ms


def evaluate_parallel(a: np.ndarray, b: np.ndarray, pairs: list[ParallelPair], ms: float,
                      ref: tuple[np.ndarray, np.ndarray] | None) -> ParallelResult:
    groups = by_language_pair(pairs)
    hard = set(near_duplicate_rows(pairs))
    by_pair: dict[str, float] = {}
    hits_hard: list[float] = []
    margins: list[float] = []
    for lp, rows in groups.items():
        sa, sb = a[rows], b[rows]
        s = M.cosine_matrix(sa, sb)
        idx = np.arange(len(rows))
        ok = ((np.argmax(s, axis=1) == idx).astype(float) + (np.argmax(s, axis=0) == idx).astype(float)) / 2
        by_pair[lp] = float(ok.mean())
        hits_hard += [float(ok[j]) for j, r in enumerate(rows) if r in hard]
        margins.append(M.retrieval_margin(sa, sb))
    allv = np.vstack([a, b])
    out = ParallelResult(
        top1=float(np.mean(list(by_pair.values()))),
        top1_near_duplicates=float(np.mean(hits_hard)) if hits_hard else float("nan"),
        margin=float(np.mean(margins)),
        similarity_pearson=None, similarity_spearman=None, cosine_to_fp32=None,
        mean_pairwise_cosine=M.mean_pairwise_cosine(allv),
        ms_per_text=ms, top1_by_pair=by_pair,
    )
    if ref is not None:
        refv = np.vstack(ref)
        out.similarity_pearson = M.similarity_correlation(refv, allv, "pearson")
        out.similarity_spearman = M.similarity_correlation(refv, allv, "spearman")
        if refv.shape[1] == allv.shape[1]:
            out.cosine_to_fp32 = float(M.paired_cosine(refv, allv).mean())
    return out


# -- the library ---------------------------------------------------------------------------------
def _ranking(scores: np.ndarray, ids: np.ndarray, k: int) -> list[list[int]]:
    top = M.topk_ids(scores, min(k, scores.shape[1]))
    return [ids[row].tolist() for row in top]


def _curve(truth, got, ks) -> dict[str, float]:
    return {str(k): M.recall_at_k(truth, got, k) for k in ks}


def hubness(doc_space: np.ndarray, got: list[list[int]], sources, records: dict | None) -> dict:
    """How much a few documents are near everything in a space: of every query's top hit (by
    document when ``records`` are given, else by chunk), the share held by the 3 that take most
    of them among the queries whose right answer (``sources``; without them, every query) is
    elsewhere; and the skewness of the chunks' 10-occurrence (no queries needed)."""
    def key(c):
        rec = (records or {}).get(int(c))
        return ("doc", rec.doc_id) if rec is not None else ("chunk", int(c))

    top1 = [key(g[0]) if g else None for g in got]
    relevant = None
    if sources is not None:
        relevant = [{key(c) for c in (s if isinstance(s, (set, list, tuple)) else [s])} for s in sources]
    return {"top1_share": M.hub_share(top1, relevant), "k10_skew": M.k_occurrence_skewness(doc_space)}


def file_found(sources, got: list[list[int]], records: dict) -> dict:
    """Labelled queries judged by file: found@k of the source's file among the files of the top
    k chunks (the ranking as it is) and among the top k one-hit-per-file results (the search
    default, :func:`hefsearch.search.grouping.group`). A file folded under a copy of it counts
    as not found (strict)."""
    from hefsearch.search.grouping import group

    def doc(c):
        rec = records.get(int(c))
        return None if rec is None else rec.doc_id

    truth = [{doc(c) for c in (s if isinstance(s, (set, list, tuple)) else [s])} - {None} for s in sources]
    deep = max(RECALL_KS)
    as_ranked = [[doc(c) for c in g] for g in got]
    per_file = [[grp.doc_id for grp in group(g, records, deep)] for g in got]
    return {name: {str(k): M.hit_at_k(truth, [r[:k] if name == "per_file" else list(dict.fromkeys(r[:k]))
                                             for r in rows], k) for k in RECALL_KS}
            for name, rows in (("chunks", as_ranked), ("per_file", per_file))}


@dataclass
class QueryDocs:
    """One space's vectors of the benchmark's queries, and of its chunks (rows in ``ids`` order)."""

    queries: np.ndarray
    docs: np.ndarray


def evaluate_library_space(space: QueryDocs, reference: QueryDocs, ids: np.ndarray, *, sources: list | None,
                           depth: int, ms_per_query: float, records: dict | None = None) -> LibraryResult:
    """All library metrics of one space against the reference (FP32) on the same chunks (exact
    search), re-ranked at ``depth`` (0: not); ``records`` (chunk id -> record) adds the by-file
    metrics of labelled queries."""
    q_space, doc_space, q_fp32, doc_fp32 = space.queries, space.docs, reference.queries, reference.docs
    deep = max(10, depth, max(PLOT_KS))
    fp_rank = _ranking(q_fp32 @ doc_fp32.T, ids, 10)
    truth = [r[0] for r in fp_rank]
    got = _ranking(q_space @ doc_space.T, ids, deep)
    res = LibraryResult(
        queries=len(q_space), chunks=len(ids),
        recall={str(k): M.recall_at_k(truth, got, k) for k in RECALL_KS},
        mrr=M.mrr(truth, got),
        recall_at_depth=M.recall_at_k(truth, got, depth) if depth else None,
        overlap_at_10=float(np.mean([M.overlap_at_k(f, g, 10) for f, g in zip(fp_rank, got)])),
        source_found={str(k): M.hit_at_k(sources, got, k) for k in RECALL_KS} if sources else None,
        reranked=None,
        doc_cosine=M.mean_pairwise_cosine(doc_space, max_rows=DOC_COSINE_ROWS),
        ms_per_query=ms_per_query,
        curve=_curve(truth, got, PLOT_KS),
    )
    if sources and records is not None:
        res.file_found = file_found(sources, got, records)
    res.hubness = hubness(doc_space, got, sources, records)
    if depth:
        pos = {int(c): j for j, c in enumerate(ids.tolist())}
        rer = []
        for qi, cand in enumerate(got):
            head = cand[:depth]
            s = doc_fp32[[pos[c] for c in head]] @ q_fp32[qi]
            rer.append([head[j] for j in np.argsort(-s, kind="stable")] + cand[depth:])
        res.reranked = {
            "depth": depth,
            "recall": {str(k): M.recall_at_k(truth, rer, k) for k in RECALL_KS},
            "mrr": M.mrr(truth, rer),
            "source_found": {str(k): M.hit_at_k(sources, rer, k) for k in RECALL_KS} if sources else None,
        }
        res.curve_reranked = _curve(truth, rer, PLOT_KS)
    return res


# -- the whole run ---------------------------------------------------------------------------------
@dataclass
class QualityOptions:
    """What ``bench quality`` measures: ``spaces`` (None: every one; FP32 always), the parallel
    set or not, and on a library: its ``queries`` (None: ``n_queries`` pseudo-queries cut from
    random chunks, drawn with ``seed``) and the FP32 re-ranking depth (0: none)."""

    spaces: Sequence[str] | None = None
    queries: "QuerySet | Sequence[str] | None" = None
    n_queries: int = DEFAULT_QUERIES
    rerank: int = 30
    parallel: bool = True
    seed: int = 0


def run_quality(bundle: str | Path | None = None, library: "Library | None" = None,
                options: QualityOptions = QualityOptions(), *, encoders: dict[str, "Encoder"] | None = None,
                progress: Callable[[str], None] | None = None) -> QualityReport:
    """Measure every chosen space on the parallel set and (with ``library``) on its chunks.

    ``encoders`` may inject encoders by space name (tests, the TUI); the others are opened from
    the bundle (default: the one the library records) with each space's backend options.
    """
    from hefsearch.embed.bundle import Bundle
    from hefsearch.embed.encoder import Encoder

    say = progress or (lambda m: None)
    if bundle is None and library is not None:
        bundle = library.settings().get("bundle")
    if bundle is None:
        raise QualityError("No model bundle given.", "Pass --bundle BUNDLE, or --library of an indexed library.")
    b = bundle if isinstance(bundle, Bundle) else Bundle.open(bundle)
    specs = choose_spaces(b, library, options.spaces)
    notices: list[str] = []
    opened: dict[str, Encoder] = dict(encoders or {})
    own: list[Encoder] = []
    results: list[SpaceResult] = []

    def encoder(spec: SpaceSpec) -> Encoder:
        if spec.name not in opened:
            enc = Encoder.open(b, backend=spec.backend, bulk=True, **spec.backend_opts)
            opened[spec.name] = enc
            own.append(enc)
        return opened[spec.name]

    try:
        for spec in specs:
            try:
                enc = encoder(spec)
                results.append(SpaceResult(spec.name, enc.label, build_config(enc)))
            except HefsearchError as e:
                if spec.name == FP32:
                    raise
                notices.append(f"{spec.name}: skipped ({e.message})")
                results.append(SpaceResult(spec.name, spec.backend, {}, error=e.message))
        live = [r for r in results if r.error is None]

        pairs = load_parallel()
        par_info = {"pairs": len(pairs), "languages": languages(pairs),
                    "language_pairs": list(by_language_pair(pairs)), "near_duplicate_rows": len(near_duplicate_rows(pairs))}
        if options.parallel:
            ref = None
            for r in live:
                say(f"parallel set: {r.label}")
                a, bb, ms = parallel_vectors(opened[r.name], pairs)
                if r.name == FP32:
                    ref = (a, bb)
                r.parallel = evaluate_parallel(a, bb, pairs, ms, None if r.name == FP32 else ref)

        lib_info = None
        if library is not None:
            lib_info, lib_notices = _run_library(library, specs, live, opened, options, say)
            notices += lib_notices
    finally:
        for enc in own:
            enc.close()
    return QualityReport(
        bundle={"path": str(b.path), "model": b.model_id, "seq_len": b.seq_len, "hidden": b.hidden},
        parallel=par_info, library=lib_info, spaces=results, notices=notices,
    )


def _run_library(library, specs, live, opened, options: QualityOptions, say):
    """Library metrics of every live space that the library holds: the queries, then each space
    against its reference on the same chunks. Returns (the library's info, notices)."""
    in_lib = {s.name for s in specs if s.in_library}
    if not any(r.name in in_lib for r in live):
        return None, ["The library holds none of the chosen spaces: library metrics skipped."]
    qs, sources, source_kind, notices = _library_queries(library, options)
    if not qs:
        return None, ["The library has no chunks: library metrics skipped."]
    info = {"path": str(library.path), "chunks": int(len(library.chunk_ids())), "queries": len(qs),
            "query_source": source_kind, "labelled": sources is not None, "rerank_depth": options.rerank,
            "seed": options.seed}
    say(f"library: {len(qs)} queries ({'your file' if source_kind == 'file' else 'pseudo-queries from chunks'})")
    q_fp32, _ = _encode_timed(opened[FP32], qs)
    fp_cache: dict[int, np.ndarray] = {}
    for r in live:
        if r.name not in in_lib:
            continue
        members = _space_members(library, r.name, opened[r.name], notices)
        if members is None:
            continue
        notices += _fill_fp32(library, opened[FP32], members, fp_cache, FP32 in in_lib, say)
        doc_fp32 = np.vstack([fp_cache[int(i)] for i in members.tolist()])
        doc_space = library.space(r.name).vectors(members) if r.name != FP32 else doc_fp32
        ref, q_ref, doc_ref = _neutral_reference(library, r.name, members, in_lib, opened, qs)
        reference = QueryDocs(q_ref, doc_ref) if ref is not None else QueryDocs(q_fp32, doc_fp32)
        if r.name != FP32:
            say(f"library: {r.label}")
        q_space, ms = _encode_timed(opened[r.name], qs)
        src = None
        if sources is not None:
            keep = set(members.tolist())
            src = [({x} if isinstance(x, int) else set(x)) & keep for x in sources]
        r.library = evaluate_library_space(
            QueryDocs(q_space, doc_space), reference, members,
            sources=src, depth=0 if r.name in (FP32, ref) else options.rerank, ms_per_query=ms,
            records=_candidate_records(library, q_space, doc_space, members) if src else None)
        r.library.reference = ref or FP32
    return info, notices


def _library_queries(library, options: QualityOptions):
    """(query texts, expected chunk ids per query or None, "file" or "pseudo", notices): the
    user's queries (with the chunks of their expected files), else pseudo-queries cut from
    random chunks."""
    queries = options.queries
    if not queries:
        picked = pseudo_queries(library, options.n_queries, options.seed)
        return [q for q, _ in picked], [c for _, c in picked], "pseudo", []
    if not isinstance(queries, QuerySet):
        queries = QuerySet(list(queries))
    notices, sources = [], None
    if queries.expected:
        sources = expected_chunks(library, queries.expected)
        unmatched = sum(1 for name, ids in zip(queries.expected, sources) if name and not ids)
        if unmatched:
            notices.append(f"{unmatched} expected file(s) of the queries file are not in the library.")
    return list(queries.texts), sources, "file", notices


def _space_members(library, name: str, encoder, notices: list[str]):
    """The sorted chunk ids of space ``name``, or None (with a notice) when ``encoder`` does not
    build it or it is empty."""
    try:
        library.space(name).check_encoder(encoder)
    except HefsearchError as e:
        notices.append(f"{name}: library metrics skipped ({e.message})")
        return None
    members = library.member_ids(name)  # a sorted int64 array
    if not len(members):
        notices.append(f"{name}: the space is empty; library metrics skipped.")
        return None
    return members


def _fill_fp32(library, fp_enc, members, fp_cache: dict, stored: bool, say) -> list[str]:
    """Put the FP32 vector of every chunk of ``members`` into ``fp_cache``: the library's own
    (``stored``: it has an FP32 space; missing ones encoded, not kept), else the bench's cache
    of them. Returns notices about what had to be encoded."""
    need = [int(i) for i in members.tolist() if int(i) not in fp_cache]
    if not need:
        return []
    if stored:
        from hefsearch.search.rerank import fp32_vectors

        say(f"library: FP32 vectors of {len(need)} chunks")
        vecs, encoded = fp32_vectors(library, fp_enc, need, cache=False)
        notices = [f"{encoded} chunks had no stored FP32 vector and were encoded for this run "
                   "('hefsearch backfill' stores them)."] if encoded else []
    else:
        from .fp32_cache import fp32_vectors_for_bench

        vecs, encoded, not_kept = fp32_vectors_for_bench(library, fp_enc, need, say)
        notices = [f"The library has no FP32 space: {encoded} chunks were encoded in FP32 for this run"
                   + (f" and not kept ({not_kept})." if not_kept else "; the next run reuses them.")] if encoded else []
    fp_cache.update(zip(need, vecs))
    return notices


def _neutral_reference(library, name: str, members, in_lib, opened, qs):
    """For a language-neutral space, when the library holds ``cpu-fp32-neutral`` with every
    chunk of it: (that name, its query vectors, its chunk vectors); else (None, None, None).
    A neutral space is meant to rank unlike plain FP32: its peer is the neutral FP32 space."""
    from hefsearch.search.language_neutral import NEUTRAL_SUFFIX, neutral_space_name

    ref = neutral_space_name(FP32)
    if not name.endswith(NEUTRAL_SUFFIX) or ref not in in_lib or ref not in opened:
        return None, None, None
    sp = library.space(ref)
    if not sp.has(members.tolist()).all():
        return None, None, None
    q, _ = _encode_timed(opened[ref], qs)
    return ref, q, sp.vectors(members)


def _candidate_records(library, q_space, doc_space, ids) -> dict:
    """Records of the chunks any query ranks in its top :data:`GROUP_DEPTH` (what the search's
    grouping sees), so the by-file metrics need no text of the whole library."""
    top = _ranking(q_space @ doc_space.T, ids, GROUP_DEPTH)
    wanted = sorted({c for row in top for c in row})
    return {rec.id: rec for rec in library.chunks(wanted)}


# -- plot ------------------------------------------------------------------------------------------
def plot_recall(report: QualityReport, path: str | Path) -> Path:
    """A PNG of recall@k (FP32's top-1 as ground truth) per space, with and without re-ranking."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise QualityError("--plot needs matplotlib.", "pip install 'hefsearch[plot]'") from None
    spaces = [s for s in report.spaces if s.library is not None]
    if not spaces:
        raise QualityError("Nothing to plot: recall@k needs a library (--library).")
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for s in spaces:
        ks = [int(k) for k in s.library.curve]
        line, = ax.plot(ks, list(s.library.curve.values()), marker="o", label=s.label)
        if s.library.curve_reranked:
            ax.plot(ks, list(s.library.curve_reranked.values()), marker="x", linestyle="--",
                    color=line.get_color(), label=f"{s.label} + FP32 re-rank top {s.library.reranked['depth']}")
    ax.set_xscale("log")
    ax.set_xticks(list(PLOT_KS))
    ax.set_xticklabels([str(k) for k in PLOT_KS])
    ax.set_xlabel("k")
    ax.set_ylabel("recall@k of FP32's top-1")
    ax.set_ylim(0, 1.02)
    ax.grid(True, alpha=0.3)
    lib = report.library or {}
    ax.set_title(f"{report.bundle['model']}: {lib.get('queries')} {lib.get('query_source')} queries, "
                 f"{lib.get('chunks')} chunks", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out

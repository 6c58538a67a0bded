""""More like this": the chunks of other documents nearest to a chunk, or to a whole document.

Nothing is encoded: the chunk's own stored vector (a document: the normalised mean of its
chunks' vectors) is the query, in the space asked for (default: the library's default space),
so the answer costs one FAISS search and names the encoder that made the vectors. Chunks of
the same document are left out, each other document appears once (its nearest chunk, as a search
lists one hit per file), and the filters of :mod:`hefsearch.search.filters` apply.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from hefsearch.index import documents

from .searcher import Hit, NotInLibrary, SearchError, SearchResult, elapsed_ms
from .filters import Filters
from .snippets import window

if TYPE_CHECKING:  # pragma: no cover
    from .searcher import Searcher


def similar(searcher: "Searcher", *, chunk_id: int | None = None, doc_id: int | None = None, k: int = 10,
            space: str | None = None, filters: Filters | None = None) -> SearchResult:
    """Up to ``k`` chunks of other documents nearest to ``chunk_id`` (or to document
    ``doc_id``), best first; ``SearchResult.query`` names what they are like."""
    t0 = time.perf_counter()
    library = searcher.library
    if (chunk_id is None) == (doc_id is None):
        raise SearchError("Say which chunk or which document to find similar ones for.",
                          "Give a chunk id (or PATH:CHUNK), or a document.")
    if chunk_id is not None:
        place = documents.chunk_place(library.query, chunk_id)
        if place is None:
            raise NotInLibrary(f"The library has no chunk {chunk_id}.", "Take an id from a search result.")
        doc_id, path, ordinal = place
        ids, what = [int(chunk_id)], f"{path} chunk {ordinal + 1}"
    else:
        what = documents.document_path(library.query, doc_id)
        if what is None:
            raise NotInLibrary(f"The library has no document {doc_id}.", "Take an id from a search result.")
        ids = documents.chunk_ids_of(library.query, doc_id)
        if not ids:
            raise SearchError(f"{what} has no text in the library (nothing to compare).")
    name = space or searcher.default_space()
    if name is None:
        raise SearchError(f"The library {library.path} has no vector space yet.",
                          "Index some folders first: hefsearch index FOLDER --bundle BUNDLE")
    searcher.check_space(name)
    sp = library.space(name)
    vecs = sp.vectors(library.member_ids(name, among=ids).tolist())
    if not len(vecs):
        raise SearchError(f"The space {name!r} holds no vector of {what} yet.",
                          "Run 'hefsearch index' to fill it, or pick another space with --space.")
    query = vecs.mean(axis=0)
    query = (query / max(float(np.linalg.norm(query)), 1e-12)).astype(np.float32)[None, :]
    filters = filters or Filters()
    allowed = searcher._allowed(filters)
    own = set(documents.chunk_ids_of(library.query, doc_id))
    if allowed is not None:
        allowed -= own
    t = time.perf_counter()
    # one hit per document, as in a search: ask for more chunks than k, keep each file's nearest
    want = 4 * k + (0 if allowed is not None else len(own))
    scores, found = sp.search(query, want, allowed=allowed)
    timings = {"search": elapsed_ms(t)}
    ranked = [(int(i), float(s)) for s, i in zip(scores[0], found[0]) if i >= 0 and int(i) not in own]
    t = time.perf_counter()
    records = {r.id: r for r in library.chunks([i for i, _ in ranked])}
    timings["fetch"] = elapsed_ms(t)
    hits = _one_hit_per_document(ranked, records, k)
    timings["total"] = elapsed_ms(t0)
    return SearchResult(query=f"like {what}", mode="similar", space=name, hits=hits, timings=timings,
                        backend_label=sp.info.label or sp.info.backend, filters=filters)


def _one_hit_per_document(ranked: list[tuple[int, float]], records: dict, k: int) -> list[Hit]:
    """The first ``k`` documents of ``ranked`` (chunk id, score), each by its nearest chunk."""
    best: dict[int, tuple[int, float]] = {}
    for i, s in ranked:
        if i in records and records[i].doc_id not in best:
            best[records[i].doc_id] = (i, s)
    # the vectors are unit length, so the space's score is the cosine: 'similarity' says so
    return [Hit(rank=n, chunk_id=i, score=s, similarity=s, path=records[i].path, page=records[i].page,
                line=records[i].line, start=records[i].start, end=records[i].end,
                snippet=window(records[i].text, (0, 0)), text=records[i].text, doc_kind=records[i].doc_kind,
                sources={"similar": n})
            for n, (i, s) in enumerate(list(best.values())[:k], 1)]

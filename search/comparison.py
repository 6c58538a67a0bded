"""Compare the answers of two vector spaces (typically the NPU's ``hef`` and ``cpu-fp32``)
to the same query: which chunks both return, and how similar the rankings are.

- overlap@k: |top-k(left) ∩ top-k(right)| / k.
- rank-biased overlap (Webber et al. 2010, extrapolated, p = 0.9): 1 for identical rankings,
  0 for disjoint ones, the top ranks weighing most.

No fallback here: if one space cannot encode the query the comparison fails, because an FP32
answer labelled as the NPU's would make the comparison a lie.

Chunks are compared as each encoder ranks them (``all_chunks``: no grouping by file, no
folding of copies), so overlap@k and RBO measure the encoders, not the grouping.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .searcher import SearchResult
from .request import SearchRequest
from hefsearch.embed.metrics import overlap_at_k, rank_biased_overlap

RBO_P = 0.9


@dataclass
class Comparison:
    query: str
    left: SearchResult
    right: SearchResult
    overlap_at_k: float
    rbo: float
    only_left: set[int]
    only_right: set[int]

    def to_dict(self) -> dict:
        return {"query": self.query, "overlap_at_k": self.overlap_at_k, "rbo": self.rbo,
                "only_left": sorted(self.only_left), "only_right": sorted(self.only_right),
                "left": self.left.to_dict(), "right": self.right.to_dict()}


def ranking_agreement(left_ids: list[int], right_ids: list[int], k: int) -> tuple[float, float]:
    """(overlap@k, RBO) of two rankings; two empty rankings agree fully."""
    if not left_ids and not right_ids:
        return 1.0, 1.0
    if not left_ids or not right_ids:
        return 0.0, 0.0
    return overlap_at_k(left_ids, right_ids, k), rank_biased_overlap(left_ids, right_ids, p=RBO_P, k=k)


def compare(searcher, request: SearchRequest, spaces: tuple[str, str]) -> Comparison:
    """``request`` answered in each of ``spaces``: every chunk as its encoder ranks it, never
    from the FP32 fallback."""
    left, right = (searcher.search(replace(request, space=space, fallback=False, all_chunks=True))
                   for space in spaces)
    a = [h.chunk_id for h in left.hits]
    b = [h.chunk_id for h in right.hits]
    ov, rbo = ranking_agreement(a, b, request.k)
    return Comparison(query=request.query, left=left, right=right, overlap_at_k=ov, rbo=rbo,
                      only_left=set(a) - set(b), only_right=set(b) - set(a))

"""Reciprocal rank fusion (Cormack, Clarke & Büttcher 2009): score = sum of w / (k0 + rank).

Pure functions over ranked id lists, so they are checked by hand in the tests.
"""

from __future__ import annotations

from typing import Sequence

RRF_K0 = 60


def rrf(lists: dict[str, Sequence[int]], weights: dict[str, float] | None = None,
        k0: int = RRF_K0) -> list[tuple[int, float, dict[str, int]]]:
    """Fuse ranked lists of ids: [(id, fused score, {list name: 1-based rank})], best first.

    Ties keep the order of first appearance (lists in the given order, then by rank), so
    the result is deterministic.
    """
    weights = weights or {}
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    order: dict[int, int] = {}
    for name, ids in lists.items():
        w = float(weights.get(name, 1.0))
        for r, i in enumerate(ids, start=1):
            scores[i] = scores.get(i, 0.0) + w / (k0 + r)
            ranks.setdefault(i, {})[name] = r
            order.setdefault(i, len(order))
    fused = sorted(scores, key=lambda i: (-scores[i], order[i]))
    return [(i, scores[i], ranks[i]) for i in fused]

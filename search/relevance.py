"""Where relevance ends: a line under the hits that stand out from the query's own candidates.

A cosine alone says little: with multilingual-e5-small every passage scores 0.78-0.85 against
every query, with all-MiniLM-L6-v2 0.0-0.7, and the level moves from query to query. So a hit is
judged against the scores of the same query's weaker candidates: the vector candidates ranked
below :data:`TAIL_FROM` (the "tail", the passages the query did not single out). A hit is
*relevant* when its cosine is at least ``cut`` robust deviations above the tail's median::

    z = (cosine - median(tail)) / (1.4826 * MAD(tail))

The line falls before the first hit below the cut, in the order shown, that keyword search did
not find (hybrid fuses only strong keyword evidence: every query word, or its codes): hits after
it are weaker matches (the list still shows them). ``cut`` depends on the model and the space's precision,
measured on labelled sets with ``bench/relevance.py`` (docs/searching.md): :data:`CUTS` by the
model's family and the space's precision (an 8-bit space wants a lower one), :data:`DEFAULT_CUT`
otherwise; a bundle may carry its own (``manifest.json``: ``"relevance_cut"``). No line is drawn without a cosine (keyword mode) or
with fewer than :data:`MIN_TAIL` candidates in the tail.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable, Sequence

#: candidates ranked above this (1-based) are never in the tail: they may be the answer
TAIL_FROM = 11
#: a tail shorter than this says too little about the query's scores: no line
MIN_TAIL = 10
#: robust deviations above the tail's median a relevant hit scores, by model family (a key
#: found in the bundle's model name): (FP32 space, 8-bit space); the best F2 of bench/relevance.py
#: on our labelled sets (8-bit: the NPU simulation, a8 / a8-robust)
CUTS = {"e5": (4.5, 4.0), "minilm": (5.0, 4.0)}
DEFAULT_CUT = (4.5, 4.0)
#: the MAD of a tail this flat (all candidates alike) is floored, or any hit would stand out
MIN_SPREAD = 1e-4


@dataclass(frozen=True)
class RelevanceLine:
    """The line of one answer: ``above`` hits (in the order shown) are relevant."""

    #: how many hits, from the first, are above the line
    above: int
    #: the cut (robust deviations above the tail's median)
    cut: float
    #: the tail's median cosine and its robust spread (1.4826 x MAD)
    median: float
    spread: float
    #: the cosine the cut corresponds to in this answer
    threshold: float

    def to_dict(self) -> dict:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def cut_for(model_name: str | None, manifest: dict | None = None, *, quantised: bool = False) -> float:
    """The cut of a bundle's space: the manifest's ``relevance_cut`` (every space), else its
    family's for the space's precision, else the default's."""
    given = (manifest or {}).get("relevance_cut")
    if isinstance(given, (int, float)) and not isinstance(given, bool) and given > 0:
        return float(given)
    name = (model_name or "").lower()
    cuts = next((c for key, c in CUTS.items() if key in name), DEFAULT_CUT)
    return cuts[1] if quantised else cuts[0]


def tail_stats(candidate_scores: Iterable[float]) -> tuple[float, float] | None:
    """(median, spread) of the candidates ranked below :data:`TAIL_FROM`, best first by score;
    None when the tail is too short."""
    tail = sorted(candidate_scores, reverse=True)[TAIL_FROM - 1:]
    if len(tail) < MIN_TAIL:
        return None
    median = _median(tail)
    spread = max(1.4826 * _median([abs(x - median) for x in tail]), MIN_SPREAD)
    return median, spread


def _median(values: list[float]) -> float:
    """The median of a few dozen scores (numpy's would load numpy.ma into a one-shot search)."""
    ordered = sorted(float(v) for v in values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def line_position(hits: Sequence[tuple[float | None, bool]], threshold: float) -> int:
    """How many of ``hits`` ((cosine, keyword evidence), in the order shown) are above the line:
    those before the first hit whose cosine is under ``threshold`` and that keyword search did
    not find (in hybrid mode only a chunk with every query word, or its codes, is found: that
    is evidence of its own). A hit without a cosine stays on the side it falls."""
    above = 0
    for similarity, keyword in hits:
        if similarity is not None and similarity < threshold and not keyword:
            break
        above += 1
    return above


def relevance_line(hits: Sequence[tuple[float | None, bool]], candidate_scores: Iterable[float],
                   cut: float) -> RelevanceLine | None:
    """The line for ``hits`` ((cosine, keyword evidence), in the order shown) against the
    query's vector candidates; None when no line can be drawn (too short a tail)."""
    stats = tail_stats(candidate_scores)
    if stats is None:
        return None
    median, spread = stats
    threshold = median + cut * spread
    return RelevanceLine(above=line_position(hits, threshold), cut=cut, median=median, spread=spread,
                         threshold=threshold)

"""One hit per document, copies folded: from the retrievers' chunk ranking to what a person
reads.

The retrievers rank chunks, so a long file fills the top with its own chunks and a text kept
in three files (``fs.md``, ``fs.html`` and the ``all.html`` that concatenates every page) takes
three places. :func:`group` turns the ranking into documents, best first:

- a document is shown once, by its best-ranked chunk; its other chunks among the candidates
  are counted (``more_in_file``: "3 more in this file");
- a document with the same content as one shown (same sha256), or whose best passage is a copy
  of a shown hit's passage (:func:`near_copy`), is folded under that hit (``also_in``), not
  shown again.

A near copy is judged by the words, not the vectors: a translation is close in meaning but
must stay its own hit (the cross-lingual case is the point of the product). Two passages are
copies when at least :data:`NEAR_COPY` of the word 3-grams of the shorter one occur in the
other (chunk boundaries differ between a page and its Markdown source, so containment, not
equality). Two invoices of one template that differ in a few amounts are folded too; the
folded paths stay on the hit, and ``--all-chunks`` shows every chunk unfolded.

Pure functions over chunk records (``id``, ``doc_id``, ``path``, ``text``, ``doc_sha256``), so
the search API, the quality bench and the tests use the same code.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

#: words per shingle
SHINGLE_WORDS = 3
#: share of the shorter passage's shingles found in the other from which it is a copy
NEAR_COPY = 0.8
#: passages with fewer shingles than this are copies only when their shingles are equal
MIN_SHINGLES = 8
#: shingle hashes in a passage's sketch (a prefilter before the exact comparison)
SKETCH = 8
#: documents looked at for copies of the shown hits after the last one shown (at least)
LOOK_PAST = 10
_WORD = re.compile(r"\w+", re.UNICODE)
_BLANKS = re.compile(r"[ \t\f\v\u00a0]+")
_AROUND_BREAK = re.compile(r" ?\n ?")


@dataclass
class Group:
    """A document's place in the results: its best chunk, its other candidates, its copies."""

    chunk_id: int
    doc_id: int
    more: list[int] = field(default_factory=list)  # other chunk ids of the document, by rank
    also_in: list[str] = field(default_factory=list)  # paths of documents folded under it


def shingles(text: str) -> frozenset:
    """The word 3-grams of ``text`` (lowercase, punctuation and markup ignored), as hashes:
    sets of ints intersect several times faster than sets of tuples, whose hash is not kept."""
    words = _WORD.findall(text.lower())
    if len(words) < SHINGLE_WORDS:
        return frozenset([hash(tuple(words))]) if words else frozenset()
    return frozenset(map(hash, zip(*(words[i:] for i in range(SHINGLE_WORDS)))))


def near_copy(a: frozenset, b: frozenset) -> bool:
    """Whether two passages (their :func:`shingles`) are copies of each other."""
    if not a or not b:
        return False
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    if len(small) < MIN_SHINGLES:
        return small == large
    return len(small & large) >= NEAR_COPY * len(small)


class _Passage:
    """A passage's shingles and a sketch of them (its :data:`SKETCH` smallest hashes): most
    pairs are no copies, and a copy holds most of the shorter passage's sketch, so comparing
    the sketch first (8 lookups) spares the whole intersection (about 100)."""

    __slots__ = ("shingles", "sketch")

    def __init__(self, text: str):
        self.shingles = shingles(text)
        self.sketch = heapq.nsmallest(SKETCH, self.shingles)

    def copy_of(self, other: "_Passage") -> bool:
        small, large = (self, other) if len(self.shingles) <= len(other.shingles) else (other, self)
        if len(small.shingles) >= MIN_SHINGLES and sum(h in large.shingles for h in small.sketch) < SKETCH // 2:
            return False  # a copy would hold at least 80% of them: 4 of 8 missing is no copy
        return near_copy(small.shingles, large.shingles)


def group(ranked: Sequence[int], records: Mapping[int, object], k: int) -> list[Group]:
    """The first ``k`` documents of a chunk ranking (see module doc). ``records`` maps chunk
    id -> record; ids without one (deleted meanwhile) are skipped."""
    by_doc: dict[int, Group] = {}
    shown: list[tuple[Group, _Passage]] = []
    looked_past = 0  # documents looked at after the k-th shown, for copies of the shown
    by_sha: dict[str, Group] = {}
    folded: dict[int, Group | None] = {}  # doc id -> the group it was folded under (None: not shown)
    for cid in ranked:
        rec = records.get(cid)
        if rec is None:
            continue
        doc = rec.doc_id
        if doc in by_doc:
            by_doc[doc].more.append(cid)
            continue
        if doc in folded:
            continue
        if len(shown) >= k:
            # past the k shown only their other chunks and copies count; a copy scores like
            # its original, so it ranks near it: k (at least LOOK_PAST) more documents are
            # looked at, no more
            looked_past += 1
            if looked_past > max(k, LOOK_PAST):
                continue
        sha = getattr(rec, "doc_sha256", None)
        target = by_sha.get(sha) if sha else None
        sh = _Passage(rec.text)
        if target is None:
            target = next((g for g, other in shown if sh.copy_of(other)), None)
        if target is not None:
            target.also_in.append(rec.path)
            folded[doc] = target
            continue
        if len(shown) >= k:
            folded[doc] = None
            continue
        g = Group(cid, doc)
        by_doc[doc] = g
        shown.append((g, sh))
        if sha:
            by_sha[sha] = g
    return [g for g, _ in shown]


def tidy_snippet(text: str) -> str:
    """A snippet with each run of blanks as one space (aligned columns and indented text in a
    file make the rest of a snippet unreadable in a list); a line break stays, without the
    blanks around it."""
    return _AROUND_BREAK.sub("\n", _BLANKS.sub(" ", text))

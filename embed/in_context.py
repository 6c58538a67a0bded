"""Passages in context: a short chunk's vector is the mean of its own and of its section's.

A library with passages (``index/passages.py``) cuts documents into short chunks (64 tokens)
and groups consecutive ones into *sections* that fill the encoder's window. Each chunk is
encoded alone and its section once; the vector stored for the chunk is their mean, so a query
scores ``(cos(q, chunk) + cos(q, section)) / 2``: a detail is not drowned in a mean over the
whole window, and what the page is about still counts (the section). Measured in
docs/searching.md ("Hubs and long passages"). A chunk that is its own section keeps its unit
vector; a mean is shorter than 1 where the two differ, and stays so (the cosine of a query with
it is the mean of the two cosines; re-normalising it favoured chunks unlike their section).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


class ContextPlan:
    """What a batch of chunks encodes (``flat``: the chunks, then each distinct section of
    more than one chunk once) and how those vectors become the chunks' (:meth:`fuse`).

    ``sections[i]``: the text of chunk ``i``'s section, or None where the chunk is its own
    section (a short document, a library without passages, a chunk stored before them)."""

    def __init__(self, texts: Sequence[str], sections: Sequence[str | None] | None):
        self.texts = list(texts)
        if sections is not None and len(sections) != len(self.texts):
            raise ValueError(f"{len(self.texts)} chunks but {len(sections)} sections")
        index: dict[str, int] = {}
        self.where = np.full(len(self.texts), -1, np.int64)
        for i, section in enumerate(sections or ()):
            if section and section != self.texts[i]:
                self.where[i] = index.setdefault(section, len(index))
        self.flat = self.texts + list(index)

    @property
    def plain(self) -> bool:
        """No chunk has a section of its own: the vectors are the chunks'."""
        return not (self.where >= 0).any()

    def fuse(self, vectors: np.ndarray) -> np.ndarray:
        """The chunks' vectors from those of :attr:`flat` (in that order)."""
        v = np.asarray(vectors, np.float32)
        n = len(self.texts)
        if len(v) != len(self.flat):
            raise ValueError(f"expected {len(self.flat)} vectors for the plan, got {len(v)}")
        out = v[:n].copy()
        has = self.where >= 0
        if has.any():
            out[has] = 0.5 * (v[:n][has] + v[n + self.where[has]])
        return out


def passage_vectors(encoder, texts: Sequence[str], sections: Sequence[str | None] | None) -> np.ndarray:
    """``encoder.encode_passages(texts)``, given the sections only where a chunk has one (an
    encoder that predates sections, or a stand-in, is asked as before)."""
    if sections is not None and any(s is not None for s in sections):
        return encoder.encode_passages(list(texts), sections=list(sections))
    return encoder.encode_passages(list(texts))

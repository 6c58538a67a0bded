"""Snippets for vector hits: a window around the sentence of the chunk that best matches.

A sentence that shares words with the query wins outright (cheap, and what a person expects
to see highlighted). Otherwise (typically a cross-lingual hit) the sentences of all hits are
embedded in one batch with the same encoder as the query and the closest one is shown.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

import numpy as np

from .keyword import parse_query

WINDOW_CHARS = 220
MAX_SENTENCES = 12
_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+|\n\s*")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for m in _SENTENCE_END.finditer(text):
        if m.start() > pos and text[pos:m.start()].strip():
            spans.append((pos, m.start()))
        pos = m.end()
    if pos < len(text) and text[pos:].strip():
        spans.append((pos, len(text)))
    return spans or [(0, len(text))]


def window(text: str, span: tuple[int, int], width: int = WINDOW_CHARS) -> str:
    """About ``width`` characters around ``span``, cut at spaces, with … where text was cut."""
    if len(text) <= width:
        return text.strip()
    s, e = span
    if e - s >= width:
        start, end = s, s + width
    else:
        pad = (width - (e - s)) // 2
        start = max(0, s - pad)
        end = min(len(text), start + width)
        start = max(0, end - width)
    if start > 0:
        sp = text.find(" ", start, s + 1 if s >= start else start + 20)
        start = sp + 1 if sp != -1 else start
    if end < len(text):
        sp = text.rfind(" ", max(e, start + 1), end)
        end = sp if sp != -1 and sp > start else end
    return ("…" if start > 0 else "") + text[start:end].strip() + ("…" if end < len(text) else "")


def _lexical_best(text: str, spans, words: set[str]) -> tuple[int, int] | None:
    if not words:
        return None
    best, best_n = None, 0
    for s, e in spans:
        n = len(words & set(re.findall(r"\w+", text[s:e].lower())))
        if n > best_n:
            best, best_n = (s, e), n
    return best


def vector_snippets(query: str, texts: Sequence[str], query_vector: np.ndarray | None,
                    encode: Callable[[list[str]], np.ndarray] | None) -> list[str]:
    """One snippet per hit text: lexical best sentence, else the semantically closest."""
    words = {w for t in parse_query(query) for w in t.words}
    out: list[str | None] = [None] * len(texts)
    todo: list[tuple[int, list[tuple[int, int]]]] = []
    for i, text in enumerate(texts):
        if len(text) <= WINDOW_CHARS:
            out[i] = text.strip()
            continue
        spans = sentence_spans(text)
        best = _lexical_best(text, spans, words)
        if best is not None or len(spans) == 1 or encode is None or query_vector is None:
            out[i] = window(text, best or spans[0])
        else:
            todo.append((i, spans[:MAX_SENTENCES]))
    if todo:
        sentences = [texts[i][s:e] for i, spans in todo for s, e in spans]
        vecs = encode(sentences)
        sims = vecs @ np.asarray(query_vector, np.float32).ravel()
        pos = 0
        for i, spans in todo:
            part = sims[pos : pos + len(spans)]
            pos += len(spans)
            out[i] = window(texts[i], spans[int(np.argmax(part))])
    return [o or "" for o in out]

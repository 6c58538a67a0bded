"""Snippets for vector hits: a window around the sentence of the chunk that best matches.

Two steps, so results never wait for an encoder:

1. **At once** (:func:`quick_snippets`, part of every search): a sentence that shares words with
   the query wins outright (cheap, and what a person expects to see highlighted); a chunk short
   enough to show whole, or of one sentence, is shown as it is. Any other chunk (typically a
   cross-lingual hit) gets its first sentence for now and is *pending*.
2. **Later, for the hits shown** (:class:`SemanticSnippets`, called by the TUI for the visible
   hits and by the CLI for the hits it prints): the pending chunks' sentences are embedded on
   the CPU in FP32 and the one closest to the query is shown. Sentence vectors are cached per
   chunk id (a chunk id never names other text), so typing a query a letter at a time embeds
   each chunk's sentences once.

Figures for both steps: bench/query_latency.py, published in docs/performance.md.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from typing import Callable, Sequence

import numpy as np

from .keyword import parse_query

WINDOW_CHARS = 220
#: a sentence embedded in a batch costs about this share of one query encoded alone (measured:
#: 0.52 for MiniLM, 0.59 for multilingual-e5-small, 12 sentences, 2 loaded cores)
SENTENCE_PER_QUERY = 0.55
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


def window(text: str, span: tuple[int, int], width: int | None = None) -> str:
    """About ``width`` (default :data:`WINDOW_CHARS`) characters around ``span``, cut at
    spaces, with … where text was cut."""
    width = width or WINDOW_CHARS
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


def query_words(query: str) -> set[str]:
    return {w for t in parse_query(query) for w in t.words}


def quick_snippet(text: str, words: set[str]) -> tuple[str, bool]:
    """(snippet, final): the sentence sharing most query words, or the whole short chunk, is
    final; otherwise the first sentence stands in until a semantic choice replaces it."""
    if len(text) <= WINDOW_CHARS:
        return text.strip(), True
    spans = sentence_spans(text)
    best = _lexical_best(text, spans, words)
    return window(text, best or spans[0]), best is not None or len(spans) == 1


def quick_snippets(query: str, texts: Sequence[str]) -> list[tuple[str, bool]]:
    """:func:`quick_snippet` for each hit text (no encoder)."""
    words = query_words(query)
    return [quick_snippet(t, words) for t in texts]


def closest_sentence(text: str, sentence_vectors: np.ndarray, query_vector: np.ndarray) -> str:
    """The window around the sentence (of the first :data:`MAX_SENTENCES`) closest to the query."""
    spans = sentence_spans(text)[:MAX_SENTENCES]
    sims = sentence_vectors @ np.asarray(query_vector, np.float32).ravel()
    return window(text, spans[int(np.argmax(sims))])


def sentences_of(text: str) -> list[str]:
    return [text[s:e] for s, e in sentence_spans(text)[:MAX_SENTENCES]]


def embed_sentences(encode: Callable[[list[str]], np.ndarray], texts: Sequence[str]) -> list[np.ndarray]:
    """The sentence vectors of each text (its first :data:`MAX_SENTENCES`), all in one batch."""
    per_text = [sentences_of(t) for t in texts]
    vecs = np.asarray(encode([s for part in per_text for s in part]), np.float32)
    return np.split(vecs, np.cumsum([len(part) for part in per_text])[:-1])


#: chunks whose sentence vectors are kept (12 x 384 float32 = 18 kB each: about 5 MB)
SENTENCE_CACHE_CHUNKS = 256
#: how long meaning-based snippets may hold up an answer that carries them (the server's): hits
#: whose sentences are cached are always done; the others in rank order while their predicted
#: cost (sentences x the measured time per sentence) fits, the rest keep the stand-in. Measured
#: before (bench/query_latency.py, 100k chunks, MiniLM on 2 loaded cores): ~7 ms p50 but 260 ms
#: p95 unbounded, which set the API's p95 at 291 ms
SEMANTIC_BUDGET_MS = 10.0
#: the same cap for a one-shot ``hefsearch search``. Unbounded, a query sharing no word with its
#: hits spent 0.4-0.6 s here on MiniLM (10 hits, 2 cores, load ~1), twice the rest of the command
CLI_BUDGET_MS = 100.0
#: weight of the newest measurement in the time-per-sentence estimate
_RATE_WEIGHT = 0.5


class SemanticSnippets:
    """The closest sentence of each pending hit, by a CPU encoder (``encode_queries`` and
    ``encode_passages``), sentence vectors cached per chunk id (least recently used dropped).

    Not thread-safe: one caller at a time (the searcher's owner serialises queries)."""

    def __init__(self, encoder, cache_chunks: int = SENTENCE_CACHE_CHUNKS, clock=time.perf_counter):
        self.encoder = encoder
        self.cache_chunks = cache_chunks
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._query: tuple[str, np.ndarray] | None = None
        #: sentences embedded so far (tests and the bench read it)
        self.sentences_embedded = 0
        #: seconds, as a budget is counted (tests give a fake clock)
        self.clock = clock
        #: measured ms per embedded sentence (None: nothing measured yet)
        self.ms_per_sentence: float | None = None
        #: ms the search took to encode the query with this encoder (a prediction before any
        #: sentence was timed; None: unknown)
        self.query_ms: float | None = None

    def query_vector(self, query: str) -> np.ndarray:
        if self._query is None or self._query[0] != query:
            t = self.clock()
            self._query = (query, np.asarray(self.encoder.encode_queries([query]), np.float32)[0])
            self._measured((self.clock() - t) * 1000.0, 1, first_only=True)
        return self._query[1]

    def _may_cost(self, text: str) -> float:
        """Predicted ms for ``text``'s sentences before any was timed (0 when nothing is known:
        the old rule, embed the first chunk to measure)."""
        if self.query_ms is None:
            return 0.0
        return self.query_ms * SENTENCE_PER_QUERY * len(sentences_of(text))

    def prime(self, query: str, vector: np.ndarray, encode_ms: float | None = None) -> None:
        """The query's vector, already encoded by this same encoder (the FP32 space searched),
        and how long that took: before any sentence was timed, it predicts what the first
        chunk's sentences would cost (:data:`SENTENCE_PER_QUERY` of it each)."""
        self._query = (query, np.asarray(vector, np.float32).ravel())
        if encode_ms is not None:
            self.query_ms = float(encode_ms)

    def _measured(self, ms: float, sentences: int, *, first_only: bool = False) -> None:
        if sentences <= 0 or (first_only and self.ms_per_sentence is not None):
            return
        rate = ms / sentences
        old = self.ms_per_sentence
        self.ms_per_sentence = rate if old is None else (1 - _RATE_WEIGHT) * old + _RATE_WEIGHT * rate

    def affordable(self, chunks: Sequence[tuple[int, str]], budget_ms: float) -> list[tuple[int, str]]:
        """The chunks whose snippets fit ``budget_ms``: every cached one, then uncached ones in
        the order given while their predicted cost fits (none before a time was measured)."""
        left, out = budget_ms, []
        for cid, text in chunks:
            if cid in self._cache:
                out.append((cid, text))
                continue
            cost = None if self.ms_per_sentence is None else self.ms_per_sentence * len(sentences_of(text))
            if cost is None or cost > left:
                left = -1.0  # keep rank order: nothing after the first that does not fit
                continue
            left -= cost
            out.append((cid, text))
        return out

    def sentence_vectors(self, chunks: Sequence[tuple[int, str]]) -> list[np.ndarray]:
        """Sentence vectors of each (chunk id, text); the uncached ones in one batch."""
        missing = [(cid, text) for cid, text in chunks if cid not in self._cache]
        if missing:
            t, before = self.clock(), self.sentences_embedded
            for (cid, _), vecs in zip(missing, embed_sentences(self.encoder.encode_passages,
                                                               [text for _, text in missing])):
                self._cache[cid] = vecs
                self.sentences_embedded += len(vecs)
            self._measured((self.clock() - t) * 1000.0, self.sentences_embedded - before)
        out = []
        for cid, _ in chunks:
            self._cache.move_to_end(cid)
            out.append(self._cache[cid])
        while len(self._cache) > self.cache_chunks:
            self._cache.popitem(last=False)
        return out

    def snippets(self, query: str, chunks: Sequence[tuple[int, str]], *,
                 budget_ms: float | None = None) -> dict[int, str]:
        """{chunk id: snippet around the sentence closest to ``query``} for (chunk id, text);
        with ``budget_ms`` only for the chunks that fit it (:meth:`affordable`, counted from
        the call, the query's own encoding included). With no time measured yet (a query vector
        primed from the search measures none) the first uncached chunk is embedded to measure it,
        once per engine, unless the query's own encoding time predicts it cannot fit (a 12-layer
        model on a loaded machine): the budget is a promise to the person waiting."""
        if not chunks:
            return {}
        start = self.clock()
        q = self.query_vector(query)
        if budget_ms is not None and self.ms_per_sentence is None:
            first = next(((cid, text) for cid, text in chunks if cid not in self._cache), None)
            if first is not None and self._may_cost(first[1]) <= budget_ms:
                self.sentence_vectors([first])  # measures the rate; cached, so affordable() keeps it
        if budget_ms is not None:
            chunks = self.affordable(chunks, budget_ms - (self.clock() - start) * 1000.0)
            if not chunks:
                return {}
        return {cid: closest_sentence(text, vecs, q)
                for (cid, text), vecs in zip(chunks, self.sentence_vectors(chunks))}

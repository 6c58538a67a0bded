"""The host side of the pipeline, identical for every backend (ARCHITECTURE.md section 4).

text -> token ids (truncated to the budget, specials included) -> E = word[ids] +
position[pos] + token_type[0] -> backend(E, mask) -> mean over the mask -> L2 normalise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .bundle import Bundle


#: the most characters a batch may have to be tokenized through a vocabulary subset (a query,
#: the sentences of the hits on screen: ~20 ms for 12 sentences); beyond, the whole tokenizer
SUBSET_MAX_CHARS = 20_000


@dataclass
class Tokenized:
    """Token ids of several texts, unpadded, and which of them were cut to fit."""

    ids: list[np.ndarray]
    truncated: np.ndarray  # bool per text

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(i) for i in self.ids), dtype=np.int64, count=len(self.ids))


class HostPipeline:
    """Tokenisation, embedding-table gather-sum, padding, pooling for one bundle."""

    def __init__(self, bundle: Bundle, max_tokens: int | None = None, *, few_texts: bool = False):
        self.bundle = bundle
        self.max_tokens = int(max_tokens or bundle.seq_len)
        # Searching (few_texts) with a large Unigram vocabulary: a tokenizer of the pieces each
        # batch needs (embed/vocab_subset.py), same ids, no 250k-piece load. Otherwise a private
        # tokenizer: truncation settings are per-Tokenizer state, and the bundle's tokenizer is
        # shared with the chunker.
        self._few_texts = few_texts
        self._subset = None
        self._tok = None
        self._word = bundle.table("word")
        self._pos = bundle.table("position")
        self._type0 = np.asarray(bundle.table("token_type")[0], dtype=np.float32)
        self._offset = bundle.position_offset
        if self._offset + self.max_tokens > self._pos.shape[0]:
            self.max_tokens = self._pos.shape[0] - self._offset
        self._counter = None  # the untruncated one, made when count_tokens is first asked
        # Position rows for 0..max_tokens-1 with the type-0 row folded in: one add per frame.
        self._pos_type = np.ascontiguousarray(
            self._pos[self._offset : self._offset + self.max_tokens] + self._type0, dtype=np.float32
        )

    @property
    def hidden(self) -> int:
        return self.bundle.hidden

    def _tokenizer(self, chars: int = 0):
        """The whole tokenizer, or None while a vocabulary subset serves (loaded on first use).
        A batch of more than :data:`SUBSET_MAX_CHARS` characters (an evaluation, not a search)
        loads the whole tokenizer once: per text it is the faster of the two."""
        if self._subset is not None and chars > SUBSET_MAX_CHARS:
            self._subset.close()
            self._subset, self._few_texts = None, False
        if self._tok is None and self._subset is None:
            from . import vocab_subset

            folder = vocab_subset.prepare(self.bundle) if self._few_texts else None
            if folder is not None:
                self._subset = vocab_subset.SubsetTokenizer(folder, self.max_tokens)
                return None
            tok = self.bundle.fresh_tokenizer()
            tok.no_padding()
            # tokenizers truncates the body and keeps the specials, as transformers does.
            tok.enable_truncation(max_length=self.max_tokens)
            self._tok = tok
        return self._tok

    def tokenize(self, texts: list[str]) -> Tokenized:
        tok = self._tokenizer(sum(map(len, texts)))
        if tok is None:
            try:
                pairs = self._subset.encode(list(texts))
            except Exception:  # a damaged prepared table (sqlite3, tokenizers): the whole tokenizer
                tok = self._tokenizer(SUBSET_MAX_CHARS + 1)
            else:
                return Tokenized([i for i, _ in pairs], np.fromiter((t for _, t in pairs), dtype=bool, count=len(pairs)))
        # encode_batch_fast (tokenizers >= 0.20) skips the character offsets we never use.
        encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
        encs = encode(list(texts), add_special_tokens=True)
        ids = [np.asarray(enc.ids, dtype=np.int64) for enc in encs]
        truncated = np.fromiter((bool(enc.overflowing) for enc in encs), dtype=bool, count=len(encs))
        return Tokenized(ids, truncated)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` including the specials, untruncated."""
        if self._counter is None:
            counter = self.bundle.fresh_tokenizer()
            counter.no_padding()
            counter.no_truncation()
            self._counter = counter
        return len(self._counter.encode(text, add_special_tokens=True).ids)

    def embed(self, ids: list[np.ndarray], pad_to: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Gather-sum for a batch: E [N,S,H] float32 and mask [N,S] int64, zero-padded to S."""
        n = len(ids)
        longest = max((len(a) for a in ids), default=0)
        s = int(pad_to or longest)
        if s < longest:
            raise ValueError(f"pad_to={s} is shorter than the longest text ({longest} tokens)")
        e = np.empty((n, s, self.hidden), dtype=np.float32)  # only the padding is zeroed below
        mask = np.zeros((n, s), dtype=np.int64)
        for i, a in enumerate(ids):
            k = len(a)
            np.take(self._word, a, axis=0, out=e[i, :k])
            np.add(e[i, :k], self._pos_type[:k], out=e[i, :k])
            e[i, k:] = 0.0
            mask[i, :k] = 1
        return e, mask


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the hidden states over real tokens: [N,S,H], [N,S] -> [N,H] float32."""
    m = mask.astype(np.float32)
    # [N,1,S] @ [N,S,H]: a batched matrix product (BLAS) instead of a masked copy and a sum
    summed = np.matmul(m[:, None, :], hidden.astype(np.float32, copy=False))[:, 0, :]
    counts = np.clip(m.sum(axis=1, keepdims=True), 1e-9, None)
    return (summed / counts).astype(np.float32)


def cls_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(hidden[:, 0, :], dtype=np.float32)


def max_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    h = np.where(mask[..., None].astype(bool), hidden, -1e9)
    return h.max(axis=1).astype(np.float32)


POOLERS = {"mean": mean_pool, "cls": cls_pool, "max": max_pool}


def l2_normalize(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.clip(norms, 1e-12, None)).astype(np.float32)

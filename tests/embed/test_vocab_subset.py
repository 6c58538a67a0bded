"""A Unigram tokenizer built from only the vocabulary pieces a batch needs gives exactly the ids
of the whole tokenizer (what makes a one-shot multilingual-e5 search skip loading 250k pieces).
The tiny XLM-R's Unigram vocabulary stands in for e5's: the size threshold is lowered here."""

from __future__ import annotations

import numpy as np
import pytest

from hefsearch.embed import vocab_subset
from hefsearch.embed.bundle import Bundle
from hefsearch.embed.host import HostPipeline

TEXTS = [
    "query: wo ist die Rechnung vom März?", "passage: Der schnelle braune Fuchs springt über den faulen Hund.",
    "query: 東京の天気", "El rápido zorro marrón salta", "unknown ☃ 𝔘𝔫𝔦 ǅ ﬁ ｆｕｌｌ  two  spaces\tand a tab",
    "<mask> inside <s> text </s>", "", "passage: " + "semantic search finds documents by meaning " * 40,
]


@pytest.fixture
def small_threshold(monkeypatch):
    monkeypatch.setattr(vocab_subset, "MIN_VOCAB", 0)


def whole(bundle: Bundle, max_length: int):
    tok = bundle.fresh_tokenizer()
    tok.no_padding()
    tok.enable_truncation(max_length=max_length)
    return tok


def test_the_subset_gives_the_ids_of_the_whole_vocabulary(tiny_xlmr_bundle, small_threshold):
    bundle = Bundle.open(tiny_xlmr_bundle)
    folder = vocab_subset.prepare(bundle)
    assert folder is not None and (folder / "vocab.sqlite").is_file()
    subset = vocab_subset.SubsetTokenizer(folder, 64)
    ref = whole(bundle, 64).encode_batch(TEXTS, add_special_tokens=True)
    for one in TEXTS:  # alone (a query) and all together (the sentences of the hits)
        (ids, cut), = subset.encode([one])
        r = ref[TEXTS.index(one)]
        assert list(ids) == r.ids and cut == bool(r.overflowing), one
    assert [list(i) for i, _ in subset.encode(TEXTS)] == [r.ids for r in ref]
    assert any(cut for _, cut in subset.encode(TEXTS))  # the long text was truncated, as the whole one
    subset.close()


def test_searching_uses_the_subset_and_a_big_batch_the_whole_tokenizer(tiny_xlmr_bundle, small_threshold):
    bundle = Bundle.open(tiny_xlmr_bundle)
    plain = HostPipeline(bundle, max_tokens=64).tokenize(TEXTS)
    search = HostPipeline(bundle, max_tokens=64, few_texts=True)
    got = search.tokenize(TEXTS[:3])
    assert search._subset is not None and search._tok is None  # no whole vocabulary loaded
    assert all(np.array_equal(a, b) for a, b in zip(got.ids, plain.ids[:3]))
    big = ["passage: " + "word " * 5000]  # an evaluation, not a search: the whole tokenizer, once
    assert np.array_equal(search.tokenize(big).ids[0], HostPipeline(bundle, max_tokens=64).tokenize(big).ids[0])
    assert search._subset is None and search._tok is not None


def test_small_or_other_vocabularies_are_not_prepared(tiny_bert_bundle, tiny_xlmr_bundle, monkeypatch):
    assert vocab_subset.prepare(Bundle.open(tiny_xlmr_bundle)) is None  # 700 pieces: loaded whole
    monkeypatch.setattr(vocab_subset, "MIN_VOCAB", 0)
    assert vocab_subset.prepare(Bundle.open(tiny_bert_bundle)) is None  # WordPiece: not a Unigram
    assert vocab_subset.prepare(Bundle.open(tiny_bert_bundle)) is None  # and remembered as such


def test_a_damaged_prepared_table_falls_back_to_the_whole_tokenizer(tiny_xlmr_bundle, small_threshold):
    bundle = Bundle.open(tiny_xlmr_bundle)
    folder = vocab_subset.prepare(bundle)
    (folder / "vocab.sqlite").write_bytes(b"not a database" * 100)
    got = HostPipeline(bundle, max_tokens=64, few_texts=True).tokenize(TEXTS)
    want = HostPipeline(bundle, max_tokens=64).tokenize(TEXTS)
    assert all(np.array_equal(a, b) for a, b in zip(got.ids, want.ids))

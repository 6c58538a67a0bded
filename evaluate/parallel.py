"""The bundled multilingual parallel set (``evaluate/data/parallel.tsv``), written for hefsearch.

168 sentence pairs in 11 languages (en, de, fr, es, it, pt, nl, pl, ru, ja, zh), 16 per
language pair (8 for de-fr). In each language pair, two groups of two rows are *near-duplicates*:
the sentences differ in one number, a negation, an entity or who did what to whom
("The invoice must be paid within 14 days." / "... 30 days."). They are the hard negatives
that an 8-bit encoder confuses first.

Columns: ``lang_a``, ``lang_b``, ``text_a``, ``text_b``, ``group``; rows sharing a ``group``
are near-duplicates of each other; every other group has one row. Lines starting with ``#``
are comments.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from importlib import resources
from pathlib import Path


@dataclass(frozen=True)
class ParallelPair:
    lang_a: str
    lang_b: str
    text_a: str
    text_b: str
    group: str

    @property
    def language_pair(self) -> str:
        return f"{self.lang_a}-{self.lang_b}"


def load_parallel(path: str | Path | None = None) -> list[ParallelPair]:
    """The bundled set, or a TSV of the same shape at ``path``."""
    if path is None:
        text = resources.files("hefsearch.evaluate").joinpath("data/parallel.tsv").read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    reader = csv.DictReader(io.StringIO("\n".join(lines)), delimiter="\t", quoting=csv.QUOTE_NONE)
    need = {"lang_a", "lang_b", "text_a", "text_b", "group"}
    if not need <= set(reader.fieldnames or ()):
        raise ValueError(f"parallel set {path or 'parallel.tsv'} needs the columns {sorted(need)}")
    return [ParallelPair(r["lang_a"], r["lang_b"], r["text_a"], r["text_b"], r["group"]) for r in reader]


def by_language_pair(pairs: list[ParallelPair]) -> dict[str, list[int]]:
    """Row indexes per language pair ("en-de" -> [...]), in file order."""
    out: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        out.setdefault(p.language_pair, []).append(i)
    return out


def near_duplicate_rows(pairs: list[ParallelPair]) -> list[int]:
    """Indexes of rows whose group has more than one row."""
    counts: dict[str, int] = {}
    for p in pairs:
        counts[p.group] = counts.get(p.group, 0) + 1
    return [i for i, p in enumerate(pairs) if counts[p.group] > 1]


def languages(pairs: list[ParallelPair]) -> list[str]:
    return sorted({p.lang_a for p in pairs} | {p.lang_b for p in pairs})

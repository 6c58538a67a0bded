"""cli/render.py: the search table draws a row where relevance ends, between the last hit above
the line and the first below it; none when every hit is above it or no line was drawn."""

from __future__ import annotations

from rich.console import Console

from hefsearch.cli.render import hits_table
from hefsearch.search.searcher import Hit


def _hits(n: int) -> list[Hit]:
    return [Hit(rank=i, chunk_id=i, score=0.9 - i / 100, path=f"/docs/file{i}.txt", page=None, line=1,
                start=0, end=10, snippet=f"snippet {i}", text="t", doc_kind="text", similarity=0.9 - i / 100)
            for i in range(1, n + 1)]


def _shown(table) -> str:
    con = Console(record=True, width=140)
    con.print(table)
    return con.export_text()


def test_the_line_falls_between_the_hits_above_and_below_it():
    line = {"above": 2, "cut": 4.5, "median": 0.8, "spread": 0.004, "threshold": 0.818}
    out = _shown(hits_table(_hits(4), line))
    at = out.index("weaker matches below (cosine under 0.818)")
    assert out.index("file2.txt") < at < out.index("file3.txt")
    assert out.count("weaker matches below") == 1


def test_no_row_when_all_hits_are_above_or_there_is_no_line():
    assert "weaker" not in _shown(hits_table(_hits(3), {"above": 3, "cut": 4.5, "median": 0.8,
                                                        "spread": 0.004, "threshold": 0.818}))
    assert "weaker" not in _shown(hits_table(_hits(3), None))
    # nothing stands out: the row comes first
    out = _shown(hits_table(_hits(2), {"above": 0, "cut": 4.5, "median": 0.8, "spread": 0.004, "threshold": 0.95}))
    assert out.index("weaker matches below") < out.index("file1.txt")

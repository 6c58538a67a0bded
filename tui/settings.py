"""What the user chose when starting the TUI (the ``tui`` command's options), as one frozen
value. No Textual here: the command builds it, the app reads it."""

from __future__ import annotations

from dataclasses import dataclass

DARK, LIGHT = "textual-dark", "textual-light"


@dataclass(frozen=True)
class TuiSettings:
    #: results per query (and per side in the compare view)
    k: int = 10
    #: initial search mode, one of hefsearch.search.searcher.MODES (F2 cycles through them)
    mode: str = "hybrid"
    #: search as you type (debounced), not only on Enter
    live: bool = False
    #: start with the light theme (F6 toggles)
    light: bool = False
    #: chunks shown before and after the hit in the preview
    neighbours: int = 2
    #: list every matching chunk (several of one file, copies unfolded), not one hit per file
    all_chunks: bool = False
    #: FP32 re-rank depth of searches (None: the default for the space searched, 0: off)
    rerank: int | None = None

    @property
    def theme(self) -> str:
        return LIGHT if self.light else DARK

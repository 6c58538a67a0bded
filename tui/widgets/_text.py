"""Theme-aware text building shared by the widgets (styles use Textual theme variables, so
dark and light themes both stay readable)."""

from __future__ import annotations

from typing import Sequence

from textual.content import Content

from ..present import term_spans

MATCH_STYLE = "bold $text-accent on $accent-muted"


def highlighted(text: str, terms: Sequence[str], base: str = "") -> Content:
    content = Content(text)
    if base:
        content = content.stylize(base)
    for start, end in term_spans(text, terms):
        content = content.stylize(MATCH_STYLE, start, end)
    return content


"""Glue between the ``tui`` command and the library that needs no Textual: which encoders a
re-index started from the TUI embeds with (the same choice ``hefsearch index`` makes)."""

from __future__ import annotations

import logging
from typing import Callable

log = logging.getLogger("hefsearch.tui")


def open_sync_encoders(library) -> list:
    """Encoders for every space of ``library`` that can be opened here, the default space's
    first (sync chunks with the first one); see :mod:`hefsearch.index.encoders`."""
    from hefsearch.index.encoders import open_sync_encoders as choose

    choice = choose(library)
    for name, why in choice.skipped_spaces:
        log.warning("re-index leaves space %s as it is: %s", name, why)
    return choice.encoders


def sync_encoder_opener(library) -> Callable[[], list]:
    return lambda: open_sync_encoders(library)

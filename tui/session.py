"""Glue between the ``tui`` command and the library that needs no Textual: which encoders a
re-index started from the TUI embeds with."""

from __future__ import annotations

from typing import Callable

from hefsearch.embed.errors import HefsearchError


def open_sync_encoders(library) -> list:
    """One encoder per space of ``library``, opened as the space was built (bundle from the
    library settings, the space's backend and options). The default space comes first: sync
    chunks with the first encoder."""
    from hefsearch.embed.encoder import Encoder

    bundle = library.settings().get("bundle")
    if not bundle:
        raise HefsearchError("This library does not record its model bundle.",
                             "Re-index once from the command line: hefsearch index PATH --bundle BUNDLE")
    infos = library.spaces()
    default = library.settings().get("default_space")
    infos.sort(key=lambda info: info.name != default)
    encoders = []
    try:
        for info in infos:
            encoders.append(Encoder.open(bundle, backend=info.backend, **(info.backend_opts or {})))
    except BaseException:
        for enc in encoders:
            enc.close()
        raise
    return encoders


def sync_encoder_opener(library) -> Callable[[], list]:
    return lambda: open_sync_encoders(library)

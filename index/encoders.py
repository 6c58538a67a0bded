"""Which encoders a sync uses, so every space of a library stays complete.

The first encoder is the one chosen (``--backend``, or the backend of the library's default
space when ``auto`` and the library already has spaces); then every other existing space is
kept up to date with its own backend if it can be opened here; ``also_fp32`` adds the CPU FP32
space. A space whose backend cannot be opened on this machine is left as it is and reported.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from hefsearch.embed.errors import BackendUnavailable, HefsearchError
from hefsearch.embed.space_names import FP32_SPACE

from .errors import LibraryError

log = logging.getLogger("hefsearch.index")


@dataclass
class EncoderChoice:
    encoders: list = field(default_factory=list)
    #: (space name, why it is not updated by this sync)
    skipped_spaces: list[tuple[str, str]] = field(default_factory=list)
    bundle: str = ""

    def close(self) -> None:
        for enc in self.encoders:
            try:
                enc.close()
            except Exception:  # pragma: no cover
                pass


def resolve_bundle(library, bundle: str | Path | None) -> str:
    """The bundle given, else ``$HEFSEARCH_BUNDLE`` (for callers without a --bundle option,
    such as the TUI), else the one the library records (``settings()["bundle"]``, written by
    each sync); an error that says what to pass when none is usable."""
    bundle = bundle or os.environ.get("HEFSEARCH_BUNDLE")
    if bundle:
        return str(Path(bundle).expanduser().resolve())
    recorded = library.settings().get("bundle")
    if recorded and not Path(recorded).exists():  # moved or deleted since the library was built
        raise LibraryError(
            f"The library {library.path} was built with the bundle at {recorded}, which is gone.",
            "Pass --bundle PATH (or set HEFSEARCH_BUNDLE) with the bundle's new place; "
            "'hefsearch index FOLDER --bundle PATH' also records it for next time. It must be that "
            "same bundle (or a copy of it): the library's vectors were made with it.")
    if recorded:
        return recorded
    raise LibraryError(
        f"No model bundle given and the library {library.path} does not record one yet.",
        "Pass --bundle BUNDLE (made by 'hefsearch compile export'), or set HEFSEARCH_BUNDLE.")


def open_sync_encoders(library, *, bundle: str | Path | None = None, backend: str | None = "auto",
                       also_fp32: bool = False, first=None, **backend_opts) -> EncoderChoice:
    """``first``: the chosen backend's encoder already opened elsewhere (a Ray pool,
    :mod:`hefsearch.index.ray_pool`); the spaces it embeds too (its ``companions``: the CPU FP32
    one) come from it, the other spaces' encoders are still opened here."""
    from hefsearch.embed.encoder import Encoder

    choice = EncoderChoice(bundle=resolve_bundle(library, bundle))
    spaces = {s.name: s for s in library.spaces()}
    default = library.settings().get("default_space")
    if first is None and backend in (None, "auto") and default in spaces:
        info = spaces[default]
        try:
            first = Encoder.open(choice.bundle, backend=info.backend, bulk=True,
                                 **{**info.backend_opts, **backend_opts})
            first.backend_reason = f"{info.backend} (the backend of the library's default space {default!r})"
        except BackendUnavailable as e:
            raise BackendUnavailable(
                f"The library's default space {default!r} needs the {info.backend} backend: {e.message}",
                f"Index with --backend cpu to fill the cpu-fp32 space instead (the {default!r} "
                f"space then lags until its backend is back).") from e
    elif first is None:
        first = Encoder.open(choice.bundle, backend=backend, bulk=True, **backend_opts)
    choice.encoders.append(first)
    choice.encoders += list(getattr(first, "companions", ()))  # embedded with the first (Ray actors)
    kinds = {enc.space_name for enc in choice.encoders}
    try:
        for name, info in spaces.items():
            if name in kinds:
                continue
            try:
                enc = Encoder.open(choice.bundle, backend=info.backend, bulk=True, **info.backend_opts)
            except HefsearchError as e:
                choice.skipped_spaces.append((name, e.message))
                log.warning("space %s is not updated: %s", name, e.message)
                continue
            if enc.fingerprint != info.fingerprint:
                choice.skipped_spaces.append((name, "this bundle/backend builds other vectors"))
                enc.close()
                continue
            choice.encoders.append(enc)
            kinds.add(name)
        if also_fp32 and FP32_SPACE not in kinds:
            choice.encoders.append(Encoder.open(choice.bundle, backend="cpu", bulk=True))
    except BaseException:
        choice.close()
        raise
    return choice


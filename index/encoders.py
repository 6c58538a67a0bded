"""Which encoders a sync uses, so every space of a library stays complete.

The first encoder is the one chosen (``--backend``, or the backend of the library's default
space when ``auto`` and the library already has spaces); then every other existing space is
kept up to date with its own backend if it can be opened here; ``also_fp32`` adds the CPU FP32
space. A space whose backend cannot be opened on this machine is left as it is and reported.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from hefsearch.base import settings
from hefsearch.base.errors import BackendUnavailable, HefsearchError
from hefsearch.embed.space_names import FP32_SPACE

from .errors import LibraryError

log = logging.getLogger("hefsearch.index")


@dataclass
class EncoderChoice:
    encoders: list = field(default_factory=list)
    #: (space name, why it is not updated by this sync)
    skipped_spaces: list[tuple[str, str]] = field(default_factory=list)
    bundle: str = ""
    bundle_source: str = "given"
    #: where the bundle came from when the user did not name it (:meth:`BundleChoice.note`)
    bundle_note: str | None = None

    def close(self) -> None:
        for enc in self.encoders:
            try:
                enc.close()
            except Exception:  # pragma: no cover
                pass


#: in hefsearch's data folder: the default bundle (see :func:`remember_default_bundle`), used
#: when neither the command nor the library names one
DEFAULT_BUNDLE_FILE = "default-bundle.json"


@dataclass(frozen=True)
class BundleChoice:
    path: str
    #: "given" (--bundle), "env" (HEFSEARCH_BUNDLE), "library" (the one it was built with),
    #: "default" (the user's default bundle, see :func:`remember_default_bundle`)
    source: str
    #: for "default": the library whose run made it the default ("" when not recorded)
    remembered_from: str = ""

    def note(self) -> str | None:
        """A line saying where the bundle came from when the user did not name it."""
        if self.source == "default":
            origin = f", remembered from the index run on {self.remembered_from}" if self.remembered_from else ""
            return f"bundle: {self.path} (the default bundle{origin}; --bundle picks another)"
        return None


def _default_bundle_file() -> Path:
    from hefsearch.base.locations import data_dir

    return data_dir() / DEFAULT_BUNDLE_FILE


def _remembered() -> dict:
    try:
        record = json.loads(_default_bundle_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def default_bundle() -> str | None:
    """The remembered default bundle, when it is still a bundle (has a manifest)."""
    path = _remembered().get("bundle")
    return path if isinstance(path, str) and path and (Path(path) / "manifest.json").is_file() else None


def remember_default_bundle(path: str | Path, library_path: str | Path) -> bool:
    """Make ``path`` the bundle a new library takes when none is named, when the run that was
    given it is on the default library, or when no default is remembered yet (``make demo``'s
    first bundle). A throwaway ``--library`` run never changes the default. Best effort;
    whether it was recorded."""
    from hefsearch.base.atomic_write import write_json_atomic

    from .library import resolve_library_path

    if default_bundle() is not None and Path(library_path).resolve() != resolve_library_path(None).resolve():
        return False
    target = _default_bundle_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(target, {"bundle": str(Path(path).resolve()), "library": str(Path(library_path))})
    except OSError as e:
        log.info("default bundle not recorded: %s", e)
        return False
    return True


def choose_bundle(library, bundle: str | Path | None) -> BundleChoice:
    """The bundle given, else ``$HEFSEARCH_BUNDLE`` (for callers without a --bundle option,
    such as the TUI), else the one the library records (``settings()["bundle"]``, written by
    each sync), else the default bundle (:func:`remember_default_bundle`); an
    error that says what to pass when none is usable. ``library`` may be None (``embed``)."""
    if bundle:
        return BundleChoice(str(Path(bundle).expanduser().resolve()), "given")
    env = settings.BUNDLE.value()
    if env:
        return BundleChoice(str(Path(env).expanduser().resolve()), "env")
    recorded = library.settings().get("bundle") if library is not None else None
    if recorded and not Path(recorded).exists():  # moved or deleted since the library was built
        raise LibraryError(
            f"The library {library.path} was built with the bundle at {recorded}, which is gone.",
            "Pass --bundle PATH (or set HEFSEARCH_BUNDLE) with the bundle's new place; "
            "'hefsearch index FOLDER --bundle PATH' also records it for next time. It must be that "
            "same bundle (or a copy of it): the library's vectors were made with it.")
    if recorded:
        return BundleChoice(recorded, "library")
    fallback = default_bundle()
    if fallback:
        return BundleChoice(fallback, "default", str(_remembered().get("library") or ""))
    where = f"the library {library.path} does not record one yet" if library is not None else "none is remembered"
    raise LibraryError(
        f"No model bundle given, and {where}.",
        "Pass --bundle BUNDLE (a folder made by 'hefsearch compile export'; 'make demo' builds one "
        "in demo-work/bundle-*), or set HEFSEARCH_BUNDLE. The library remembers the bundle it was "
        "built with.")


def resolve_bundle(library, bundle: str | Path | None) -> str:
    """The path of :func:`choose_bundle`."""
    return choose_bundle(library, bundle).path


def open_sync_encoders(library, *, bundle: str | Path | None = None, backend: str | None = "auto",
                       also_fp32: bool = False, first=None, **backend_opts) -> EncoderChoice:
    """``first``: the chosen backend's encoder already opened elsewhere (a Ray pool,
    :mod:`hefsearch.index.ray_pool`); the spaces it embeds too (its ``companions``: the CPU FP32
    one) come from it, the other spaces' encoders are still opened here."""
    from hefsearch.embed.encoder import Encoder
    from hefsearch.embed.reference import open_reference_encoder

    picked = choose_bundle(library, bundle)
    choice = EncoderChoice(bundle=picked.path, bundle_source=picked.source, bundle_note=picked.note())
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
            choice.encoders.append(open_reference_encoder(choice.bundle, bulk=True))
    except BaseException:
        choice.close()
        raise
    return choice


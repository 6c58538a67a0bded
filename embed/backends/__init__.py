"""Backends by name. Listing them imports nothing; each loads its SDK only when opened."""

from __future__ import annotations

import importlib
import logging

from hefsearch.base import settings
from hefsearch.base.errors import BackendUnavailable
from ..reference import REFERENCE_BACKEND

log = logging.getLogger("hefsearch.embed")

#: name -> "module:Class" relative to this package
REGISTRY: dict[str, str] = {
    "cpu": "cpu:CpuBackend",
    "cpu-int8": "cpu_int8:CpuInt8Backend",
    "hailo": "hailo:HailoBackend",
    "npu-sim": "npu_sim:NpuSimBackend",
}

ENV_BACKEND = settings.BACKEND.name


def backend_names() -> list[str]:
    return sorted(REGISTRY)


def load_backend_class(name: str):
    if name not in REGISTRY:
        raise BackendUnavailable(
            f"Unknown backend {name!r}.", f"Choose one of: auto, {', '.join(backend_names())}."
        )
    module, cls = REGISTRY[name].split(":")
    mod = importlib.import_module(f"{__name__}.{module}")
    return getattr(mod, cls)


#: accelerator backends that ``auto`` tries, in order, before falling back to the reference (``REFERENCE_BACKEND``)
AUTO_ORDER: list[str] = ["hailo"]


def resolve_backend_name(name: str | None, bundle) -> tuple[str, str]:
    """Turn ``auto`` (or None, or the environment override) into a concrete backend name.

    Returns (name, reason); the reason is logged and shown to the user. An accelerator
    backend class answers ``available(bundle) -> (ok, why)`` without side effects.
    """
    requested = name or settings.BACKEND.value() or "auto"
    if requested != "auto":
        env = settings.BACKEND.value()
        # click hands the environment value in as the option, so compare to tell them apart
        how = f"${ENV_BACKEND}" if not name or name == "auto" or name == env else "--backend"
        load_backend_class(requested)  # unknown names fail here, with the list
        return requested, f"{requested} (chosen by {how})"
    reasons = []
    for cand in AUTO_ORDER:
        if cand not in REGISTRY:
            continue
        ok, why = load_backend_class(cand).available(bundle)
        if ok:
            log.info("backend: %s (auto: %s)", cand, why)
            return cand, f"{cand} (auto: {why})"
        reasons.append(f"{cand}: {why}")
    why = "; ".join(reasons) or "no accelerator backend installed"
    log.info("backend: %s (auto: %s)", REFERENCE_BACKEND, why)
    return REFERENCE_BACKEND, f"{REFERENCE_BACKEND} (auto: {why})"


def open_backend(name: str, bundle, **opts):
    return load_backend_class(name).open(bundle, opts)

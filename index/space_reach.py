"""Which vector spaces this machine can search, and how (``status``, ``doctor``, an import).

A space is searched only through an encoder of its own fingerprint (``Space.check_encoder``
refuses any other, never mixing vectors). Here: whether its backend runs on this machine and
the bundle holds its model; else why, and what searches use instead (the FP32 space on the CPU,
or ``backfill`` to make one). The full fingerprint is checked by the first search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from hefsearch.embed.space_names import FP32_SPACE


@dataclass
class SpaceReach:
    """Whether this machine can search a space, and how (or what to do instead)."""

    name: str
    backend: str
    searchable: bool
    how: str


def space_reach(infos: Sequence, bundle=None, bundle_problem: str | None = None) -> list[SpaceReach]:
    """Each space (:class:`~.spaces.SpaceInfo`) judged with ``bundle`` (an opened Bundle, or
    None with ``bundle_problem`` saying why there is none)."""
    from hefsearch.embed.backends import load_backend_class

    if bundle is None:
        why = (bundle_problem or "no bundle given").rstrip(".")
        return [SpaceReach(i.name, i.backend, False, f"no model bundle here ({why}); keyword search still "
                           "works; give --bundle with a copy of the bundle that built it") for i in infos]
    fp32 = next((i.name for i in infos if i.name == FP32_SPACE or i.kind == FP32_SPACE), None)
    out = []
    for info in infos:
        if (info.parts or {}).get("model_hash") not in (None, bundle.model_hash):
            out.append(SpaceReach(info.name, info.backend, False, f"the bundle {bundle.path} holds another "
                                  "model; give --bundle with the one that built this space"))
            continue
        ok, why = True, "on the CPU"
        if info.backend == "hailo":
            try:
                ok, why = load_backend_class("hailo").available(bundle)
            except Exception as e:  # an SDK that fails to load is a reason, not a crash
                ok, why = False, str(e)
            why = f"on the Hailo NPU ({why})" if ok else why
        if ok:
            how = why
        elif fp32 and fp32 != info.name:
            how = f"{why}; searches use the FP32 space {fp32} on the CPU instead"
        else:
            how = f"{why}; run 'hefsearch backfill' to make an FP32 space the CPU can search"
        out.append(SpaceReach(info.name, info.backend, ok, how))
    return out


def library_reach(library, bundle: str | None = None) -> list[SpaceReach]:
    """:func:`space_reach` for an open library, with the bundle it would search with."""
    from hefsearch.embed.bundle import Bundle

    from .encoders import choose_bundle

    infos = library.spaces()
    if not infos:
        return []
    try:
        opened = Bundle.open(choose_bundle(library, bundle).path)
    except Exception as e:  # HefsearchError mostly: a missing or moved bundle
        return space_reach(infos, None, getattr(e, "message", str(e)))
    return space_reach(infos, opened)

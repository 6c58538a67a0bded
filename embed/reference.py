"""The reference encoder: the bundle's FP32 body on the CPU, named and opened in one place.

Every caller that needs the FP32 reference (re-ranking, semantic snippets, back-fill, the FP32
space a sync adds beside an NPU space, ``bench quality``, ``doctor --verify``, the export's
check against torch) opens it here, so which backend is "the reference" is written once:

    with open_reference_encoder(bundle) as enc:
        vecs = enc.encode_passages(texts)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .encoder import Encoder

#: the registry name of the FP32 reference backend (embed/backends/__init__.py: REGISTRY)
REFERENCE_BACKEND = "cpu"


def open_reference_encoder(bundle, **opts) -> "Encoder":
    """``Encoder.open(bundle, backend=REFERENCE_BACKEND, **opts)``: the FP32 reference.

    ``opts`` are the backend's options (``threads``, ``batch_size``, ``bulk``, ``providers``,
    ``post_transform``)."""
    from .encoder import Encoder  # the encoder imports the backends; keep this module light

    return Encoder.open(bundle, backend=REFERENCE_BACKEND, **opts)

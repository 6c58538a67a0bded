"""``hefsearch embed`` as an operation: texts in, one vector each out, with the bundle chosen
the way every command chooses it (given, ``$HEFSEARCH_BUNDLE``, else the remembered default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from .requests import EmbedRequest

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from hefsearch.index.encoders import BundleChoice


def choose_embed_bundle(bundle: str | None) -> "BundleChoice":
    """The bundle an ``embed`` uses (no library to ask); an error saying what to pass when none."""
    from hefsearch.index.encoders import choose_bundle

    return choose_bundle(None, bundle)


@dataclass
class EmbedResult:
    vectors: "np.ndarray"
    #: texts longer than the bundle's window, cut to it
    truncated: int
    #: empty texts (zero vectors)
    empty: int


def embed_texts(request: EmbedRequest, texts: Sequence[str], say: Callable[[str], None] | None = None) -> EmbedResult:
    """One vector per text; ``say`` hears which backend encodes them ("backend: ...") once it is open."""
    from hefsearch.embed import Encoder

    # many texts: let an NPU take them in device batches (a single query stays at batch 1)
    opts = {"batch_size": request.batch_size, "bulk": len(texts) > 1}
    if request.threads:
        opts["threads"] = request.threads
    with Encoder.open(request.bundle, backend=request.backend, **opts) as enc:
        if say is not None:
            say(f"backend: {enc.backend_reason}")
        vectors = enc.encode_queries(texts) if request.query else enc.encode_passages(texts)
        stats = enc.stats
    return EmbedResult(vectors, stats.truncated, stats.empty)

"""Derive a mean-centred copy of a vector space (opt-in; see embed/post_transform.py).

The new space holds the source space's stored vectors with the library mean subtracted and
re-normalised: no text is re-encoded. Its fingerprint includes the transform, and its backend
options carry the transform's spec, so searches and later syncs encode with the same transform.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hefsearch.embed.post_transform import MeanCentering

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.spaces import Space


def center_space(library: "Library", source: str, encoder: "Encoder", *, name: str | None = None) -> "Space":
    """Fit mean-centering on ``source``'s vectors and write them, centred, into a new space
    (default name ``<source>-centered``). ``encoder`` is the source space's encoder; the new
    space's encoder shares its backend."""
    from hefsearch.embed.encoder import Encoder

    src = library.space(source)
    src.check_encoder(encoder)
    ids = sorted(library.member_ids(source))
    vecs = src.vectors(ids)
    mc = MeanCentering.fit(vecs)
    centred = Encoder(encoder.bundle, encoder.backend, backend_reason=encoder.backend_reason, post_transform=mc)
    opts = {**(src.info.backend_opts or {}), "post_transform": mc.to_spec()}
    space = library.ensure_space(centred, name or f"{source}-centered", backend_opts=opts)
    space.add(ids, mc.apply(vecs))
    return space

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
    src = library.space(source)
    src.check_encoder(encoder)
    ids = library.member_ids(source).tolist()
    vecs = src.vectors(ids)
    mc = MeanCentering.fit(vecs)
    return write_derived_space(library, src.info, encoder, mc, name or f"{source}-centered", ids, mc.apply(vecs))


def write_derived_space(library: "Library", source_info, encoder: "Encoder", transform, name: str,
                        ids, vectors) -> "Space":
    """Create space ``name`` whose encoder is ``encoder``'s backend plus ``transform`` (its spec
    joins the source's backend options, so searches and later syncs encode the same way) and
    store ``vectors`` (already transformed) for chunk ``ids``."""
    from hefsearch.embed.encoder import Encoder

    derived = Encoder(encoder.bundle, encoder.backend, backend_reason=encoder.backend_reason,
                      post_transform=transform)
    opts = {**(source_info.backend_opts or {}), "post_transform": transform.to_spec()}
    space = library.ensure_space(derived, name, backend_opts=opts)
    space.add(ids, vectors)
    return space

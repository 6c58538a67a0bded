"""Write a derived vector space: a source space's stored vectors under a post-transform.

Nothing is re-encoded. The derived space's encoder is the source's backend plus the transform,
whose spec joins the space's backend options and whose description joins its fingerprint, so
searches and later syncs encode the same way and vectors with and without it never mix. Used by
the language-neutral spaces (:mod:`hefsearch.search.language_neutral`); the transforms live in
:mod:`hefsearch.embed.post_transform`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.spaces import Space


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

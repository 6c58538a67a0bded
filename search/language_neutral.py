"""Language-neutral spaces: cross-lingual hits ranked first.

A multilingual encoder puts a language component in every vector, so a query's same-language
neighbours outrank the right document in another language. ``<source>-neutral`` is a space
derived from ``source`` with the :class:`~hefsearch.embed.post_transform.LanguageNeutral`
post-transform: every chunk and query moves by ``alpha`` times its language's offset from the
library mean and is re-normalised (languages from ``embed/language.py``, offsets from the
library's own chunks; text without a language, e.g. codes, is not moved). The transform is part
of the space's fingerprint and stored with it, so searches and later syncs use the same
offsets and vectors with and without it never mix.

:func:`refresh_neutral_spaces` re-fits a neutral space when its library has changed by
:data:`REFIT_GROWTH` of the chunks it was fitted on, or a language reached :data:`MIN_CHUNKS`
chunks without an offset; the stored vectors are turned back exactly (``LanguageNeutral.invert``)
and written anew, so nothing is re-encoded. Whether a library searches the neutral space by
default is decided by :func:`keep_language_neutral` (on for a multilingual bundle:
``Bundle.multilingual``). Figures, and why alpha 0.5 and 5 chunks: docs/searching.md,
docs/performance.md. Every neutral space also carries the hub correction (``HubCorrection``,
:data:`HUB_BETA`): queries lose a quarter of the mean query direction, fitted on
:func:`reference_queries`; a space made before it is re-fitted at the next sync.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from hefsearch.base.errors import HefsearchError
from hefsearch.embed.post_transform import LanguageNeutral, from_spec

from .derived_space import write_derived_space

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.spaces import Space, SpaceInfo

log = logging.getLogger("hefsearch.search")

#: fraction of each language offset removed (chosen by bench/crosslingual.py)
DEFAULT_ALPHA = 0.5
#: a language needs this many chunks before it gets an offset (fewer: its mean is mostly topic)
MIN_CHUNKS = 5
#: re-fit when the library's chunk count moved this much from the fitted count
REFIT_GROWTH = 0.25
#: how much of the mean query direction the hub correction takes off queries (bench/hubness.py,
#: docs/searching.md "Hubs and long passages")
HUB_BETA = 0.25
NEUTRAL_SUFFIX = LanguageNeutral.space_suffix  # embed.space_names.NEUTRAL_SUFFIX


class LanguageNeutralError(HefsearchError):
    title = "language-neutral space"


def neutral_space_name(source: str) -> str:
    return f"{source}{NEUTRAL_SUFFIX}"


def neutral_transform(info: "SpaceInfo") -> LanguageNeutral | None:
    """The language-neutral transform a space was built with, or None."""
    spec = (info.backend_opts or {}).get("post_transform")
    if isinstance(spec, dict) and spec.get("kind") == LanguageNeutral.kind:
        return from_spec(spec)
    return None


def chunk_languages(library: "Library", ids: Sequence[int]) -> list[str | None]:
    """The language of each chunk (in the order of ``ids``; None when unsure): as stored at
    indexing (``chunks.lang``), detected here only for chunks stored without one."""
    from hefsearch.embed.language import identify_all

    from hefsearch.index import documents

    ids = [int(i) for i in ids]
    stored = documents.stored_languages(library.query, ids)
    missing = [i for i in ids if stored.get(i, (None, ""))[0] is None]
    found = dict(zip(missing, identify_all(stored.get(i, (None, ""))[1] for i in missing)))
    return [found[i] if i in found else (stored[i][0] or None) for i in ids]


def languages_with_offsets(library: "Library", source: str, min_chunks: int = MIN_CHUNKS) -> list[str]:
    """The languages of ``source``'s chunks that would get an offset. Fewer than two: the
    library is (nearly) monolingual and a neutral space would change next to nothing."""
    counts = _count(chunk_languages(library, library.member_ids(source).tolist()))
    return sorted(lang for lang, n in counts.items() if n >= min_chunks)


def _count(languages) -> dict[str, int]:
    counts: dict[str, int] = {}
    for lang in languages:
        if lang:
            counts[lang] = counts.get(lang, 0) + 1
    return counts


def derive_neutral_space(library: "Library", source: str, encoder: "Encoder", *,
                         alpha: float = DEFAULT_ALPHA, min_chunks: int = MIN_CHUNKS,
                         name: str | None = None, hub_beta: float | None = HUB_BETA) -> "Space":
    """Fit the transform on ``source``'s vectors and chunk languages and write the moved
    vectors into a new space (default ``<source>-neutral``); ``encoder`` is ``source``'s
    encoder. No chunk is re-encoded; the hub correction (``hub_beta``; None: none) is fitted on
    the reference queries, which ``encoder`` embeds (:func:`reference_queries`)."""
    src = library.space(source)
    src.check_encoder(encoder)
    if not encoder.bundle.normalize:
        raise LanguageNeutralError(
            f"The bundle {encoder.bundle.path} does not normalise its vectors; the language-neutral "
            "transform works on unit vectors.", "Use a bundle exported with normalisation (the default).")
    ids = library.member_ids(source).tolist()
    if not ids:
        raise LanguageNeutralError(f"The space {source!r} holds no vectors yet.",
                                   "Index some folders first: hefsearch index FOLDER")
    vecs = src.vectors(ids)
    langs = chunk_languages(library, ids)
    ref = None if hub_beta is None else reference_queries(encoder)
    ln = LanguageNeutral.fit(vecs, langs, alpha=alpha, min_chunks=min_chunks, reference=ref,
                             beta=(hub_beta or 0.0) if ref is not None else 0.0)
    return write_derived_space(library, src.info, encoder, ln, name or neutral_space_name(source), ids,
                               ln.apply(vecs, languages=langs))


def refit_reason(transform: LanguageNeutral, chunks: int, counts: dict[str, int]) -> str | None:
    """Why a transform fitted earlier no longer fits a space of ``chunks`` chunks with ``counts``
    chunks per language (None: it still fits)."""
    if transform.hubs is None:
        return "no hub correction yet"
    fitted = transform.fitted_on or 0
    if fitted and abs(chunks - fitted) >= REFIT_GROWTH * fitted:
        return f"the space has {chunks} chunks, fitted on {fitted}"
    new = sorted(lang for lang, n in counts.items()
                 if n >= transform.min_chunks and lang not in transform.offsets)
    if new:
        return f"new language(s) with {transform.min_chunks}+ chunks: {', '.join(new)}"
    return None


@dataclass
class Refit:
    space: str
    reason: str
    languages: list[str]


def refresh_neutral_spaces(library: "Library", encoders: Sequence["Encoder"]) -> list[Refit]:
    """Re-fit every language-neutral space of ``library`` that needs it (:func:`refit_reason`).
    ``encoders``: open encoders, e.g. a sync's (``EncoderChoice.encoders``); a space is re-fitted
    only when one of them is its encoder (same fingerprint), which then gets the new transform."""
    done = []
    for info in library.spaces():
        old = neutral_transform(info)
        if old is None:
            continue
        enc = next((e for e in encoders if e.fingerprint == info.fingerprint), None)
        if enc is None:
            log.info("neutral space %s not refreshed: no open encoder builds it", info.name)
            continue
        ids = library.member_ids(info.name).tolist()
        langs = chunk_languages(library, ids)
        counts = _count(langs)
        reason = refit_reason(old, len(ids), counts)
        if reason is None:
            continue
        ref = reference_queries(enc)
        if ref is None and old.hubs is None and reason == "no hub correction yet":
            continue  # this run's encoder cannot fit it either (a Ray pool): a later sync will
        with library.write_lock():
            raw = old.invert(library.space(info.name).vectors(ids), languages=langs)
            new = LanguageNeutral.fit(raw, langs, alpha=old.alpha, min_chunks=old.min_chunks,
                                      reference=ref, beta=HUB_BETA if ref is not None else 0.0)
            library.drop_space(info.name)
            write_derived_space(library, info, enc, new, info.name, ids, new.apply(raw, languages=langs))
        enc.post_transform = new
        log.info("re-fitted language-neutral space %s: %s", info.name, reason)
        done.append(Refit(info.name, reason, list(new.offsets)))
    return done


def reference_queries(encoder: "Encoder") -> tuple | None:
    """(vectors, languages) of the built-in multilingual sample texts embedded as queries by
    ``encoder``'s own model, without any post-transform it carries: what the hub correction's
    mean query direction is fitted on. 36 short texts: well under a second on the CPU. None when
    the encoder cannot embed queries in this process (a Ray pool's: its actors embed passages
    only); the space is then fitted without the correction, and a later sync adds it."""
    from hefsearch.base.errors import HefsearchError
    from hefsearch.embed.language import identify_all
    from hefsearch.embed.samples import VERIFY_TEXTS

    texts = list(VERIFY_TEXTS)
    try:
        vectors = encoder.encode(texts, prefix=encoder.bundle.prefixes["query"], transform=False)
    except HefsearchError as e:
        log.info("no hub correction fitted with %s: %s", getattr(encoder, "space_name", "?"), e)
        return None
    return vectors, identify_all(texts)


def drop_neutral_space(library: "Library", name: str) -> None:
    """Remove a language-neutral space (and stop searching it by default)."""
    with library.write_lock():
        library.drop_space(name)
        if library.settings().get("default_space") == name:
            library.set_settings(default_space=None)


def source_encoders(encoders) -> list:
    """The encoders whose spaces a neutral space can be derived from: every encoder of a sync
    without a post-transform (an NPU, a simulation, CPU int8 or FP32), one per space."""
    out, seen = [], set()
    for e in encoders:
        if getattr(e, "post_transform", None) is None and e.space_name not in seen:
            seen.add(e.space_name)
            out.append(e)
    return out


def keep_language_neutral(library, encoders, wanted: bool | None) -> list[str]:
    """Derive, refresh or drop the language-neutral copy of every space a sync fills (the
    NPU's, a simulation's, CPU int8's, FP32's: each from its own vectors, never another's)
    after a sync (``wanted`` None: on for a multilingual bundle). Every sync calls it
    (``hefsearch index``, the TUI's re-index, the watcher). The library's default space moves
    to the neutral copy of the space it searched when that copy is first made. Returns lines
    to tell the user."""
    names = library.space_names()
    if wanted is False:
        lines = []
        for name in [n for n in names if n.endswith(NEUTRAL_SUFFIX)]:
            drop_neutral_space(library, name)
            lines.append(f"dropped the language-neutral space {name}")
        return lines
    lines = [f"re-fitted {r.space}: {r.reason}" for r in refresh_neutral_spaces(library, encoders)]
    sources = [e for e in source_encoders(encoders) if neutral_space_name(e.space_name) not in names]
    if wanted is None:
        sources = [e for e in sources if e.bundle.multilingual]
    if not sources:
        return lines
    default = library.settings().get("default_space")
    for enc in sources:
        languages = languages_with_offsets(library, enc.space_name)
        if len(languages) < 2:
            if wanted:
                lines.append(f"no language-neutral copy of {enc.space_name} yet: the library holds "
                             f"{len(languages)} language(s) with enough chunks")
            continue
        target = neutral_space_name(enc.space_name)
        derive_neutral_space(library, enc.space_name, enc)
        if default in (None, enc.space_name):
            library.set_settings(default_space=target)
            default = target
            lines.append(f"language-neutral space {target} ({', '.join(languages)}) is now the default for searches")
        else:
            lines.append(f"language-neutral space {target} ({', '.join(languages)}) derived")
    return lines

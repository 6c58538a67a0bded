"""The hub correction of the language-neutral transform (the mean query direction taken off
queries), and the hubness metrics that `bench quality` reports."""

from __future__ import annotations

import numpy as np
import pytest

from hefsearch.embed import metrics as M
from hefsearch.embed.post_transform import HubCorrection, LanguageNeutral, from_spec


def unit(v):
    v = np.asarray(v, np.float32)
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 0, n, 1)


def hubbed_library(seed: int = 0, n: int = 40, dim: int = 16):
    """Queries share a direction ``s`` (their prefix, their register) beside their topic; one
    "long passage" leans towards ``s``: near every query, the answer of none. Returns
    (documents, queries, reference queries of other topics)."""
    rng = np.random.default_rng(seed)
    shared = np.zeros(dim, np.float32)
    shared[0] = 1.0
    topics = unit(rng.normal(size=(n, dim)) * (np.arange(dim) > 0))
    docs = unit(topics + 0.2 * shared)
    hub = unit(1.5 * shared + 0.2 * unit(rng.normal(size=dim) * (np.arange(dim) > 0)))
    queries = unit(0.55 * topics + 1.0 * shared + 0.1 * rng.normal(size=(n, dim)))
    reference = unit(0.55 * unit(rng.normal(size=(3 * n, dim)) * (np.arange(dim) > 0)) + 1.0 * shared)
    return np.vstack([docs, hub[None]]), queries, reference


def test_fit_and_apply_by_hand():
    h = HubCorrection.fit(np.array([[1, 0], [0, 1], [0, 0]], np.float32), 0.5)  # the zero row is left out
    assert np.allclose(h.mean, [0.5, 0.5]) and h.reference == 2
    out = h.apply(np.array([[1, 0], [0, 0]], np.float32))
    assert np.allclose(out[0], unit([0.75, -0.25])) and np.all(out[1] == 0)  # an empty query stays empty
    assert HubCorrection.from_spec(h.to_spec()).describe() == h.describe()


def test_the_correction_unseats_a_hub_and_ranks_the_answers():
    docs, queries, reference = hubbed_library()
    n = len(queries)
    raw_top = np.argmax(queries @ docs.T, axis=1)
    fixed_top = np.argmax(HubCorrection.fit(reference, 0.5).apply(queries) @ docs.T, axis=1)
    assert (raw_top == n).mean() > 0.5  # the hub comes first for most queries before
    assert (fixed_top == n).mean() <= 0.1
    assert (fixed_top == np.arange(n)).mean() >= 0.8 > (raw_top == np.arange(n)).mean()


def test_language_neutral_moves_queries_only_and_changes_the_fingerprint():
    rng = np.random.default_rng(2)
    v = unit(rng.normal(size=(30, 6)))
    langs = ["de"] * 15 + ["fr"] * 15
    ref, ref_langs = unit(rng.normal(size=(10, 6))), ["de"] * 10
    plain = LanguageNeutral.fit(v, langs, alpha=0.5, min_chunks=5)
    hubs = LanguageNeutral.fit(v, langs, alpha=0.5, min_chunks=5, reference=(ref, ref_langs), beta=0.5)
    assert plain.hubs is None and hubs.hubs.beta == 0.5
    # fitted on the reference queries after their own language move
    assert np.allclose(hubs.hubs.mean, plain.apply(ref, languages=ref_langs).mean(axis=0), atol=1e-6)
    assert "hub_correction" not in plain.describe()  # older spaces' fingerprints stay valid
    assert hubs.describe()["hub_correction"]["reference_queries"] == 10
    again = from_spec(hubs.to_spec())
    assert again.describe() == hubs.describe()
    # passages (stored vectors) move as before; queries also lose the mean query direction
    assert np.allclose(hubs.apply(v, languages=langs), plain.apply(v, languages=langs), atol=1e-6)
    q = hubs.apply(v, languages=langs, passages=False)
    assert np.allclose(q, hubs.hubs.apply(plain.apply(v, languages=langs)), atol=1e-6)
    assert np.allclose(again.apply(v, languages=langs, passages=False), q, atol=1e-6)
    # stored passages can still be turned back for a re-fit
    assert np.allclose(hubs.invert(hubs.apply(v, languages=langs), languages=langs), v, atol=1e-5)


def test_k_occurrence_skewness_and_hub_share_see_a_hub():
    rng = np.random.default_rng(3)
    spread = unit(rng.normal(size=(80, 16)))
    hubbed = spread.copy()
    hubbed[:, 0] += 1.5  # a common direction: a few rows become everyone's neighbours
    assert M.k_occurrence_skewness(unit(hubbed), k=5) > M.k_occurrence_skewness(spread, k=5) + 0.5
    top1 = [3, 3, 3, 1, 2, 3, None]
    relevant = [{0}, {1}, {3}, {1}, {2}, {4}, {5}]
    # wrong answers: 3, 3, 3 (queries 0, 1, 5): the hub holds 3 of 7 first places
    assert M.hub_share(top1, relevant) == pytest.approx(3 / 7)
    assert M.hub_share([1, 2, 2], None, hubs=1) == pytest.approx(2 / 3)
    assert M.hub_share([1, 2], [{1}, {2}]) == 0.0
    assert np.isnan(M.k_occurrence_skewness(spread[:5], k=10))


def test_reference_queries_are_the_models_own_vectors_without_the_transform(tiny_bert_bundle):
    from hefsearch.embed import Encoder
    from hefsearch.embed.samples import VERIFY_TEXTS
    from hefsearch.search.language_neutral import reference_queries

    with Encoder.open(tiny_bert_bundle, "cpu", threads=1) as enc:
        plain = enc.encode_queries(VERIFY_TEXTS)
        ref, langs = reference_queries(enc)
        ln = LanguageNeutral.fit(plain, langs, alpha=0.5, min_chunks=1, reference=(ref, langs), beta=0.25)
        enc.post_transform = ln
        again, _ = reference_queries(enc)  # the neutral space's encoder: its transform is left out
        moved = enc.encode_queries(VERIFY_TEXTS)
        assert enc.post_transform is ln
    assert len(langs) == len(VERIFY_TEXTS) and "de" in langs
    assert np.allclose(ref, plain, atol=1e-6) and np.allclose(again, plain, atol=1e-6)
    assert np.allclose(moved, ln.apply(plain, languages=langs, passages=False), atol=1e-5)

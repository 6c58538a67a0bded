"""The hub correction of the language-neutral transform (mean and top principal directions
removed), and the hubness metrics that `bench quality` reports."""

from __future__ import annotations

import numpy as np
import pytest

from hefsearch.embed import metrics as M
from hefsearch.embed.post_transform import HubCorrection, LanguageNeutral, from_spec


def unit(v):
    v = np.asarray(v, np.float32)
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 0, n, 1)


def hubbed_library(seed: int = 0, n: int = 60, dim: int = 16):
    """Topic vectors sharing a strong common direction, plus one "long passage" that is mostly
    that direction: near every query, the answer of none."""
    rng = np.random.default_rng(seed)
    common = np.zeros(dim, np.float32)
    common[0] = 1.0
    topics = rng.normal(size=(n, dim)).astype(np.float32)
    topics[:, 0] = 0.0
    docs = unit(3.0 * common + unit(topics))
    hub = unit(3.0 * common + 0.1 * unit(rng.normal(size=dim)))
    queries = unit(3.0 * common + 0.3 * unit(topics) + 0.2 * unit(rng.normal(size=(n, dim))))
    return np.vstack([docs, hub[None]]), queries


def test_fit_removes_the_mean_and_the_top_direction():
    rng = np.random.default_rng(1)
    v = unit(rng.normal(size=(200, 8)) * np.array([5, 1, 1, 1, 1, 1, 1, 1]) + np.array([0, 3, 0, 0, 0, 0, 0, 0]))
    h = HubCorrection.fit(v, 1)
    assert np.allclose(h.mean, v.mean(axis=0), atol=1e-5)
    assert abs(abs(h.directions[0][0]) - 1.0) < 0.05  # the axis of largest variance
    out = h.apply(v)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert np.abs(out @ h.directions[0]).max() < 1e-5  # nothing left along it
    assert np.all(h.apply(np.zeros((2, 8), np.float32)) == 0)  # empty texts match nothing


def test_the_correction_spreads_a_collapsed_library():
    docs, _ = hubbed_library()
    out = HubCorrection.fit(docs, 0).apply(docs)
    assert M.mean_pairwise_cosine(docs) > 0.8 and abs(M.mean_pairwise_cosine(out)) < 0.05


def test_language_neutral_with_hubs_round_trips_and_changes_the_fingerprint():
    rng = np.random.default_rng(2)
    v = unit(rng.normal(size=(30, 6)))
    langs = ["de"] * 15 + ["fr"] * 15
    plain = LanguageNeutral.fit(v, langs, alpha=0.5, min_chunks=5)
    hubs = LanguageNeutral.fit(v, langs, alpha=0.5, min_chunks=5, hub_directions=2)
    assert plain.hubs is None and len(hubs.hubs.directions) == 2
    assert "hub_correction" not in plain.describe()  # older spaces' fingerprints stay valid
    assert hubs.describe()["hub_correction"]["directions"] == 2
    again = from_spec(hubs.to_spec())
    assert again.describe() == hubs.describe()
    assert np.allclose(again.apply(v, languages=langs), hubs.apply(v, languages=langs), atol=1e-6)
    assert np.allclose(hubs.apply(v, languages=langs), hubs.hubs.apply(plain.apply(v, languages=langs)), atol=1e-5)
    # queries only move off their language
    assert np.allclose(hubs.apply(v, languages=langs, passages=False), plain.apply(v, languages=langs), atol=1e-6)
    with pytest.raises(ValueError, match="cannot be inverted"):
        hubs.invert(v, languages=langs)


def test_k_occurrence_skewness_and_hub_share_see_a_hub():
    docs, queries = hubbed_library()
    h = HubCorrection.fit(docs, 1)
    assert M.k_occurrence_skewness(docs, k=5) > M.k_occurrence_skewness(h.apply(docs), k=5)
    top1 = [3, 3, 3, 1, 2, 3, None]
    relevant = [{0}, {1}, {3}, {1}, {2}, {4}, {5}]
    # wrong answers: 3, 3, 3 (query 0, 1, 5); the hub holds 3 of 7 first places
    assert M.hub_share(top1, relevant) == pytest.approx(3 / 7)
    assert M.hub_share(top1, relevant, hubs=1) == pytest.approx(3 / 7)
    assert M.hub_share([1, 2], [{1}, {2}]) == 0.0
    assert np.isnan(M.k_occurrence_skewness(docs[:5], k=10))

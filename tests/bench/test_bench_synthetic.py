"""bench/synthetic.py: the scale benchmark's vectors and its realism measure (bench/realism.py)."""

from __future__ import annotations

import numpy as np

from hefsearch.bench.synthetic import describe, distinct, vectors


def test_both_kinds_are_unit_vectors_and_reproducible():
    for kind in ("documents", "isotropic"):
        a = vectors(kind, 1500, 64, block=700)  # blocks join up to the same stream
        assert a.shape == (1500, 64) and np.allclose(np.linalg.norm(a, axis=1), 1, atol=1e-5)
        assert np.array_equal(a, vectors(kind, 1500, 64, block=700))
        assert not np.array_equal(a[:100], vectors(kind, 100, 64, points_seed=99))  # new queries


def test_documents_are_low_dimensional_like_text_and_isotropic_is_not():
    docs, iso = describe(vectors("documents", 3000)), describe(vectors("isotropic", 3000))
    assert docs["lid"] < 20 < iso["lid"]  # real text embeddings measured ~11 (bench/realism.py)
    # an IVF index reaches more recall per vector scanned on documents-like vectors
    at4 = {p: (r, f) for p, r, f in docs["ivf_curve"]}[4]
    iso4 = {p: (r, f) for p, r, f in iso["ivf_curve"]}[4]
    assert at4[0] > iso4[0]


def test_distinct_drops_near_copies_only():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((500, 32)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    copies = x[:50] + 1e-4 * rng.standard_normal((50, 32)).astype(np.float32)
    both = np.concatenate([x, copies / np.linalg.norm(copies, axis=1, keepdims=True)])
    assert len(distinct(both)) == 500

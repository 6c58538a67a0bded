"""embed/metrics.py against hand-computed small cases, and the basis-invariance promise."""

from __future__ import annotations

import numpy as np
import pytest

from hefsearch.embed import metrics as M


def test_top1_and_margin_hand_computed():
    # 3 pairs in 2-D. a0 is closest to b0; a1 is closest to b2 (wrong); a2 is closest to b2.
    a = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    b = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0]])
    # a2b: a0->b0 ok (cos 1 vs 0.995), a1: cos(a1,b1)=(0.6+0.08)/1.005=0.6766, cos(a1,b2)=0.8 -> wrong,
    # a2->b2 ok
    assert M.top1_retrieval(a, b, "a2b") == pytest.approx(2 / 3)
    # b2a: b0->argmax over a: a0 (1.0) ok; b1 -> a0 (0.995) wrong; b2 -> a2 ok
    assert M.top1_retrieval(a, b, "b2a") == pytest.approx(2 / 3)
    m = M.retrieval_margins(a, b)
    b1 = np.array([1.0, 0.1]) / np.linalg.norm([1.0, 0.1])
    assert m[0] == pytest.approx(1.0 - b1[0])
    assert m[1] == pytest.approx((0.6 * b1[0] + 0.8 * b1[1]) - 0.8)
    assert m[2] == pytest.approx(1.0 - b1[1])
    assert M.retrieval_margin(a, b, "a2b") == pytest.approx(m.mean())


def test_similarity_correlation_hand_computed():
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    # off-diagonal cosines of a: (0, 1/sqrt2, 1/sqrt2); of b below: (cos01, cos02, cos12)
    b = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    x = np.array([0.0, 2**-0.5, 2**-0.5])
    y = np.array([2**-0.5, 0.0, 2**-0.5])
    assert M.similarity_correlation(a, b) == pytest.approx(np.corrcoef(x, y)[0, 1])
    # spearman: ranks with ties averaged: x -> (1, 2.5, 2.5), y -> (2.5, 1, 2.5)
    rx, ry = np.array([1, 2.5, 2.5]), np.array([2.5, 1, 2.5])
    assert M.similarity_correlation(a, b, "spearman") == pytest.approx(np.corrcoef(rx, ry)[0, 1])


def test_rankings_hand_computed():
    truth = [7, 3, 5]
    got = [[7, 1, 2], [1, 3, 9], [1, 2, 4]]
    assert M.recall_at_k(truth, got, 1) == pytest.approx(1 / 3)
    assert M.recall_at_k(truth, got, 2) == pytest.approx(2 / 3)
    assert M.mrr(truth, got) == pytest.approx((1 + 0.5 + 0) / 3)
    assert M.mrr(truth, got, k=1) == pytest.approx(1 / 3)
    # sets of relevant ids
    assert M.recall_at_k([{1, 2}], [[2, 5, 1]], 2) == pytest.approx(0.5)
    assert M.hit_at_k([{1, 2}, {9}], [[2, 5, 1], [1, 2, 3]], 1) == pytest.approx(0.5)
    assert M.hit_at_k(truth, got, 2) == M.recall_at_k(truth, got, 2)  # one relevant id: the same
    assert M.mrr([{1, 2}], [[5, 2, 1]]) == pytest.approx(0.5)
    assert M.overlap_at_k([1, 2, 3, 4], [4, 3, 9, 8], 4) == pytest.approx(0.5)
    assert M.overlap_at_k([1, 2, 3, 4], [4, 3, 9, 8], 2) == 0.0


def test_rbo_hand_computed():
    assert M.rank_biased_overlap([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)
    assert M.rank_biased_overlap([1, 2, 3], [4, 5, 6]) == pytest.approx(0.0)
    # depth 2, p=0.5: X1=0 (1 vs 2), X2=2 -> (2/2)*0.25 + (0.5/0.5)*(0*0.5 + 1*0.25) = 0.5
    assert M.rank_biased_overlap([1, 2], [2, 1], p=0.5) == pytest.approx(0.5)
    # top ranks weigh more: swapping the last two hurts less than swapping the first two
    base = [1, 2, 3, 4, 5]
    assert M.rank_biased_overlap(base, [1, 2, 3, 5, 4]) > M.rank_biased_overlap(base, [2, 1, 3, 4, 5])


def test_mean_pairwise_cosine_hand_computed():
    x = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    # cosines: 0, 1/sqrt2, 1/sqrt2 -> mean sqrt2/3
    assert M.mean_pairwise_cosine(x) == pytest.approx(2**0.5 / 3)
    collapsed = np.ones((5, 4)) + 1e-3 * np.arange(20).reshape(5, 4)
    assert M.mean_pairwise_cosine(collapsed) > 0.99
    # zero rows (empty texts) are ignored
    assert M.mean_pairwise_cosine(np.vstack([x, np.zeros((2, 2))])) == pytest.approx(2**0.5 / 3)


def test_topk_ids_orders_best_first():
    s = np.array([[0.1, 0.9, 0.5, 0.9], [3, 2, 1, 0]])
    assert M.topk_ids(s, 3).tolist() == [[1, 3, 2], [0, 1, 2]]


@pytest.fixture
def two_spaces():
    rng = np.random.default_rng(1)
    ref = rng.normal(size=(40, 16))
    noisy = ref + 0.3 * rng.normal(size=ref.shape)
    return ref, noisy


def test_basis_permutation_leaves_invariant_metrics_unchanged_but_paired_cosine_drops(two_spaces):
    ref, test = two_spaces
    perm = np.random.default_rng(2).permutation(ref.shape[1])
    signs = np.where(np.random.default_rng(3).random(ref.shape[1]) < 0.5, -1.0, 1.0)
    permuted = test[:, perm] * signs
    pairs_a, pairs_b = test[:20], test[20:]
    pa, pb = permuted[:20], permuted[20:]

    assert M.top1_retrieval(pa, pb) == pytest.approx(M.top1_retrieval(pairs_a, pairs_b))
    assert M.retrieval_margin(pa, pb) == pytest.approx(M.retrieval_margin(pairs_a, pairs_b))
    for method in ("pearson", "spearman"):
        assert M.similarity_correlation(ref, permuted, method) == pytest.approx(
            M.similarity_correlation(ref, test, method)
        )
    assert M.mean_pairwise_cosine(permuted) == pytest.approx(M.mean_pairwise_cosine(test))
    # rankings from the permuted space are the same rankings
    rank = lambda docs, qs: M.topk_ids(M.cosine_matrix(qs, docs), 10)  # noqa: E731
    assert (rank(test, test[:5]) == rank(permuted, permuted[:5])).all()

    before = M.paired_cosine(ref, test).mean()
    after = M.paired_cosine(ref, permuted).mean()
    assert before > 0.9
    assert after < 0.5


def test_procrustes_and_permutation_detection(two_spaces):
    ref, test = two_spaces
    rng = np.random.default_rng(4)
    big = rng.normal(size=(400, 16))
    perm = rng.permutation(16)
    permuted = big[:, perm] * -1.0
    fit = M.procrustes_fit(big, permuted, holdout=0.25)
    assert fit.heldout and fit.residual < 1e-6 and fit.cosine_after > 0.999
    assert fit.cosine_before < 0.5
    # noise cannot be mapped away: held-out residual stays large
    noise = big + 0.8 * rng.normal(size=big.shape)
    assert M.procrustes_fit(big, noise, holdout=0.25).residual > 0.3

    chk = M.detect_permutation(big, permuted)
    assert chk.is_permutation and not chk.is_identity
    assert (chk.mapping == perm).all() and (chk.signs == -1).all()
    # works with fewer texts than dimensions, where Procrustes cannot tell
    few = rng.normal(size=(30, 64))
    p64 = rng.permutation(64)
    assert M.detect_permutation(few, few[:, p64]).is_permutation
    assert M.detect_permutation(few, few).is_identity
    assert not M.detect_permutation(ref, test).is_permutation


def test_compare_spaces_report(two_spaces):
    ref, test = two_spaces
    pairs = [(i, i + 20) for i in range(20)]
    c = M.compare_spaces(ref, test, pairs)
    assert c.n_texts == 40
    assert 0.9 < c.paired_cosine_mean <= 1.0
    assert c.top1_ref is not None and c.permutation["is_permutation"] is False
    d = c.to_dict()
    assert set(d) >= {"similarity_pearson", "top1_test", "margin_test"}
    with pytest.raises(ValueError):
        M.compare_spaces(ref, test[:10])

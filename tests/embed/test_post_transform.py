"""Mean-centering: the transform itself, the fingerprint, and a centred space derived from a
library space (the derived-space writer the language-neutral spaces use) that searches reopen."""

from __future__ import annotations

import numpy as np
import pytest

from hefsearch.embed import Encoder
from hefsearch.embed.post_transform import MeanCentering, from_spec
from hefsearch.embed import metrics as M
from hefsearch.search.request import SearchRequest


def test_mean_centering_hand_computed():
    v = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]], np.float32)  # the zero row is an empty text
    mc = MeanCentering.fit(v)
    assert np.allclose(mc.mean, [1.0, 0.5]) and mc.fitted_on == 2
    out = mc.apply(v)
    assert np.allclose(out, [[0, 1], [0, -1], [0, 0]])
    raw = MeanCentering(mc.mean, renormalize=False).apply(v)
    assert np.allclose(raw, [[0, 0.5], [0, -0.5], [0, 0]])
    with pytest.raises(ValueError):
        mc.apply(np.ones((1, 3), np.float32))


def test_centering_lowers_a_collapsed_library_cosine():
    rng = np.random.default_rng(0)
    common = rng.normal(size=16)
    docs = common + 0.4 * rng.normal(size=(50, 16))
    assert M.mean_pairwise_cosine(docs) > 0.7
    assert abs(M.mean_pairwise_cosine(MeanCentering.fit(docs).apply(docs))) < 0.05


def test_post_transform_changes_the_fingerprint_and_round_trips(tiny_bert_bundle):
    rng = np.random.default_rng(1)
    a = MeanCentering.fit(rng.normal(size=(10, 32)))
    b = MeanCentering.fit(rng.normal(size=(10, 32)))
    with Encoder.open(tiny_bert_bundle, "cpu") as plain, \
            Encoder.open(tiny_bert_bundle, "cpu", post_transform=a) as ea, \
            Encoder.open(tiny_bert_bundle, "cpu", post_transform=b) as eb, \
            Encoder.open(tiny_bert_bundle, "cpu", post_transform=a.to_spec()) as ea2:
        assert len({plain.fingerprint, ea.fingerprint, eb.fingerprint}) == 3
        assert ea2.fingerprint == ea.fingerprint  # the spec rebuilds the same transform
        texts = ["hello world", "the cat sleeps", ""]
        assert np.allclose(ea.encode(texts), a.apply(plain.encode(texts)), atol=1e-6)
        assert not ea.encode(texts)[2].any()
    assert from_spec(None) is None and from_spec(a) is a
    with pytest.raises(ValueError):
        from_spec({"kind": "whitening"})


def test_a_centred_derived_space_is_searched_with_its_stored_transform(tmp_path, tiny_bert_bundle):
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from hefsearch.search import Searcher
    from hefsearch.search.derived_space import write_derived_space
    from tests.support.library_helpers import write_corpus

    docs = tmp_path / "docs"
    write_corpus(docs, n_files=6, paragraphs=2)
    lib = Library.open(tmp_path / "lib")
    with Encoder.open(tiny_bert_bundle, "cpu", threads=1) as enc:
        sync(lib, [docs], [enc])
        src = lib.space("cpu-fp32")
        member = lib.member_ids("cpu-fp32").tolist()
        vecs = src.vectors(member)
        mc = MeanCentering.fit(vecs)
        sp = write_derived_space(lib, src.info, enc, mc, "cpu-fp32-centered", member, mc.apply(vecs))
    assert sp.info.name == "cpu-fp32-centered"
    assert sp.info.parts["post_transform"]["kind"] == "mean-centering"
    ids = sorted(lib.member_ids("cpu-fp32"))
    before = M.mean_pairwise_cosine(lib.space("cpu-fp32").vectors(ids))
    after = M.mean_pairwise_cosine(sp.vectors(ids))
    assert after < before
    # a search reopens the centred encoder from the stored spec and its fingerprint matches
    s = Searcher(lib)
    res = s.search(SearchRequest("train platform", k=3, mode="vector", space="cpu-fp32-centered"))
    assert res.hits and res.space == "cpu-fp32-centered"
    s.close()
    lib.close()

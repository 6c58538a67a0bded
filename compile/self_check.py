"""How close a derived encoder body is to the FP32 one, on the built-in sample texts.

``compile sim`` and ``compile int8`` both record this check in the manifest entry they write.
"""

from __future__ import annotations

import numpy as np

from hefsearch.embed.bundle import Bundle
from hefsearch.embed.samples import VERIFY_TEXTS


def self_check(bundle: Bundle, rel: str) -> dict:
    """An encoder body derived from the FP32 one (``rel`` in the bundle: an NPU simulation, the
    int8 CPU body) against FP32 on the built-in sample texts (basis-invariant metrics first)."""
    from hefsearch.embed.backends.cpu import make_session
    from hefsearch.embed.host import HostPipeline, POOLERS, l2_normalize
    from hefsearch.embed.metrics import paired_cosine, similarity_correlation

    host = HostPipeline(bundle)
    tok = host.tokenize(list(VERIFY_TEXTS))
    fp32 = make_session(str(bundle.path / bundle.encoder_entries("onnx")[0].file))
    sim = make_session(str(bundle.path / rel))
    pool = POOLERS[bundle.pooling]
    a, b = [], []
    for ids in tok.ids:  # one at a time: no padding effects in the comparison
        e, m = host.embed([ids])
        feeds = {"embeddings": e, "attention_mask": m}
        a.append(pool(fp32.run(["last_hidden_state"], feeds)[0], m))
        b.append(pool(sim.run(["last_hidden_state"], feeds)[0], m))
    a, b = l2_normalize(np.vstack(a)), l2_normalize(np.vstack(b))
    pc = paired_cosine(a, b)
    return {
        "texts": len(a),
        "cosine_mean": round(float(pc.mean()), 6),
        "cosine_min": round(float(pc.min()), 6),
        "similarity_pearson": round(similarity_correlation(a, b), 6),
    }


def parallel_ranking(bundle: Bundle, rel: str) -> dict:
    """How well the FP32 body ``rel`` ranks the bundled parallel set (evaluate/data/parallel.tsv):
    every sentence, as a query (the bundle's query prefix), against all the others; its
    translation is the answer. ``{"sentences", "top1", "mrr"}``. Run for the original and a
    derived body, it says whether the derived one ranks at least as well."""
    from hefsearch.embed.backends.cpu import make_session
    from hefsearch.embed.host import HostPipeline, POOLERS, l2_normalize
    from hefsearch.evaluate.parallel import load_parallel

    pairs = load_parallel()
    texts = [p.text_a for p in pairs] + [p.text_b for p in pairs]
    n = len(pairs)
    partner = np.array(list(range(n, 2 * n)) + list(range(n)))
    prefix = (bundle.prefixes or {}).get("query", "")
    host = HostPipeline(bundle)
    tok = host.tokenize([prefix + t for t in texts])
    sess = make_session(str(bundle.path / rel))
    pool = POOLERS[bundle.pooling]
    vecs = []
    for ids in tok.ids:  # one at a time, as self_check: no padding effects
        e, m = host.embed([ids])
        vecs.append(pool(sess.run(["last_hidden_state"], {"embeddings": e, "attention_mask": m})[0], m))
    v = l2_normalize(np.vstack(vecs))
    s = v @ v.T
    np.fill_diagonal(s, -np.inf)
    right = s[np.arange(len(v)), partner]
    rank = 1 + (s > right[:, None]).sum(axis=1)
    return {"sentences": int(len(v)), "top1": round(float((rank == 1).mean()), 6),
            "mrr": round(float((1.0 / rank).mean()), 6)}

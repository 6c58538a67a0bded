"""Parity on real weights: hefsearch's vectors vs sentence-transformers' on all-MiniLM-L6-v2,
and (optionally) on a multilingual model folder given by HEFSEARCH_TEST_MULTILINGUAL_MODEL."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from hefsearch.embed import Encoder
from hefsearch.embed.samples import VERIFY_TEXTS

VARIED = VERIFY_TEXTS + [
    "",  # handled as a zero vector, excluded from the parity comparison below
    "Hi",
    "   leading and trailing spaces   ",
    "UPPER CASE SHOUTING ABOUT THE WEATHER",
    "numbers 3.14159 2,718 1e-9 -42 +7 0x1F",
    "email me at someone@example.org or visit https://example.com/a?b=c#d",
    "Tabs\tand\nnewlines\nin one text",
    "emoji only 🚀🚀🔥💡",
    "mixed 日本語 and English and Deutsch in one line",
    "中文文本测试：语义搜索在本地文档上运行。",
    "한국어 문장은 여기에서 토큰화됩니다.",
    "Ελληνικά κείμενα και σημεία στίξης;",
    "עברית נכתבת מימין לשמאל",
    "Ünïcödé dïäcrïtïcs éverywhere àçcèntś",
    "(parentheses) [brackets] {braces} <angles> \"quotes\" 'single' `back`",
    "semicolon; colon: comma, period. ellipsis… dash — hyphen-ated",
    "The the the the the the the the the the",
    "A very short one.",
    " ".join(f"word{i}" for i in range(400)),  # truncated
    "Lorem ipsum dolor sit amet, " * 60,  # truncated
    "支持多语言的句子嵌入模型。" * 50,  # truncated, CJK
]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_minilm_matches_sentence_transformers(minilm_path, minilm_bundle):
    from sentence_transformers import SentenceTransformer

    texts = [t for t in VARIED if t.strip()]
    assert len(texts) >= 50
    with Encoder.open(minilm_bundle, backend="cpu", batch_size=16) as enc:
        ours = enc.encode_passages(texts)
        assert enc.stats.truncated >= 3
    st = SentenceTransformer(str(minilm_path), device="cpu")
    ref = st.encode(texts, batch_size=16, convert_to_numpy=True)
    cos = _cosines(ours, ref)
    assert cos.min() >= 0.9999, (cos.min(), texts[int(cos.argmin())])


def test_empty_texts_get_zero_vectors(minilm_bundle):
    with Encoder.open(minilm_bundle) as enc:
        v = enc.encode_passages(["", "   ", "\n\t", "real text"])
        assert enc.stats.empty == 3
    assert np.all(v[:3] == 0)
    assert abs(np.linalg.norm(v[3]) - 1) < 1e-5


MULTI = os.environ.get("HEFSEARCH_TEST_MULTILINGUAL_MODEL")

PAIRS = [
    ("Where is the nearest train station?", "Wo ist der nächste Bahnhof?"),
    ("The cat is sleeping on the sofa.", "Кошка спит на диване."),
    ("How do I reset my router to factory settings?", "Cómo restablecer el router a la configuración de fábrica"),
    ("The quarterly report shows revenue up 12% year over year.", "Le rapport trimestriel montre une hausse du chiffre d'affaires de 12 %."),
    ("Photosynthesis converts light energy into chemical energy stored in glucose.", "La fotosíntesis convierte la energía luminosa en energía química."),
    ("Die Katze schläft auf dem Sofa.", "猫がソファで寝ています。"),
]


@pytest.mark.multilingual
@pytest.mark.skipif(not MULTI, reason="set HEFSEARCH_TEST_MULTILINGUAL_MODEL to a multilingual model folder")
def test_multilingual_parity_and_cross_lingual(tmp_path):
    from sentence_transformers import SentenceTransformer

    from hefsearch.compile.export.bundle import ExportOptions, export_bundle

    model = Path(MULTI)
    e5 = "e5" in model.name.lower()
    qp, pp = ("query: ", "passage: ") if e5 else (None, None)
    export_bundle(str(model), tmp_path / "b", ExportOptions(query_prefix=qp, passage_prefix=pp))
    texts = [t for t in VARIED if t.strip()]
    with Encoder.open(tmp_path / "b") as enc:
        ours = enc.encode(texts)
        left = enc.encode_passages([a for a, _ in PAIRS])
        right = enc.encode_passages([b for _, b in PAIRS])
    st = SentenceTransformer(str(model), device="cpu")
    ref = st.encode(texts, convert_to_numpy=True)
    assert _cosines(ours, ref).min() >= 0.9999
    sims = left @ right.T
    assert (sims.argmax(axis=1) == np.arange(len(PAIRS))).all(), sims

"""Which spaces this machine can search: a ``hef`` space brought to a machine without a Hailo
device is kept and named as not searchable here, with what searches use instead; another
model's bundle or no bundle at all is said so, never mixed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hefsearch.embed.bundle import Bundle
from hefsearch.index.space_reach import space_reach


def info(name, backend, model_hash, kind=None):
    return SimpleNamespace(name=name, backend=backend, kind=kind or name, parts={"model_hash": model_hash})


@pytest.fixture
def bundle(tiny_bert_bundle):
    return Bundle.open(tiny_bert_bundle)


def test_hef_space_without_a_device_falls_back_to_fp32(bundle, monkeypatch):
    import hefsearch.embed.backends.hailo as hailo

    monkeypatch.setattr(hailo.HailoBackend, "available", classmethod(lambda cls, b: (False, "no Hailo device found")))
    reach = space_reach([info("hef", "hailo", bundle.model_hash), info("cpu-fp32", "cpu", bundle.model_hash)], bundle)
    assert [(r.name, r.searchable) for r in reach] == [("hef", False), ("cpu-fp32", True)]
    assert reach[0].how == "no Hailo device found; searches use the FP32 space cpu-fp32 on the CPU instead"
    assert reach[1].how == "on the CPU"

    alone = space_reach([info("hef", "hailo", bundle.model_hash)], bundle)
    assert "run 'hefsearch backfill'" in alone[0].how and not alone[0].searchable

    monkeypatch.setattr(hailo.HailoBackend, "available", classmethod(lambda cls, b: (True, "Hailo-10H found")))
    assert space_reach([info("hef", "hailo", bundle.model_hash)], bundle)[0].how == "on the Hailo NPU (Hailo-10H found)"


def test_other_model_or_no_bundle(bundle):
    other = space_reach([info("cpu-fp32", "cpu", "0" * 64)], bundle)
    assert not other[0].searchable and "holds another model" in other[0].how
    none = space_reach([info("cpu-fp32", "cpu", bundle.model_hash)], None, "the bundle at /old/place is gone")
    assert not none[0].searchable and "/old/place is gone" in none[0].how and "keyword search" in none[0].how


"""``doctor`` says which vector spaces this machine can search, and what searches use instead."""

from __future__ import annotations

from types import SimpleNamespace

from hefsearch.embed.bundle import Bundle


def info(name, backend, model_hash):
    return SimpleNamespace(name=name, backend=backend, kind=name, parts={"model_hash": model_hash})


def test_doctor_says_which_spaces_search_here(tiny_bert_bundle, monkeypatch):
    bundle = Bundle.open(tiny_bert_bundle)
    import hefsearch.embed.backends.hailo as hailo
    from hefsearch.diagnose.doctor import WARN, check_reach

    monkeypatch.setattr(hailo.HailoBackend, "available", classmethod(lambda cls, b: (False, "no Hailo device found")))
    check = check_reach([info("hef", "hailo", bundle.model_hash), info("cpu-fp32", "cpu", bundle.model_hash)], bundle)
    assert check.status == WARN
    assert check.detail.startswith("hef: no, no Hailo device found; searches use the FP32 space cpu-fp32")
    assert "cpu-fp32: yes, on the CPU" in check.detail

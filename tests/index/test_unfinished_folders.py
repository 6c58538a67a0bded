"""The library knows which folders an interrupted run left unfinished: they stay marked (status,
the run's summary, doctor) while other folders are indexed, until a run over them completes."""

from __future__ import annotations

import pytest
from rich.console import Console

from hefsearch.embed import Encoder
from hefsearch.index.library import Library
from hefsearch.index.sync import SyncOptions, sync
from tests.support.library_helpers import write_corpus


@pytest.fixture
def encoder(tiny_bert_bundle):
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        yield enc


def _interrupted(lib, folder, encoder) -> None:
    def progress(ev):
        if ev.phase == "index" and ev.files_done >= 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sync(lib, [folder], [encoder], SyncOptions(batch_chunks=4), progress=progress)


def _summary(report) -> str:
    from hefsearch.cli.render import print_sync_summary

    console = Console(record=True, width=300)
    print_sync_summary(console, report, "LIB")
    return console.export_text()


def test_an_interrupted_folder_stays_unfinished_until_a_run_over_it_completes(tmp_path, encoder):
    from hefsearch.cli.render import last_sync_text
    from hefsearch.diagnose.doctor import check_library

    a, b = tmp_path / "a", tmp_path / "b"
    write_corpus(a, n_files=12)
    write_corpus(b, n_files=3, seed=1)
    lib = Library.open(tmp_path / "lib")
    _interrupted(lib, a, encoder)
    assert lib.status().unfinished == [str(a)]

    report = sync(lib, [b], [encoder])  # another folder, run to the end
    assert report.unfinished == [str(a)]
    assert "Library up to date" not in _summary(report) and str(a) in _summary(report)
    st = lib.status()
    assert st.unfinished == [str(a)] and st.interrupted
    assert str(a) in last_sync_text(st) and "interrupted" in last_sync_text(st)
    [check] = [c for c in check_library(lib) if c.name == "index runs"]
    assert str(a) in check.detail and check.status == "warn"
    # freshness (status, the TUI's F4, the web page) does not say "synced" beside "interrupted"
    from hefsearch.app.freshness import freshness

    fresh = freshness(lib)
    assert fresh.unfinished == [str(a)] and fresh.to_dict()["unfinished"] == [str(a)]
    assert fresh.describe().startswith("not up to date: a stopped run left 1 folder(s) unfinished")

    _interrupted(lib, b, encoder)  # b's own run did not finish this time: both are unfinished
    assert lib.status().unfinished == [str(a), str(b)]

    report = sync(lib, [a, b], [encoder])
    assert report.unfinished == [] and "Library up to date" in _summary(report)
    st = lib.status()
    assert st.unfinished == [] and st.interrupted is None and "interrupted" not in last_sync_text(st)
    assert not [c for c in check_library(lib) if c.name == "index runs"]
    assert freshness(lib).describe().startswith("synced ")
    lib.close()


def test_a_watchers_run_over_a_few_paths_neither_marks_nor_finishes_a_folder(tmp_path, encoder):
    a = tmp_path / "a"
    write_corpus(a, n_files=6)
    lib = Library.open(tmp_path / "lib")
    _interrupted(lib, a, encoder)
    sync(lib, [a], [encoder], paths=[next(a.iterdir())])
    assert lib.status().unfinished == [str(a)]  # one file seen again is not the folder finished
    sync(lib, [a], [encoder])
    sync(lib, [a], [encoder], paths=[next(a.iterdir())])
    assert lib.status().unfinished == []
    lib.close()

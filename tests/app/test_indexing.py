"""The index operation of the application core (``app.indexing.run_index``), driven without
the command line: what it creates and discards, what it says, what it returns."""

from __future__ import annotations

import json

import pytest

from hefsearch.app.indexing import IndexRequestError, Notice, run_index
from hefsearch.app.requests import IndexRequest
from hefsearch.base.errors import HefsearchError
from hefsearch.index.library import Library


def write_docs(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def request(tmp_path, bundle, *paths, **fields) -> IndexRequest:
    return IndexRequest(paths=[str(p) for p in paths], library_path=str(tmp_path / "lib"), bundle=str(bundle),
                        backend="cpu", **fields)


def test_a_new_library_is_discarded_when_its_first_run_fails(tiny_bert_bundle, tmp_path, monkeypatch):
    docs = write_docs(tmp_path / "docs", {"a.txt": "The heron stood in the reeds."})

    def no_encoder(*args, **kwargs):
        raise HefsearchError("no encoder here")

    monkeypatch.setattr("hefsearch.index.encoders.open_sync_encoders", no_encoder)
    with pytest.raises(HefsearchError, match="no encoder here"):
        run_index(request(tmp_path, tiny_bert_bundle, docs))
    assert not (tmp_path / "lib").exists()


def test_an_existing_library_is_kept_when_a_run_fails(tiny_bert_bundle, tmp_path, monkeypatch):
    docs = write_docs(tmp_path / "docs", {"a.txt": "The heron stood in the reeds."})
    assert run_index(request(tmp_path, tiny_bert_bundle, docs)).exit_code == 0
    monkeypatch.setattr("hefsearch.index.encoders.open_sync_encoders",
                        lambda *a, **k: (_ for _ in ()).throw(HefsearchError("gone")))
    with pytest.raises(HefsearchError):
        run_index(request(tmp_path, tiny_bert_bundle, docs))
    with Library.open(tmp_path / "lib", create=False) as lib:
        assert lib.document_count() == 1


def test_nothing_is_created_when_a_new_library_is_given_no_folders(tiny_bert_bundle, tmp_path):
    with pytest.raises(IndexRequestError, match="No folders given"):
        run_index(request(tmp_path, tiny_bert_bundle))
    with pytest.raises(IndexRequestError, match="--ray-actors needs --ray"):
        run_index(request(tmp_path, tiny_bert_bundle, tmp_path, ray_actors=2))
    assert not (tmp_path / "lib").exists()


def test_a_folder_gone_is_left_out_with_a_warning_and_its_documents_kept(tiny_bert_bundle, tmp_path):
    kept = write_docs(tmp_path / "kept", {"a.txt": "The heron stood in the reeds."})
    gone = write_docs(tmp_path / "gone", {"b.txt": "The otter slid into the river."})
    run_index(request(tmp_path, tiny_bert_bundle, kept, gone))
    (gone / "b.txt").unlink()
    gone.rmdir()
    said: list[Notice] = []
    result = run_index(request(tmp_path, tiny_bert_bundle), say=said.append)
    warnings = [n for n in said if n.warning]
    assert [(n.kind, n.values) for n in warnings] == [("folder_gone", (str(gone),))]
    assert ("folders", (str(kept),)) in [(n.kind, n.values) for n in said]
    assert result.notices == said  # the result carries what was said
    assert result.report.removed == 0 and result.report.unchanged == 1
    with Library.open(tmp_path / "lib", create=False) as lib:
        assert lib.document_count() == 2  # what was indexed from the missing folder stays


def test_the_summary_is_the_index_json(tiny_bert_bundle, tmp_path):
    docs = write_docs(tmp_path / "docs", {"a.txt": "The heron stood in the reeds.", "b.md": "# Otters\nThey swim."})
    result = run_index(request(tmp_path, tiny_bert_bundle, docs))
    summary = result.to_dict()
    assert list(summary) == [
        "interrupted", "found", "unsupported", "nothing_supported", "library", "spaces", "added", "changed",
        "removed", "unchanged", "chunks_embedded", "backfilled", "chunks_cut", "seconds", "partial", "skipped",
        "failed", "stale", "notes", "links_not_followed", "spaces_not_updated"]
    assert summary["added"] == 2 and summary["found"] == 2 and summary["interrupted"] is False
    assert summary["library"] == str(tmp_path / "lib") and summary["spaces"] == ["cpu-fp32"]
    assert result.exit_code == 0 and "ray_actors" not in summary
    json.dumps(summary)
    kinds = [n.kind for n in result.notices]
    assert kinds.count("encoder") == 1 and "cpu-fp32" in next(n.text for n in result.notices if n.kind == "encoder")


def test_the_encoders_are_opened_once_and_closed(tiny_bert_bundle, tmp_path, monkeypatch):
    import hefsearch.index.encoders as encoders

    docs = write_docs(tmp_path / "docs", {"a.txt": "The heron stood in the reeds."})
    real, opened, closed = encoders.open_sync_encoders, [], []

    def counting(*args, **kwargs):
        choice = real(*args, **kwargs)
        opened.append(choice)
        real_close = choice.close
        choice.close = lambda: (closed.append(choice), real_close())
        return choice

    monkeypatch.setattr("hefsearch.index.encoders.open_sync_encoders", counting)
    run_index(request(tmp_path, tiny_bert_bundle, docs, also_fp32=True))
    assert len(opened) == 1 and closed == opened


def test_an_interrupted_first_run_reports_and_leaves_no_library(tiny_bert_bundle, tmp_path, monkeypatch):
    from hefsearch.index.sync import SyncReport

    docs = write_docs(tmp_path / "docs", {"a.txt": "The heron stood in the reeds."})

    def interrupted(*args, **kwargs):
        e = KeyboardInterrupt()
        e.sync_report = SyncReport(found=1)
        raise e

    monkeypatch.setattr("hefsearch.app.reindex.reindex", interrupted)
    result = run_index(request(tmp_path, tiny_bert_bundle, docs))
    assert result.interrupted and result.exit_code == 130
    assert result.to_dict()["interrupted"] is True and result.to_dict()["found"] == 1
    assert not (tmp_path / "lib").exists()


def test_a_full_disk_exits_with_its_own_code(tmp_path):
    from hefsearch.index.sync import DiskFull

    assert DiskFull(tmp_path, "No space left on device").exit_code == 4

"""The long-passage sets' builders and the pieces bench: what they promise about their queries
and the bundle view they make."""

from __future__ import annotations

import json

import numpy as np

from hefsearch.bench import long_parallel, long_parallel_system, pieces


def test_no_detail_query_names_its_page():
    for page, query in long_parallel_system.DETAIL_QUERIES.items():
        name = page.rsplit(".", 1)[0].replace("_", " ")
        assert name not in query.lower().split(), (page, query)
    assert len(set(long_parallel_system.DETAIL_QUERIES.values())) == len(long_parallel_system.DETAIL_QUERIES)


def test_russian_copies_are_cut_where_their_own_text_ends():
    long_parallel.END_HEADINGS |= long_parallel_system.RU_END_HEADINGS
    text = "header\nИМЯ\n       socket - создать\nОПИСАНИЕ\n       текст\nСМОТРИТЕ ТАКЖЕ\n       bind(2)\n"
    out = long_parallel.trim(text)
    assert "текст" in out and "bind(2)" not in out


def test_a_bundle_view_changes_only_the_window(tmp_path):
    src = tmp_path / "bundle"
    src.mkdir()
    (src / "manifest.json").write_text(json.dumps({"seq_len": 512, "pooling": "mean"}), encoding="utf-8")
    (src / "encoder.onnx").write_bytes(b"onnx")
    (src / "build").mkdir()
    out = tmp_path / "view"
    pieces.bundle_view(src, 128, out)
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8")) == {"seq_len": 128, "pooling": "mean"}
    assert (out / "encoder.onnx").read_bytes() == b"onnx" and (out / "encoder.onnx").is_symlink()
    assert not (out / "build").exists()  # compile outputs are never written through the view
    assert json.loads((src / "manifest.json").read_text(encoding="utf-8"))["seq_len"] == 512


def test_a_file_scores_by_its_best_chunk_and_fusing_lifts_a_detail():
    files = np.array(["a.de.txt", "a.de.txt", "b.de.txt"])
    scores = np.array([[0.2, 0.7, 0.5]], dtype=np.float32)
    fs = pieces.file_scores(scores, files, ["a.de.txt", "b.de.txt"])
    assert fs.tolist() == [[np.float32(0.7), np.float32(0.5)]]
    assert pieces.ranked(fs, ["a.de.txt", "b.de.txt"]) == [["a.de.txt", "b.de.txt"]]

"""``hefsearch compile calib``: a calibration set drawn from real documents (a folder written
by the test, chunked by the real indexer code), embedded by the host pipeline."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from hefsearch.compile.calib import (
    CalibrationError,
    build_calibration,
    calib_rel_path,
    choose_texts,
    load_calibration,
    sample_texts,
)
from hefsearch.embed.bundle import Bundle
from hefsearch.embed.host import HostPipeline
from hefsearch.cli.main import main


def test_arrays_are_4d_float32_with_a_01_mask(calib_bundle_template):
    bundle = Bundle.open(calib_bundle_template)
    emb, mask, info = load_calibration(bundle, 64)
    assert emb.shape == (96, 1, 64, bundle.hidden) and emb.dtype == np.float32
    assert mask.shape == (96, 1, 1, 64) and mask.dtype == np.float32
    assert set(np.unique(mask)) == {0.0, 1.0}
    with np.load(calib_bundle_template / calib_rel_path(64)) as z:
        lengths, source = z["lengths"], z["source"]
    # the mask is a prefix of ones as long as the tokenised text; padding is zero
    assert (mask[:, 0, 0].sum(axis=1) == lengths).all()
    pad = np.arange(64)[None, :] >= lengths[:, None]
    assert not emb[:, 0][pad].any()
    assert 0 < source.sum() <= 0.25 * 96 + 1 and (source == 0).sum() >= 70
    # recorded in the manifest with its checksum, outside "files" so the bundle stays valid without it
    rec = bundle.manifest["calibration"]["s64"]
    assert rec["rows"] == 96 and rec["seed"] == 3 and rec["sha256"] == info["sha256"]
    assert calib_rel_path(64) not in bundle.manifest["files"]
    assert not Bundle.open(calib_bundle_template).verify()


def test_embeddings_equal_the_host_pipeline_for_the_same_texts(calib_bundle_template, corpus):
    bundle = Bundle.open(calib_bundle_template)
    drawn = choose_texts(bundle, [corpus], n=96, seed=3)  # the same draw the fixture saved
    emb, mask, _ = load_calibration(bundle, 64)
    host = HostPipeline(bundle, max_tokens=64)
    e, m = host.embed(host.tokenize(drawn.texts).ids, pad_to=64)
    np.testing.assert_array_equal(emb[:, 0], e)
    np.testing.assert_array_equal(mask[:, 0, 0], m.astype(np.float32))
    # the user texts are chunks of the documents, each within the encoder window
    user = [t for t, s in zip(drawn.texts, drawn.source) if s == 0]
    docs = "\n".join(p.read_text(encoding="utf-8") for p in corpus.glob("*.txt"))
    assert any(t in docs for t in user)
    assert all(host.count_tokens(t) <= 64 for t in user)
    samples = set(sample_texts())
    assert all(t in samples for t, s in zip(drawn.texts, drawn.source) if s == 1)


def test_same_seed_same_set_other_seed_other_set(tiny_bert_bundle, corpus, tmp_path):
    paths = []
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        p = tmp_path / name
        shutil.copytree(tiny_bert_bundle, p)
        build_calibration(p, [corpus], n=40, seed=seed, seq_len=32)
        paths.append(p / calib_rel_path(32))
    a, b, c = (np.load(p) for p in paths)
    np.testing.assert_array_equal(a["embeddings"], b["embeddings"])
    np.testing.assert_array_equal(a["mask"], b["mask"])
    assert a["embeddings"].shape == (40, 1, 32, 32)
    assert not np.array_equal(a["embeddings"], c["embeddings"])


def test_lengths_follow_the_documents_chunks(calib_bundle_template):
    rec = Bundle.open(calib_bundle_template).manifest["calibration"]["s64"]
    assert rec["pool_chunks"] > 96 and rec["ks_distance"] is not None and rec["ks_distance"] < 0.35
    assert sum(rec["length_counts"]) == 96
    assert rec["files_failed"] == 1  # broken.pdf is reported and skipped, the rest completes
    assert rec["files_skipped"] >= 1  # image.png


def test_cli_prints_summary_and_warns_on_a_small_set(tiny_bert_bundle, corpus, tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bert_bundle, bundle)
    res = CliRunner().invoke(main, ["compile", "calib", str(bundle), "--from", str(corpus), "--n", "50",
                                    "--seed", "1", "--seq-len", "48"])
    assert res.exit_code == 0, res.output
    assert "calib/calib_s48.npz: 50 rows x SEQ 48" in res.stdout
    assert "bundled multilingual samples: 12" in res.stdout  # a quarter of 50, rounded
    assert "tokens" in res.stdout and "embeddings: min" in res.stdout
    assert "warning: Only 50 calibration rows" in res.stderr
    assert json.loads((bundle / "manifest.json").read_text())["calibration"]["s48"]["rows"] == 50


def test_few_documents_and_mostly_samples_are_warned_about(tiny_bert_bundle, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "one.txt").write_text("Eine kurze Notiz.", encoding="utf-8")
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bert_bundle, bundle)
    s = build_calibration(bundle, [docs], n=60, seed=0)
    assert s.rows == 16 and s.user_rows == 1 and s.sample_rows == 15
    # the one chunk the documents hold is in the set: its size is a note, its samples a warning
    assert "bundled sample texts" in " ".join(s.warnings) and "Only" not in " ".join(s.warnings)
    assert "hold 1 chunks, all of them in the set (16 rows" in " ".join(s.notes)


def test_a_small_library_wholly_drawn_is_a_note_not_a_warning(tiny_bert_bundle, tmp_path):
    # the demo's case: every chunk of a small folder in the set, the samples filling it up to a
    # quarter of the rows asked; the samples are short, the documents long
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(24):
        (docs / f"d{i}.txt").write_text(" ".join(f"word{i}x{j}" for j in range(40)), encoding="utf-8")
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bert_bundle, bundle)
    res = CliRunner().invoke(main, ["compile", "calib", str(bundle), "--from", str(docs), "--n", "256",
                                    "--seed", "0", "--seq-len", "64"])
    assert res.exit_code == 0, res.output
    s = json.loads((bundle / "manifest.json").read_text())["calibration"]["s64"]
    assert s["user_rows"] == s["pool_chunks"] and s["rows"] < 256 and s["sample_rows"] > 0
    assert s["ks_distance"] < 0.2  # the chunks drawn are the documents' chunks
    assert "warning:" not in res.stderr, res.stderr
    assert "note: Your documents hold" in res.stderr and s["notes"] and not s["warnings"]


def test_empty_folder_and_too_long_window_are_errors(tiny_bert_bundle, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CalibrationError, match="No text found"):
        build_calibration(tiny_bert_bundle, [empty], n=10)
    with pytest.raises(CalibrationError, match="longer than the bundle's window"):
        build_calibration(tiny_bert_bundle, [empty], n=10, seq_len=4096)


def test_a_changed_calibration_file_is_refused(calib_bundle):
    path = calib_bundle / calib_rel_path(64)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["embeddings"][0, 0, 0, 0] += 1.0
    np.savez_compressed(path, **arrays)
    with pytest.raises(CalibrationError, match="does not match the sha256"):
        load_calibration(Bundle.open(calib_bundle), 64)
    with pytest.raises(CalibrationError, match="compile calib"):
        load_calibration(Bundle.open(calib_bundle), 32)


def test_calibration_reads_what_index_reads(tiny_bert_bundle, tmp_path):
    """Licence texts, NEWS.gz and README files have no file-type suffix: index reads them by
    their content, and so must calibration (it used to say "unsupported file type '.0'")."""
    import gzip

    from hefsearch.index.crawl import FoundFile, crawl
    from hefsearch.readers.extract import extract

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "Apache-2.0").write_text("Licensed under the Apache License, Version 2.0. " * 5, encoding="utf-8")
    (docs / "NEWS.gz").write_bytes(gzip.compress(("Version 1.2 fixes the search of long files. " * 5).encode()))
    (docs / "README.Debian").write_text("Debian notes on the configuration of the package. " * 5, encoding="utf-8")
    (docs / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))  # index: by OCR; calibration: no
    (docs / "blob").write_bytes(bytes(range(256)) * 4)  # no suffix, not text: neither reads it
    found = [f for f in crawl([docs]) if isinstance(f, FoundFile)]
    assert sorted(f.path.name for f in found) == ["Apache-2.0", "NEWS.gz", "README.Debian", "picture.png"]
    texts = [f for f in found if f.kind != "image"]
    assert all(extract(f.path, kind=f.kind).text for f in texts)  # index reads every one
    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_bert_bundle, bundle)
    s = build_calibration(bundle, [docs], n=20, seed=0)
    assert (s.files_read, s.files_failed) == (3, 0)
    assert s.user_rows >= 3

"""`hefsearch embed` and `hefsearch compile export` through click's CliRunner."""

from __future__ import annotations

import io
import json

import numpy as np
from click.testing import CliRunner

from hefsearch.embed import Encoder
from hefsearch.cli.main import main


def test_embed_jsonl_from_stdin_matches_library(tiny_bert_bundle):
    texts = ["first line", "zweite Zeile", "", "troisième ligne"]
    r = CliRunner().invoke(main, ["embed", "--bundle", str(tiny_bert_bundle), "--backend", "cpu", "-"],
                           input="\n".join(texts) + "\n")
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(rows) == 4
    with Encoder.open(tiny_bert_bundle) as enc:
        ref = enc.encode_passages(texts)
    assert np.allclose(np.array(rows, dtype=np.float32), ref, atol=1e-6)
    assert "4 texts, 0 truncated, 1 empty" in r.stderr
    assert "backend: cpu" in r.stderr


def test_embed_npy_query_mode(tiny_bert_bundle, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a question?\nanother one\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["embed", "--bundle", str(tiny_bert_bundle), "--query", "--format", "npy",
                                  str(src)])
    assert r.exit_code == 0, r.stderr
    arr = np.load(io.BytesIO(r.stdout_bytes))
    assert arr.shape == (2, 32) and arr.dtype == np.float32


def test_embed_with_missing_bundle_is_a_clear_error(tmp_path):
    r = CliRunner().invoke(main, ["embed", "--bundle", str(tmp_path / "nope"), "-"], input="x\n")
    assert r.exit_code == 2
    assert "does not exist" in r.stderr and "compile export" in r.stderr
    assert "Traceback" not in r.output


def test_unknown_backend_lists_the_valid_ones(tiny_bert_bundle):
    r = CliRunner().invoke(main, ["embed", "--bundle", str(tiny_bert_bundle), "--backend", "gpu", "-"], input="x\n")
    assert r.exit_code == 2
    assert "Unknown backend 'gpu'" in r.stderr and "cpu" in r.stderr


def test_export_cli_reports_verification(tiny_bert_model, tmp_path):
    r = CliRunner().invoke(main, ["compile", "export", str(tiny_bert_model), "--out", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    assert "min cosine 1.0000" in r.stdout or "min cosine 0.9999" in r.stdout
    assert (tmp_path / "b" / "manifest.json").is_file()
    assert not (tmp_path / "b.partial").exists()


def test_backend_reason_names_the_environment_variable(tiny_bert_bundle, monkeypatch):
    monkeypatch.setenv("HEFSEARCH_BACKEND", "cpu")
    r = CliRunner().invoke(main, ["embed", "--bundle", str(tiny_bert_bundle), "-"], input="x\n")
    assert r.exit_code == 0, r.stderr
    assert "chosen by $HEFSEARCH_BACKEND" in r.stderr
    monkeypatch.delenv("HEFSEARCH_BACKEND")
    r = CliRunner().invoke(main, ["embed", "--bundle", str(tiny_bert_bundle), "--backend", "cpu", "-"], input="x\n")
    assert "chosen by --backend" in r.stderr

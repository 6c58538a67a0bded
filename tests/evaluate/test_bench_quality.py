"""``hefsearch bench quality`` end to end: tiny sharpened BERT (fast) and all-MiniLM-L6-v2 (slow).

The tiny model's numbers mean nothing in themselves; the tests check the relations that must
hold whatever the model: FP32 against itself is perfect, FP32 re-ranking of the top-N reaches
exactly the recall@N ceiling, labelled queries find their documents, the outputs are complete.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from hefsearch.embed import Encoder
from hefsearch.index.library import Library
from hefsearch.index.sync import sync
from hefsearch.evaluate.quality import QualityOptions, config_line, run_quality
from hefsearch.evaluate.query_sets import QuerySet, expected_chunks, read_queries
from hefsearch.cli.main import main
from tests.support.library_helpers import write_corpus

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sim_bundle(sharp_bundle, tmp_path_factory):
    from hefsearch.compile.sim.build import SimOptions, build_sim

    out = tmp_path_factory.mktemp("bq") / "bundle"
    shutil.copytree(sharp_bundle, out)
    build_sim(out, "a8")
    build_sim(out, "a8", SimOptions(mask="additive:-10000"))
    return out


@pytest.fixture(scope="module")
def library_path(sim_bundle, tmp_path_factory):
    root = tmp_path_factory.mktemp("bqlib")
    docs = root / "docs"
    write_corpus(docs, n_files=8, paragraphs=3)
    lib = Library.open(root / "lib")
    with Encoder.open(sim_bundle, "npu-sim", profile="a8", threads=1) as sim, \
            Encoder.open(sim_bundle, "cpu", threads=1) as cpu:
        sync(lib, [docs], [sim, cpu])
    lib.close()
    return root / "lib"


def test_report_relations(library_path):
    lib = Library.open(library_path, create=False)
    try:
        rep = run_quality(library=lib, options=QualityOptions(n_queries=25, rerank=5))
    finally:
        lib.close()
    names = [s.name for s in rep.spaces]
    assert names[0] == "cpu-fp32" and "npu-sim-a8" in names
    assert "npu-sim-a8-additive10000" in names  # in the bundle, not the library: parallel set only
    fp, a8 = rep.space("cpu-fp32"), rep.space("npu-sim-a8")
    assert rep.space("npu-sim-a8-additive10000").library is None
    assert rep.space("npu-sim-a8-additive10000").parallel is not None

    # parallel set: 11 language pairs; FP32 is the reference, not compared with itself
    assert len(fp.parallel.top1_by_pair) == 11
    assert fp.parallel.similarity_pearson is None
    assert 0 < a8.parallel.similarity_pearson <= 1 and a8.parallel.cosine_to_fp32 is not None
    # the -10000 mask in 8-bit scores hurts more than the correct mask
    huge = rep.space("npu-sim-a8-additive10000").parallel
    assert huge.similarity_pearson < a8.parallel.similarity_pearson

    # library: FP32 is its own ground truth
    assert fp.library.recall == {"1": 1.0, "5": 1.0, "10": 1.0} and fp.library.mrr == 1.0
    assert fp.library.reranked is None
    r = a8.library
    assert r.queries == 25 and r.chunks == rep.library["chunks"]
    assert 0 <= r.recall["1"] <= r.recall["5"] <= r.recall["10"] <= 1
    # re-ranking the top-5 with exact FP32 vectors reaches exactly the recall@5 ceiling
    assert r.reranked["recall"]["1"] == pytest.approx(r.recall_at_depth)
    assert r.recall_at_depth == pytest.approx(r.recall["5"])
    assert r.reranked["mrr"] >= r.mrr - 1e-9
    # pseudo-queries are labelled with their source chunk
    assert rep.library["query_source"] == "pseudo" and rep.library["labelled"]
    assert fp.library.source_found["10"] > 0.5
    # build configuration beside the numbers
    assert a8.config["precision"]["name"] == "a8" and a8.config["sixteen_bit"] == []
    assert a8.config["calibration"]["texts"] > 0 and a8.config["seq_len"] == 64
    line = config_line(a8.config)
    assert "a8" in line and "mask inside softmax" in line and "seq 64" in line
    assert config_line(fp.config) == "FP32 · seq 64"
    json.dumps(rep.to_dict())  # serialisable


def test_queries_file_with_expected_documents(library_path, tmp_path):
    # a stored chunk's own text as the query: even a random model ranks the identical text first
    lib = Library.open(library_path, create=False)
    try:
        q1, q2 = (next(c.text for c in lib.chunks(range(1, 200)) if c.path.endswith(name))
                  for name in ("001-trains.txt", "002-cooking.txt"))
    finally:
        lib.close()
    f = tmp_path / "q.tsv"
    f.write_text("query\texpected\tnote\n"
                 f"{q1}\t001-trains.txt|nowhere.md\t\n"
                 f"{q2}\t002-cooking.txt\t\n"
                 "a query without an answer\t\t\n"
                 "tax return late filing penalty\tmissing.txt\t\n", encoding="utf-8")
    qs = read_queries(f)
    assert qs.texts[0] == q1 and qs.expected == ["001-trains.txt|nowhere.md", "002-cooking.txt", None, "missing.txt"]
    plain = tmp_path / "q.txt"
    plain.write_text("# my queries\nfirst query\n\nsecond query\n", encoding="utf-8")
    assert read_queries(plain) == QuerySet(["first query", "second query"])
    lib = Library.open(library_path, create=False)
    try:
        rep = run_quality(library=lib, options=QualityOptions(queries=qs, rerank=3, spaces=["npu-sim-a8"],
                                                              parallel=False))
        ids = expected_chunks(lib, qs.expected)
        assert ids[0] and ids[1] and not ids[2] and not ids[3]
        assert {r.path.rsplit("/", 1)[-1] for r in lib.chunks(sorted(ids[0]))} == {"001-trains.txt"}
    finally:
        lib.close()
    assert [s.name for s in rep.spaces] == ["cpu-fp32", "npu-sim-a8"]
    assert rep.library["query_source"] == "file" and rep.library["queries"] == 4
    assert any("not in the library" in n for n in rep.notices)
    found = rep.space("cpu-fp32").library.source_found
    assert found["1"] == 1.0  # only the two labelled queries with a document in the library count
    assert rep.space("cpu-fp32").parallel is None
    # by file (issue 21): the search's one hit per file never finds a file later than the
    # ranking of chunks does (its first chunk's rank can only move up)
    for space in rep.spaces:
        ff = space.library.file_found
        assert ff["chunks"]["1"] == 1.0 and all(ff["per_file"][k] >= ff["chunks"][k] for k in ("1", "5", "10"))
        # hubness beside MRR: both labelled queries are answered right first, so only the two
        # without an answer in the library leave a top-1 place to a hub; the skewness needs no queries
        hub = space.library.hubness
        assert hub["top1_share"] in (0.25, 0.5) and np.isfinite(hub["k10_skew"])


def test_cli_table_json_plot_and_errors(library_path, tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["bench", "quality", "--library", str(library_path), "--n-queries", "10",
                               "--rerank", "4", "--plot", str(tmp_path / "r.png")])
    assert res.exit_code == 0, res.output
    out = res.output
    for text in ("Build configuration", "Parallel set: 168 pairs, 11 languages", "en-de",
                 "NPU simulation (a8)", "+ FP32 re-rank top 4", "ground truth = FP32's top-1", "hubs"):
        assert text in out, text
    png = tmp_path / "r.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    res = runner.invoke(main, ["bench", "quality", "--library", str(library_path), "--n-queries", "5",
                               "--spaces", "npu-sim-a8", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [s["name"] for s in data["spaces"]] == ["cpu-fp32", "npu-sim-a8"]
    assert data["spaces"][1]["library"]["reranked"]["depth"] == 30
    assert all(0.0 <= s["library"]["hubness"]["top1_share"] <= 1.0 for s in data["spaces"])

    res = runner.invoke(main, ["bench", "quality", "--library", str(library_path), "--spaces", "hef-nope"])
    assert res.exit_code == 2 and "hef-nope" in res.output


def test_parallel_only_without_a_library(sim_bundle):
    res = CliRunner().invoke(main, ["bench", "quality", "--no-library", "--bundle", str(sim_bundle), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["library"] is None
    assert {s["name"] for s in data["spaces"]} == {"cpu-fp32", "npu-sim-a8", "npu-sim-a8-additive10000"}


@pytest.mark.slow
def test_bench_quality_on_minilm_and_the_sample_corpus(minilm_bundle, tmp_path):
    """Real weights end to end: all-MiniLM-L6-v2, its a8 simulation, the bundled sample corpus."""
    from hefsearch.compile.sim.build import build_sim

    bundle = tmp_path / "minilm"
    shutil.copytree(minilm_bundle, bundle)
    build_sim(bundle, "a8")
    corpus = REPO / "data" / "sample-corpus"
    lib = Library.open(tmp_path / "lib")
    try:
        with Encoder.open(bundle, "npu-sim", profile="a8") as sim, Encoder.open(bundle, "cpu") as cpu:
            sync(lib, [corpus], [sim, cpu])
        rep = run_quality(library=lib, options=QualityOptions(queries=read_queries(corpus / "queries.tsv"), rerank=10))
    finally:
        lib.close()
    fp, a8 = rep.space("cpu-fp32"), rep.space("npu-sim-a8")
    assert fp.library.source_found["10"] >= 0.5  # FP32 finds most expected documents
    assert a8.parallel.similarity_pearson < 0.99  # 8 bits cost something on a real model
    assert a8.library.reranked["recall"]["1"] == pytest.approx(a8.library.recall_at_depth)
    assert fp.parallel.top1_by_pair["en-de"] > 0.3


def test_fp32_vectors_of_a_library_without_them_are_said_first_and_kept(npu_only_library, sim_bundle):
    """Issue 21 item 9: an 8-bit-only library made the bench encode every chunk in FP32 on
    every run, saying so only at the end."""
    from tests.support.library_helpers import count_passages

    lib = npu_only_library
    assert "cpu-fp32" not in lib.space_names()
    chunks = len(lib.chunk_ids())
    said: list[str] = []
    with Encoder.open(sim_bundle, "cpu", threads=1) as fp32:
        seen = count_passages(fp32)
        first = run_quality(sim_bundle, lib, QualityOptions(n_queries=5, rerank=0, parallel=False),
                            encoders={"cpu-fp32": fp32}, progress=said.append)
        encoded_first = len(seen)
        told = next(i for i, m in enumerate(said) if "no FP32 space" in m)
        assert f"{chunks} of {chunks} chunks are encoded" in said[told] and "--also-fp32" in said[told]
        assert told < next(i for i, m in enumerate(said) if m.startswith("library: NPU"))  # before the work
        assert any("the next run reuses them" in n for n in first.notices)
        seen.clear()
        said.clear()
        second = run_quality(sim_bundle, lib, QualityOptions(n_queries=5, rerank=0, parallel=False),
                             encoders={"cpu-fp32": fp32}, progress=said.append)
    assert encoded_first >= chunks
    assert seen == []  # every chunk's FP32 vector came from the cache
    assert not any("no FP32 space" in m for m in said)
    assert second.space("npu-sim-a8").library.mrr == first.space("npu-sim-a8").library.mrr


def test_neutral_spaces_are_measured_side_by_side(library_path, tmp_path, monkeypatch):
    """With language-neutral copies of the NPU and FP32 spaces, bench quality measures the NPU's
    neutral space against the neutral FP32 ranking (its peer), not against plain FP32; the
    plain spaces stay measured against plain FP32."""
    import numpy as np

    from hefsearch.search import language_neutral as LN

    path = tmp_path / "lib"
    shutil.copytree(library_path, path)
    lib = Library.open(path, create=False)
    # the corpus is English: call every other chunk German so that two offsets are fitted
    monkeypatch.setattr(LN, "chunk_languages", lambda library, ids: ["de" if int(i) % 2 else "en" for i in ids])
    try:
        bundle = lib.settings()["bundle"]
        with Encoder.open(bundle, "npu-sim", profile="a8", threads=1) as sim, \
                Encoder.open(bundle, "cpu", threads=1) as cpu:
            for enc in (sim, cpu):
                LN.derive_neutral_space(lib, enc.space_name, enc, min_chunks=1)
        rep = run_quality(library=lib, options=QualityOptions(n_queries=20, rerank=5, parallel=False))
    finally:
        lib.close()
    by = {s.name: s for s in rep.spaces}
    assert {"npu-sim-a8-neutral", "cpu-fp32-neutral"} <= set(by)
    assert by["npu-sim-a8-neutral"].library.reference == "cpu-fp32-neutral"
    assert by["cpu-fp32-neutral"].library.mrr == 1.0  # its own peer
    assert by["npu-sim-a8"].library.reference == "cpu-fp32"
    assert by["cpu-fp32-neutral"].library.reranked is None
    assert np.isfinite(by["npu-sim-a8-neutral"].library.mrr)

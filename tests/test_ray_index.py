"""``hefsearch index --ray``: a local Ray cluster (2 CPUs, CPU actors) embeds what the driver
chunks; the library equals a local run's, an actor killed mid-run hands its batches to the
other, an actor with another encoder is refused by name, and without ray the option says how
to install it. One Ray instance serves the module (starting it costs ~10 s here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from hefsearch.embed import Encoder
from hefsearch.index.library import Library
from hefsearch.index.errors import FingerprintMismatch
from hefsearch.index.ray_pool import RayEncoder, RayPoolError, _placement
from hefsearch.index.ray_worker import open_bundle_encoder
from hefsearch.index.sync import sync
from tests.library_helpers import assert_consistent, chunk_rows, write_corpus


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A local Ray (head and 2 CPU slots for workers); workers keep their bundle cache in a
    temp folder (they inherit the environment of ray.init)."""
    ray = pytest.importorskip("ray")
    home = tmp_path_factory.mktemp("ray-home")
    old = os.environ.get("HEFSEARCH_HOME")
    os.environ["HEFSEARCH_HOME"] = str(home)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
    if old is None:
        os.environ.pop("HEFSEARCH_HOME", None)
    else:
        os.environ["HEFSEARCH_HOME"] = old


def vectors_by_chunk(lib: Library, space: str = "cpu-fp32") -> dict:
    rows = lib.query("SELECT c.id, d.path, c.ordinal FROM chunks c JOIN documents d ON d.id = c.doc_id")
    vecs = lib.space(space).vectors([r[0] for r in rows])
    return {(r[1], r[2]): v for r, v in zip(rows, vecs)}


def assert_same_library(lib: Library, reference: Library) -> None:
    assert chunk_rows(lib) == chunk_rows(reference)
    mine, theirs = vectors_by_chunk(lib), vectors_by_chunk(reference)
    assert mine.keys() == theirs.keys() and mine
    cos = [float(np.dot(mine[k], theirs[k])) for k in mine]
    assert min(cos) >= 0.9999
    assert_consistent(lib)


def local_library(path, docs, bundle, batch_chunks: int) -> Library:
    lib = Library.open(path)
    with Encoder.open(bundle, backend="cpu", threads=1) as enc:
        sync(lib, [docs], [enc], batch_chunks=batch_chunks)
    return lib


def test_index_ray_gives_the_chunks_and_vectors_of_a_local_run(ray_cluster, tiny_bert_bundle, tmp_path):
    from hefsearch.cli.main import main

    docs = tmp_path / "docs"
    write_corpus(docs, n_files=12)
    r = CliRunner().invoke(main, ["index", str(docs), "--library", str(tmp_path / "lib"), "--bundle",
                                  str(tiny_bert_bundle), "--backend", "cpu", "--batch", "8", "--ray", "auto",
                                  "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    actors = summary["ray_actors"]
    assert [a["status"] for a in actors] == ["ok", "ok"]
    assert sum(a["frames"] for a in actors) == summary["chunks_embedded"] > 12
    assert all(a["frames"] > 0 and a["frames_per_s"] > 0 for a in actors)  # both did work

    lib, ref = Library.open(tmp_path / "lib"), local_library(tmp_path / "local", docs, tiny_bert_bundle, 8)
    assert_same_library(lib, ref)
    assert ray_cluster.is_initialized()  # a cluster the command joined is not shut down by it


def test_a_killed_actor_hands_its_batches_to_the_other(ray_cluster, tiny_bert_bundle, tmp_path):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=24)
    lib = Library.open(tmp_path / "lib")
    enc = RayEncoder.start(lib, tiny_bert_bundle, backend="cpu")
    victim = enc.actors[0]
    killed = []

    def kill_after_first_commit(ev):
        if ev.phase == "index" and ev.chunks_done and not killed:
            ray_cluster.kill(victim.handle)
            killed.append(ev.chunks_done)

    try:
        report = sync(lib, [docs], [enc], batch_chunks=4, progress=kill_after_first_commit)
    finally:
        enc.close()
    assert killed and killed[0] < report.chunks_embedded  # it died mid-run
    assert victim.status == "died" and victim.reason
    assert [a.status for a in enc.actors[1:]] == ["ok"]
    assert sum(a.frames for a in enc.actors) == report.chunks_embedded
    assert report.added == 24 and not report.partial
    assert_same_library(lib, local_library(tmp_path / "local", docs, tiny_bert_bundle, 4))


def test_a_driver_stopped_mid_run_continues_where_the_last_commit_ended(ray_cluster, tiny_bert_bundle,
                                                                        tmp_path):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=16)
    lib = Library.open(tmp_path / "lib")

    def stop_after_first_commit(ev):
        if ev.phase == "index" and ev.chunks_done:
            raise KeyboardInterrupt

    enc = RayEncoder.start(lib, tiny_bert_bundle, backend="cpu")
    try:
        with pytest.raises(KeyboardInterrupt):
            sync(lib, [docs], [enc], batch_chunks=4, progress=stop_after_first_commit)
        kept = len(lib.chunk_ids())
        assert 0 < kept and lib.member_ids("cpu-fp32") == set(lib.chunk_ids().tolist())
        report = sync(lib, [docs], [enc], batch_chunks=4)  # batches that were out are simply redone
    finally:
        enc.close()
    assert report.chunks_embedded == len(lib.chunk_ids()) - kept
    assert_same_library(lib, local_library(tmp_path / "local", docs, tiny_bert_bundle, 4))


def test_an_actor_with_another_encoder_is_refused_by_name(ray_cluster, tiny_bert_bundle, tiny_xlmr_bundle,
                                                          tmp_path):
    other = str(tiny_xlmr_bundle)

    def actor_1_has_another_bundle(bundle, backend, opts, actor_index):
        return open_bundle_encoder(other if actor_index == 1 else bundle, backend, opts, actor_index)

    docs = tmp_path / "docs"
    write_corpus(docs, n_files=4)
    lib = Library.open(tmp_path / "lib")
    enc = RayEncoder.start(lib, tiny_bert_bundle, backend="cpu", actors=2, open_encoder=actor_1_has_another_bundle)
    try:
        refused = [a for a in enc.actors if a.status == "refused"]
        assert [a.index for a in refused] == [1] and "actor 1 on " in refused[0].name
        assert "model_hash" in refused[0].reason
        sync(lib, [docs], [enc])
    finally:
        enc.close()
    assert enc.actors[1].frames == 0 and enc.actors[0].frames == len(lib.chunk_ids())

    # a library whose space holds another encoder's vectors: every actor is refused, by name
    xlmr_lib = local_library(tmp_path / "xlmr", docs, tiny_xlmr_bundle, 8)
    with pytest.raises(FingerprintMismatch) as e:
        RayEncoder.start(xlmr_lib, tiny_bert_bundle, backend="cpu", actors=2)
    assert "actor 0 on " in e.value.message and "actor 1 on " in e.value.message
    assert "the library's space 'cpu-fp32'" in e.value.message


def test_actors_whose_encoder_cannot_open_say_why(ray_cluster, tiny_bert_bundle, tmp_path):
    """The hailo case on a node without the chip is the same: the actor's own error, by name."""
    lib = Library.open(tmp_path / "lib")
    with pytest.raises(RayPoolError) as e:
        RayEncoder.start(lib, tiny_bert_bundle, backend="cpu-int8", actors=2)
    assert "No Ray actor started" in e.value.message
    assert "actor 0 on " in e.value.message and "actor 1 on " in e.value.message
    assert e.value.message.count("has no int8 CPU encoder") == 2
    assert lib.spaces() == []  # nothing was written


def test_without_ray_the_option_says_how_to_install_it(tiny_bert_bundle, tmp_path, monkeypatch):
    from hefsearch.cli.main import main

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=1)
    args = ["index", str(docs), "--library", str(tmp_path / "lib"), "--bundle", str(tiny_bert_bundle)]
    r = CliRunner().invoke(main, [*args, "--ray", "auto"])
    assert r.exit_code == 2
    assert "pip install 'hefsearch[ray]'" in " ".join(r.output.split())
    r = CliRunner().invoke(main, [*args, "--ray-actors", "2"])
    assert r.exit_code == 2 and "--ray-actors needs --ray" in r.output


def test_actors_go_where_the_hardware_is():
    assert _placement("hailo", None, 1.0, {"hailo": 3.0, "CPU": 8.0}) == (3, {"resources": {"hailo": 1}, "num_cpus": 1.0})
    assert _placement("hailo", 2, 1.0, {"hailo": 3.0})[0] == 2
    with pytest.raises(RayPoolError, match="--resources='\\{\"hailo\": 1\\}'"):
        _placement("hailo", None, 1.0, {"CPU": 64.0})
    assert _placement("cpu", None, 1.0, {"CPU": 6.0}) == (6, {"num_cpus": 1.0})
    assert _placement("npu-sim", 4, 1.0, {"CPU": 2.0})[0] == 2  # never more than fit: none would wait
    with pytest.raises(RayPoolError, match="no free CPU"):
        _placement("cpu", None, 1.0, {"CPU": 0.5})


def test_only_the_ray_pool_imports_ray():
    code = ("import sys, hefsearch.index.sync, hefsearch.index.encoders, hefsearch.index.ray_pool, "
            "hefsearch.index.ray_worker, hefsearch.cli.cmd_index\nprint('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

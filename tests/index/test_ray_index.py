"""``hefsearch index --ray``: a local Ray cluster (2 CPUs, CPU actors) embeds what the driver
chunks; the library equals a local run's, an actor killed mid-run hands its batches to the
other, an actor with another encoder is refused by name, the CPU FP32 space of --also-fp32 is
embedded by the actors too, hailo actors each take a chip of their own (two fake chips: verified
only against the hailo_platform contract fake), and without ray the option says how to install
it. One Ray instance serves the module (starting it costs ~10 s here), in a temp folder of its
own and on 127.0.0.1 only; tests/index/test_ray_lifecycle.py covers starting, joining and stopping
(a file of its own: its runs start their own Ray, never beside this module's)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from click.testing import CliRunner

from hefsearch.embed import Encoder
from hefsearch.index.library import Library
from hefsearch.index.errors import FingerprintMismatch
from hefsearch.embed.bundle import Bundle
from hefsearch.base.errors import BackendUnavailable
from hefsearch.index.ray_pool import RayEncoder, RayPoolError, RayPoolOptions, _placement
from hefsearch.index.ray_worker import device_for_rank, open_bundle_encoder, ranks_on_nodes
from hefsearch.index.sync import SyncOptions, sync
from tests.fakes.fake_hef import add_fake_hef, copy_bundle
from tests.support.hailo_fixtures import FAKES
from tests.support.library_helpers import assert_consistent, chunk_rows, write_corpus

CHIP_A, CHIP_B = "0000:01:00.0", "0000:02:00.0"


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A local Ray (head, 2 CPU slots for workers and 2 'hailo' resources) in a temp folder of
    its own, listening on 127.0.0.1 only (Ray's single-machine mode, as ``--ray local`` runs it:
    ray_session.LOOPBACK_ENV); workers keep their bundle cache in a temp folder and can import
    the fake hailo_platform, whose devices they read from the file ``ray_cluster.fake_world``
    (they inherit the environment of ray.init)."""
    ray = pytest.importorskip("ray")
    from ray._private import ray_constants

    from hefsearch.index.ray_session import LOOPBACK_ENV

    home = tmp_path_factory.mktemp("ray-home")
    temp = tempfile.mkdtemp(prefix="hsray-")  # short: Ray's socket paths must fit 107 bytes
    env = {"HEFSEARCH_HOME": str(home), "HEFSEARCH_FAKE_HAILO_WORLD": str(home / "fake-hailo-world.json"),
           "PYTHONPATH": os.pathsep.join(p for p in (str(FAKES), os.environ.get("PYTHONPATH")) if p),
           LOOPBACK_ENV: "0"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    cluster_mode, ray_constants.ENABLE_RAY_CLUSTER = ray_constants.ENABLE_RAY_CLUSTER, False  # read at import
    ray.init(num_cpus=2, resources={"hailo": 2}, include_dashboard=False, log_to_driver=False, _temp_dir=temp,
             _node_ip_address="127.0.0.1")
    ray.fake_world = home / "fake-hailo-world.json"
    yield ray
    ray.shutdown()
    ray_constants.ENABLE_RAY_CLUSTER = cluster_mode
    shutil.rmtree(temp, ignore_errors=True)
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


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
        sync(lib, [docs], [enc], SyncOptions(batch_chunks=batch_chunks))
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
    enc = RayEncoder.start(lib, tiny_bert_bundle, RayPoolOptions(backend="cpu", actors=2))  # waits for both CPU slots
    victim = enc.actors[0]
    killed = []

    def kill_after_first_commit(ev):
        if ev.phase == "index" and ev.chunks_done and not killed:
            ray_cluster.kill(victim.handle)
            killed.append(ev.chunks_done)

    try:
        report = sync(lib, [docs], [enc], SyncOptions(batch_chunks=4), progress=kill_after_first_commit)
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

    enc = RayEncoder.start(lib, tiny_bert_bundle, RayPoolOptions(backend="cpu", actors=2))
    try:
        with pytest.raises(KeyboardInterrupt):
            sync(lib, [docs], [enc], SyncOptions(batch_chunks=4), progress=stop_after_first_commit)
        kept = len(lib.chunk_ids())
        assert 0 < kept and lib.member_ids("cpu-fp32").tolist() == lib.chunk_ids().tolist()
        report = sync(lib, [docs], [enc], SyncOptions(batch_chunks=4))  # batches that were out are simply redone
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
    enc = RayEncoder.start(lib, tiny_bert_bundle, RayPoolOptions(
        backend="cpu", actors=2, open_encoder=actor_1_has_another_bundle))
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
        RayEncoder.start(xlmr_lib, tiny_bert_bundle, RayPoolOptions(backend="cpu", actors=2))
    assert "actor 0 on " in e.value.message and "actor 1 on " in e.value.message
    assert "the library's space 'cpu-fp32'" in e.value.message


def test_actors_whose_encoder_cannot_open_say_why(ray_cluster, tiny_bert_bundle, tmp_path):
    """The hailo case on a node without the chip is the same: the actor's own error, by name."""
    lib = Library.open(tmp_path / "lib")
    with pytest.raises(RayPoolError) as e:
        RayEncoder.start(lib, tiny_bert_bundle, RayPoolOptions(backend="cpu-int8", actors=2))
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


def test_placement_and_auto_follow_the_backends_declaration(monkeypatch):
    """ray_pool keeps no list of NPU backends: the backend class's ray_resource decides where its
    actors go and which resource makes ``auto`` pick it."""
    from types import SimpleNamespace

    from hefsearch.embed.backends.cpu import CpuBackend
    from hefsearch.embed.backends.hailo import HailoBackend
    from hefsearch.index.ray_pool import choose_backend

    monkeypatch.setattr(HailoBackend, "ray_resource", "npu")
    assert _placement("hailo", None, 1.0, {"npu": 2.0, "hailo": 5.0}) == (2, {"resources": {"npu": 1}, "num_cpus": 1.0})
    lib = SimpleNamespace(spaces=lambda: [], settings=lambda: {})
    assert choose_backend(lib, "auto", {"npu": 1.0})[:2] == ("hailo", {})
    assert choose_backend(lib, "auto", {"hailo": 1.0})[0] == "cpu"
    monkeypatch.setattr(CpuBackend, "ray_resource", "gpu")
    assert _placement("cpu", 3, 1.0, {"gpu": 4.0, "CPU": 1.0}) == (3, {"resources": {"gpu": 1}, "num_cpus": 1.0})


def test_only_the_ray_pool_imports_ray():
    code = ("import sys, hefsearch.index.sync, hefsearch.index.encoders, hefsearch.index.ray_pool, "
            "hefsearch.index.ray_worker, hefsearch.cli.cmd_index\nprint('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- --also-fp32: the actors embed the CPU FP32 space too --------------------------------------------
@pytest.fixture(scope="module")
def int8_bundle(tiny_bert_bundle, tmp_path_factory):
    pytest.importorskip("onnx")
    from hefsearch.compile.cpu_int8 import build_cpu_int8

    out = copy_bundle(tiny_bert_bundle, tmp_path_factory.mktemp("int8") / "bundle")
    build_cpu_int8(out)
    return out


def test_also_fp32_is_embedded_by_the_actors_not_the_driver(ray_cluster, int8_bundle, tmp_path, monkeypatch):
    """Run 1 fills cpu-int8 only; run 2 (--also-fp32) adds the FP32 space, back-filling the
    chunks of run 1; run 3 (no flag) keeps it up to date. Every FP32 vector comes from the
    actors (the driver's Encoder.encode never sees the FP32 space) and equals a local run's."""
    from hefsearch.cli.main import main

    docs = tmp_path / "docs"
    write_corpus(docs, n_files=6)
    driver_fp32 = []  # texts the driver itself embedded into the FP32 space
    real_encode = Encoder.encode

    def counting_encode(self, texts, prefix=""):
        texts = list(texts)
        if self.space_name == "cpu-fp32":
            driver_fp32.extend(texts)
        return real_encode(self, texts, prefix)

    def index(*extra) -> dict:
        r = CliRunner().invoke(main, ["index", str(docs), "--library", str(tmp_path / "lib"), "--bundle",
                                      str(int8_bundle), "--backend", "cpu-int8", "--batch", "8", "--ray", "auto",
                                      "--json", *extra])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout[r.stdout.index("{"):])

    monkeypatch.setattr(Encoder, "encode", counting_encode)
    assert index()["spaces"] == ["cpu-int8"]
    write_corpus(docs / "more", n_files=2, seed=1)
    second = index("--also-fp32")
    assert second["spaces"] == ["cpu-int8", "cpu-fp32"] and second["backfilled"] > 0
    assert sum(a["frames"] for a in second["ray_actors"]) == second["chunks_embedded"] + second["backfilled"]
    write_corpus(docs / "last", n_files=1, seed=2)
    assert index()["chunks_embedded"] > 0
    assert driver_fp32 == []
    monkeypatch.undo()

    lib = Library.open(tmp_path / "lib")
    assert lib.member_ids("cpu-fp32").tolist() == lib.member_ids("cpu-int8").tolist() == lib.chunk_ids().tolist()
    assert_same_library(lib, local_library(tmp_path / "local", docs, int8_bundle, 8))


# -- hailo actors: one chip each ------------------------------------------------------------------------
def test_actors_of_a_node_are_numbered_in_start_order():
    assert ranks_on_nodes(["n1", "n2", "n1", "n1", "n2"]) == [(0, 3), (0, 2), (1, 3), (2, 3), (1, 2)]
    assert ranks_on_nodes([]) == []


def test_each_actor_takes_the_chip_of_its_rank_or_says_there_are_too_few():
    chips = ["0000:02:00.0", "0000:01:00.0"]  # as Device.scan() may list them: sorted first
    assert [device_for_rank(chips, r, 2, "pi-1") for r in (0, 1)] == ["0000:01:00.0", "0000:02:00.0"]
    assert device_for_rank(chips[:1], 0, 2, "pi-1") == "0000:02:00.0"
    with pytest.raises(BackendUnavailable) as e:  # one chip, two actors: the second has none
        device_for_rank(chips[:1], 1, 2, "pi-1")
    assert "pi-1 has 1 Hailo device(s) (0000:02:00.0) for the 2 hailo actors" in e.value.message
    assert "--resources='{\"hailo\": 1}'" in e.value.hint


def open_reporting_the_chip(bundle, backend, opts, actor_index):
    """The default opener; the label (not part of the fingerprint) names the chip HailoRT opened."""
    enc = open_bundle_encoder(bundle, backend, opts, actor_index)
    enc.backend.label += " on " + enc.backend._vdevice.get_physical_devices_ids()[0]
    return enc


def test_hailo_actors_each_open_their_own_chip(ray_cluster, tiny_bert_bundle, tmp_path):
    """Verified only against the contract fake: two fake Hailo-10H chips on HailoRT 5.x, which
    (unlike 4.x) would let both actors share the first chip if they did not name theirs."""
    bundle = copy_bundle(tiny_bert_bundle, tmp_path / "bundle")
    entry = add_fake_hef(bundle, in_type="FLOAT32")  # FLOAT32 streams: the CPU's vectors
    b = Bundle.open(bundle)
    b.add_file(entry.file + ".body.onnx")  # the fake "HEF"'s network travels with the bundle
    b.save_manifest()
    world = {"version": "5.3.0", "lock_dir": str(tmp_path),
             "devices": [{"id": CHIP_B, "arch": "HAILO10H"}, {"id": CHIP_A, "arch": "HAILO10H"}]}
    ray_cluster.fake_world.write_text(json.dumps(world))
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=4)
    lib = Library.open(tmp_path / "lib")
    enc = RayEncoder.start(lib, bundle, RayPoolOptions(backend="hailo", open_encoder=open_reporting_the_chip))
    try:
        assert sorted(a.identity["label"].split(" on ")[-1] for a in enc.live) == [CHIP_A, CHIP_B]
        assert sorted(a.identity["device"] for a in enc.live) == [CHIP_A, CHIP_B]
        sync(lib, [docs], [enc], SyncOptions(batch_chunks=4))
    finally:
        enc.close()
    mine, ref = vectors_by_chunk(lib, "hef"), vectors_by_chunk(local_library(tmp_path / "local", docs, bundle, 4))
    assert mine.keys() == ref.keys() and min(float(np.dot(mine[k], ref[k])) for k in mine) >= 0.999

    world["devices"] = world["devices"][:1]  # a node started with more 'hailo' than it has chips
    ray_cluster.fake_world.write_text(json.dumps(world))
    enc = RayEncoder.start(lib, bundle, RayPoolOptions(backend="hailo"))
    try:
        assert [a.status for a in enc.actors] == ["ok", "not started"]
        assert f"has 1 Hailo device(s) ({CHIP_B}) for the 2 hailo actors" in enc.actors[1].reason
    finally:
        enc.close()


def test_a_language_neutral_space_is_derived_from_and_kept_with_ray_vectors(ray_cluster, tiny_bert_bundle,
                                                                          tmp_path):
    # before: deriving it from a Ray-embedded FP32 space failed ('_BackendInfo' has no seq_lens)
    from hefsearch.index.encoders import open_sync_encoders
    from hefsearch.search.language_neutral import keep_language_neutral
    from tests.embed.test_language_neutral import write_files

    docs = tmp_path / "docs"
    write_files(docs, "de", range(6))
    write_files(docs, "en", range(6))
    lib = Library.open(tmp_path / "lib")
    enc = RayEncoder.start(lib, tiny_bert_bundle, RayPoolOptions(backend="cpu", actors=2))
    try:
        sync(lib, [docs], [enc])
        assert any("cpu-fp32-neutral" in line for line in keep_language_neutral(lib, [enc], True))
        write_files(docs, "fr", range(6))
        choice = open_sync_encoders(lib, bundle=tiny_bert_bundle, first=enc)
        neutral = next(e for e in choice.encoders if e.space_name == "cpu-fp32-neutral")
        neutral.encode = lambda texts, **kw: pytest.fail("the driver embedded the neutral space")
        sync(lib, [docs], choice.encoders)
    finally:
        enc.close()
    assert lib.member_ids("cpu-fp32-neutral").tolist() == lib.member_ids("cpu-fp32").tolist()
    assert len(lib.member_ids("cpu-fp32")) == 18
    assert_consistent(lib)

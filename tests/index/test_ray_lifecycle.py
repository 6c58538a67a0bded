"""``index --ray`` against a stale or dead cluster, and the processes of a Ray it started.

Each test has a Ray temp folder of its own (``$RAY_TMPDIR``, short: Ray's socket paths must
fit 107 bytes) holding a stale ``ray_current_cluster`` that points at a port where nothing
listens, as a Ray that died leaves it. Runs of the command go through ``tests/support/ray_run.py``,
a child subreaper that reports every process the run left behind (psutil), so other Ray
clusters on this machine cannot disturb the count. A local Ray listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.support.library_helpers import write_corpus

pytest.importorskip("ray")
pytest.importorskip("psutil")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreaper: Linux only")

REPO = Path(__file__).resolve().parents[2]
#: words of Ray's own start-up and shutdown output, which the user must not see
RAY_NOISE = ("Started a local Ray instance", "authentication_token", "worker.py", "rpc_client",
             "gcs_client", "autoscaler", "logging.cc", "SIGTERM received")


def dead_port() -> int:
    """A port of 127.0.0.1 where nothing listens (bound a moment ago, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_tmp(monkeypatch):
    """$RAY_TMPDIR for this test only, with a stale current-cluster file; no $RAY_ADDRESS."""
    root = Path(tempfile.mkdtemp(prefix="hsray-"))
    (root / "ray").mkdir()
    stale = f"127.0.0.1:{dead_port()}"
    (root / "ray" / "ray_current_cluster").write_text(stale)
    monkeypatch.setenv("RAY_TMPDIR", str(root))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def start(args: list[str], tmp_path: Path, hold: Path | None = None) -> tuple[subprocess.Popen, Path]:
    """``hefsearch ARGS`` under tests/support/ray_run.py, in a session of its own (a terminal's job)."""
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "tests.support.ray_run", str(report), *(["--hold", str(hold)] if hold else []), "--", *args]
    proc = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    return proc, report


def finish(proc: subprocess.Popen, report: Path, timeout: float = 180) -> tuple[dict, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the run did not end within {timeout:.0f} s; stderr:\n{err[-3000:]}")
    return json.loads(report.read_text()), out, err


def index_args(tmp_path: Path, bundle: Path, *extra: str) -> list[str]:
    docs = tmp_path / "docs"
    if not docs.exists():
        write_corpus(docs, n_files=6)
    return ["index", str(docs), "--library", str(tmp_path / "lib"), "--bundle", str(bundle), "--batch", "4",
            "--ray", "local", "--ray-actors", "1", *extra]


def test_local_starts_its_own_ray_quietly_despite_a_stale_current_cluster(ray_tmp, tiny_bert_bundle, tmp_path):
    # before: ray.init(address=None) joined the cluster the stale file names and waited 13 minutes
    stale = (ray_tmp / "ray" / "ray_current_cluster").read_text()
    proc, report = start(index_args(tmp_path, tiny_bert_bundle, "--backend", "cpu", "--json"), tmp_path)
    result, out, err = finish(proc, report)
    assert result["rc"] == 0, err
    summary = json.loads(out[out.index("{"):])
    assert [a["status"] for a in summary["ray_actors"]] == ["ok"] and summary["chunks_embedded"] > 6
    assert list((ray_tmp / "ray").glob("session_2*")), "no Ray session of its own under $RAY_TMPDIR"
    assert (ray_tmp / "ray" / "ray_current_cluster").read_text() == stale  # not ours to touch
    assert result["survivors"] == []
    noise = [line for line in err.splitlines() if any(w in line for w in RAY_NOISE)]
    assert noise == []  # Ray's own start-up output is in the cache's ray-driver.log, not the terminal
    assert "encoder: cpu" in err and "Library up to date" in err


def test_a_run_that_fails_stops_its_ray(ray_tmp, tiny_bert_bundle, tmp_path):
    """The error path: no actor can open its encoder (the bundle has no int8 one)."""
    proc, report = start(index_args(tmp_path, tiny_bert_bundle, "--backend", "cpu-int8"), tmp_path)
    result, _, err = finish(proc, report)
    assert result["rc"] == 2 and "No Ray actor started" in err
    assert result["survivors"] == []


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_to_the_job_stops_every_ray_process(ray_tmp, tiny_bert_bundle, tmp_path, signum, code):
    """The report's case: an actor killed with -9, then the signal to the whole process group
    (a terminal's Ctrl+C; `timeout` or a service manager's SIGTERM). Before: SIGTERM killed
    the raylet under the driver, which aborted (exit -6) and left ray::RuntimeEnvAgent and a
    worker running."""
    ready = tmp_path / "ready.json"
    proc, report = start(index_args(tmp_path, tiny_bert_bundle, "--backend", "cpu"), tmp_path, hold=ready)
    deadline = time.monotonic() + 180
    while not ready.exists() or not ready.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            finish(proc, report, timeout=30)
            pytest.fail("the run ended (or hung) before its first batch")
        time.sleep(0.2)
    os.kill(json.loads(ready.read_text())[0], signal.SIGKILL)
    time.sleep(1.0)
    os.killpg(proc.pid, signum)
    result, _, err = finish(proc, report)
    assert result["rc"] == code, err
    assert "Interrupted" in err
    assert result["survivors"] == []
    assert not [line for line in err.splitlines() if any(w in line for w in RAY_NOISE)]


@pytest.mark.timeout(60)
def test_joining_an_address_where_nothing_answers_fails_fast_naming_it(ray_tmp):
    # before: Ray retried the GCS connection for about 13 minutes
    import ray

    from hefsearch.index.ray_pool import RayPoolError, connect

    assert not ray.is_initialized()
    port = dead_port()
    with pytest.raises(RayPoolError) as e:
        connect(f"127.0.0.1:{port}")
    assert f":{port}" in e.value.message and "Nothing answers" in e.value.message
    assert f"--ray 127.0.0.1:{port}" in e.value.message
    assert "ray start --head" in e.value.hint
    assert not ray.is_initialized()


@pytest.mark.timeout(60)
def test_auto_names_the_stale_current_cluster_file_and_how_to_clear_it(ray_tmp, monkeypatch):
    from ray._private import services

    from hefsearch.index.ray_pool import RayPoolError, connect

    # Ray's 'auto' also joins any GCS process it sees on this machine (other test runs here)
    def no_other_cluster():
        return []

    no_other_cluster.cache_clear = lambda: None
    monkeypatch.setattr(services, "find_gcs_addresses", no_other_cluster)
    stale_port = (ray_tmp / "ray" / "ray_current_cluster").read_text().rsplit(":", 1)[1]
    with pytest.raises(RayPoolError) as e:
        connect("auto")
    assert f":{stale_port}" in e.value.message
    assert str(ray_tmp / "ray" / "ray_current_cluster") in e.value.message
    assert "ray stop" in e.value.hint and "--ray local" in e.value.hint

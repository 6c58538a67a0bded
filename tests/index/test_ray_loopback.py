"""A Ray head on loopback only, joined by ``hefsearch index --ray 127.0.0.1:PORT`` (issue 19, item 5).

Ray rewrites 127.0.0.1 to the machine's LAN address unless the head runs as a single node
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, see index/ray_address.py): a head started that way
listens on 127.0.0.1 only, and the driver joins it with the same setting and
``_node_ip_address`` that hefsearch gives it. Everything here binds 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hefsearch.index.ray_address import address_host, is_loopback_address, join_hint
from tests.support.library_helpers import chunk_rows, write_corpus


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop_head(temp_dir: str) -> None:
    """End the processes of this head only (never 'ray stop', which ends every Ray here)."""
    import psutil

    procs = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(temp_dir in part for part in p.info["cmdline"] or ()):
                procs.append(p)
                procs += p.children(recursive=True)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    for p in procs:
        with_suppress(p.terminate)
    _, alive = psutil.wait_procs(procs, timeout=2)
    for p in alive:
        with_suppress(p.kill)


def with_suppress(fn) -> None:
    try:
        fn()
    except Exception:
        pass


@pytest.fixture(scope="module")
def loopback_head():
    pytest.importorskip("ray")
    ray_bin = Path(sys.executable).with_name("ray")
    if not ray_bin.exists():
        pytest.skip("the ray command is not installed")
    temp_dir = tempfile.mkdtemp(prefix="hs-ray-", dir="/tmp")  # short: Ray's socket paths are limited
    port = _free_port()
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    cmd = [str(ray_bin), "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
           "--temp-dir", temp_dir, "--num-cpus", "1", "--include-dashboard", "false", "--disable-usage-stats",
           "--dashboard-agent-listen-port", str(_free_port()),
           "--dashboard-agent-grpc-port", str(_free_port()), "--metrics-export-port", str(_free_port()),
           "--runtime-env-agent-port", str(_free_port())]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            pytest.fail("ray start failed:\n" + done.stdout[-2000:] + done.stderr[-2000:])
        yield f"127.0.0.1:{port}", done.stdout + done.stderr
    finally:
        _stop_head(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_the_head_keeps_its_loopback_address(loopback_head):
    address, log = loopback_head
    assert "Local node IP: 127.0.0.1" in log
    import psutil

    port = int(address.rsplit(":", 1)[1])
    listening = {c.laddr.ip for c in psutil.net_connections("tcp") if c.status == "LISTEN" and c.laddr.port == port}
    assert listening and all(ip.endswith("127.0.0.1") for ip in listening), listening


def test_index_joins_a_loopback_head(loopback_head, tiny_bert_bundle, tmp_path):
    address, _ = loopback_head
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=3, paragraphs=2)
    lib = tmp_path / "lib"
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_ADDRESS")}
    done = subprocess.run([sys.executable, "-m", "hefsearch", "index", str(docs), "--library", str(lib), "--bundle",
                           str(tiny_bert_bundle), "--backend", "cpu", "--ray", address, "--ray-actors", "1"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    from hefsearch.index.library import Library

    with Library.open(lib, create=False) as library:
        assert len(chunk_rows(library)) >= 3 and library.space("cpu-fp32").info.count == len(chunk_rows(library))


def test_a_port_where_nothing_listens_is_said_at_once():
    from hefsearch.index.ray_pool import RayPoolError, connect

    port = _free_port()
    with pytest.raises(RayPoolError) as e:
        connect(f"127.0.0.1:{port}")
    # said at once, and at the address given: Ray no longer rewrites it to the LAN address
    assert f"Nothing answers at 127.0.0.1:{port}" in e.value.message


def test_loopback_addresses_are_recognised():
    assert address_host("127.0.0.1:6379") == "127.0.0.1" and address_host("ray://localhost:10001") == "localhost"
    assert is_loopback_address("127.0.0.1:6379") and is_loopback_address("localhost:6379")
    assert is_loopback_address("[::1]:6379") and not is_loopback_address("192.168.1.4:6379")
    assert not is_loopback_address("auto") and not is_loopback_address("local")
    # an IPv4-mapped IPv6 loopback is loopback (the server's answer, base/hosts.py)
    assert is_loopback_address("[::ffff:127.0.0.1]:6379") and is_loopback_address("ray://[::ffff:127.0.0.2]:10001")
    assert not is_loopback_address("[::ffff:192.168.1.4]:6379")
    assert "--port 7000" in join_hint("127.0.0.1:7000") and "ray start --head" in join_hint("head:6379")

"""Choosing the Hailo device on a machine with several chips (``device_id`` /
``HEFSEARCH_HAILO_DEVICE``): the backend opens exactly the device named, two encoders (in one
process or two) each use their own chip, and an id that is not there is refused by name.

Verified only against the contract fake of hailo_platform (tests/fakes, modelled on HailoRT
4.23/5.2's VDevice params ``device_ids``, ``Device.scan()`` and the 4.x per-device lock), not on
a physical multi-chip host.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hefsearch.embed.hailo_device import same_device
from hefsearch.embed.encoder import Encoder
from hefsearch.base.errors import BackendUnavailable
from hefsearch.embed.samples import VERIFY_TEXTS
from tests.fakes.fake_hef import add_fake_hef, copy_bundle
from tests.embed.test_hailo_backend import holding_process

CHIP_A, CHIP_B = "0000:01:00.0", "0000:02:00.0"
TEXTS = VERIFY_TEXTS[:3]


@pytest.fixture
def cpu_vectors(tiny_bert_bundle):
    with Encoder.open(tiny_bert_bundle, backend="cpu") as enc:
        return enc.encode(TEXTS)


def two_chips(world, arch: str = "HAILO10H", version: str = "5.3.0") -> None:
    world.devices = [{"id": CHIP_A, "arch": arch}, {"id": CHIP_B, "arch": arch}]
    world.version = version


def hailo8_bundle(tiny_bert_bundle, tmp_path) -> Path:
    path = copy_bundle(tiny_bert_bundle, tmp_path / "bundle8")
    add_fake_hef(path, hw_arch="hailo8", dfc_version="3.33.0", in_type="FLOAT32")
    return path


def test_a_backend_declares_what_a_ray_node_gives_its_actors(fake_hailo):
    """index --ray places and pins actors from these declarations: the hailo backend takes one
    'hailo' resource per actor and lists this machine's chips sorted (rank k takes the k-th);
    every other backend needs CPUs only and has no devices."""
    from hefsearch.embed.backends import backend_names, load_backend_class

    fake_hailo.devices = [{"id": CHIP_B, "arch": "HAILO10H"}, {"id": CHIP_A, "arch": "HAILO10H"}]
    hailo = load_backend_class("hailo")
    assert hailo.ray_resource == "hailo" and hailo.device_ids() == [CHIP_A, CHIP_B]
    others = [load_backend_class(n) for n in backend_names() if n != "hailo"]
    assert others and all(cls.ray_resource is None and cls.device_ids() == [] for cls in others)


def test_the_backend_opens_the_device_it_is_given(fake_hailo, hef_bundle, cpu_vectors, monkeypatch):
    two_chips(fake_hailo)
    with Encoder.open(hef_bundle, backend="hailo", device_id=CHIP_B) as enc:
        vecs = enc.encode(TEXTS)
        assert enc.backend.device.id == CHIP_B
    assert np.allclose(vecs, cpu_vectors, atol=1e-4)
    assert fake_hailo.stats.vdevice_devices == [CHIP_B]
    (algo, group, _), = fake_hailo.stats.vdevice_params  # the scheduler and group id stay
    assert algo.name == "ROUND_ROBIN" and group == "SHARED"

    monkeypatch.setenv("HEFSEARCH_HAILO_DEVICE", "02:00.0")  # HailoRT's short form: any PCIe domain
    with Encoder.open(hef_bundle, backend="hailo"):
        pass
    assert fake_hailo.stats.vdevice_devices == [CHIP_B, CHIP_B]
    monkeypatch.delenv("HEFSEARCH_HAILO_DEVICE")
    with Encoder.open(hef_bundle, backend="hailo"):  # none named: HailoRT's first device
        pass
    assert fake_hailo.stats.vdevice_devices[-1] == CHIP_A


def test_a_device_that_is_not_there_is_refused_by_name(fake_hailo, hef_bundle):
    two_chips(fake_hailo)
    with pytest.raises(BackendUnavailable) as e:
        Encoder.open(hef_bundle, backend="hailo", device_id="0000:03:00.0")
    assert "No Hailo device 0000:03:00.0" in e.value.message
    assert CHIP_A in e.value.message and CHIP_B in e.value.message
    assert "HEFSEARCH_HAILO_DEVICE" in e.value.hint
    assert fake_hailo.stats.vdevice_params == []


def test_two_encoders_in_one_process_use_their_own_chips(fake_hailo, tiny_bert_bundle, tmp_path):
    path = hailo8_bundle(tiny_bert_bundle, tmp_path)
    two_chips(fake_hailo, "HAILO8", "4.23.0")  # 4.x without the service: one process per device
    with Encoder.open(path, backend="hailo", device_id=CHIP_A) as a, \
            Encoder.open(path, backend="hailo", device_id=CHIP_B) as b:
        assert np.allclose(a.encode(TEXTS), b.encode(TEXTS), atol=1e-6)
    assert fake_hailo.stats.vdevice_devices == [CHIP_A, CHIP_B]


HOLDER = r"""
import sys
from hailo_platform._fake import WORLD
from hefsearch.embed.encoder import Encoder

WORLD.version = "4.23.0"
WORLD.devices = [{"id": "0000:01:00.0", "arch": "HAILO8"}, {"id": "0000:02:00.0", "arch": "HAILO8"}]
WORLD.lock_dir = sys.argv[1]
with Encoder.open(sys.argv[2], backend="hailo", device_id="0000:01:00.0") as enc:
    enc.encode(["held"])
    print("ready", flush=True)
    sys.stdin.read()  # hold the device until the test closes stdin
"""


def test_two_processes_each_on_their_own_chip(fake_hailo, tiny_bert_bundle, tmp_path, monkeypatch):
    """HailoRT 4.x: another process holds chip A; this one still opens chip B by its id (and,
    naming none, HailoRT skips the busy chip); naming chip A says it is in use (status 73)."""
    path = hailo8_bundle(tiny_bert_bundle, tmp_path)
    two_chips(fake_hailo, "HAILO8", "4.23.0")
    with holding_process(HOLDER, fake_hailo.lock_dir, str(path), env={"HEFSEARCH_HAILO_SERVICE": "0"}):
        with Encoder.open(path, backend="hailo", device_id=CHIP_B) as enc:
            assert enc.encode(TEXTS).shape == (3, 32)
        with Encoder.open(path, backend="hailo"):
            pass
        assert fake_hailo.stats.vdevice_devices == [CHIP_B, CHIP_B]
        with pytest.raises(BackendUnavailable) as e:
            Encoder.open(path, backend="hailo", device_id=CHIP_A)
        assert f"Hailo-8 {CHIP_A} is in use by another process" in e.value.message
        assert "73, HAILO_DEVICE_IN_USE" in e.value.message


def test_the_fake_takes_device_ids_as_hailort_does(fake_hailo):
    """The fake's own contract (vdevice_api.hpp, vdevice.cpp): ids in the params or as the
    argument, not both; the argument alone means default params (scheduler NONE on 4.x)."""
    import hailo_platform as hp
    from hailo_platform.pyhailort.pyhailort import HailoRTInvalidArgumentException, HailoRTInvalidOperationException

    two_chips(fake_hailo, "HAILO8", "4.23.0")
    assert hp.Device.scan() == [CHIP_A, CHIP_B]
    params = hp.VDevice.create_params()
    params.device_ids = [CHIP_B]
    with pytest.raises(HailoRTInvalidOperationException):
        hp.VDevice(params, device_ids=[CHIP_A])
    with pytest.raises(HailoRTInvalidArgumentException):
        hp.VDevice(device_ids=["0000:09:00.0"])
    vdev = hp.VDevice(device_ids=[CHIP_A])
    assert vdev.get_physical_devices_ids() == [CHIP_A]
    assert fake_hailo.stats.vdevice_params[-1][0].name == "NONE"
    vdev.release()


@pytest.mark.parametrize("a, b, same", [
    ("0000:01:00.0", "01:00.0", True), ("0000:01:00.0", "0000:01:00.0", True),
    ("0000:01:00.0", "0001:01:00.0", False), ("0000:01:00.0", "0000:02:00.0", False),
    ("0000:0A:00.0", "0000:0a:00.0", True), ("192.168.0.2", "192.168.0.2", True),
])
def test_device_ids_compare_as_hailort_compares_them(a, b, same):
    assert same_device(a, b) is same


def test_index_device_option_picks_the_chip(fake_hailo, hef_bundle, tmp_path):
    from click.testing import CliRunner

    from hefsearch.cli.main import main
    from tests.support.library_helpers import write_corpus

    two_chips(fake_hailo)
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=2)
    args = ["index", str(docs), "--library", str(tmp_path / "lib"), "--bundle", str(hef_bundle),
            "--backend", "hailo", "--device", CHIP_B]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert set(fake_hailo.stats.vdevice_devices) == {CHIP_B}
    r = CliRunner().invoke(main, [*args, "--ray", "auto"])
    assert r.exit_code == 2 and "--device picks a chip of this machine" in r.output

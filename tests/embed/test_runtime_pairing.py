"""The DFC that built a HEF against the HailoRT that runs it: the table, doctor's lines, and the
backend's words when HailoRT refuses a HEF.

The HailoRT side is verified against the contract fake (tests/fakes/hailo_platform), which refuses
a HEF of a newer DFC line with status 92 HAILO_HEF_NOT_SUPPORTED as hailort's hef.cpp does for HEF
extensions it does not know (that every newer DFC line trips it is the fake's guess)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hefsearch.base.errors import BackendUnavailable
from hefsearch.diagnose.doctor import FAIL, OK, WARN, run_doctor
from hefsearch.embed.encoder import Encoder
from hefsearch.embed.runtime_pairing import (KNOWN_PAIRS, hailort_pair, is_hef_refused, pairing, release_line,
                                             ways_out)
from tests.fakes.fake_hef import FAKES, add_fake_hef, copy_bundle


def test_every_known_pair_names_its_public_source():
    assert all(d and rt and src for d, rt, src in KNOWN_PAIRS)
    assert {(d, rt) for d, rt, _ in KNOWN_PAIRS} >= {("5.3", "5.3"), ("5.1", "5.1"), ("3.33", "4.23"), ("3.34", "4.24")}


@pytest.mark.parametrize("dfc, runtime, known", [
    ("5.3.0", "5.3.0", True),          # the public Hailo-10H report's own stack
    ("5.3.0+fake", "5.3.2", True),     # a patch release of the same line
    ("5.1.0", "5.1.1", True),          # the Raspberry Pi archive's HailoRT and the zoo's DFC 5.1.0
    ("5.3.0", "5.1.1", False),         # the report's DFC on the Raspberry Pi archive's HailoRT
    ("3.33.0", "4.24.0", False),
    ("5.9.0", "5.9.0", None),          # nobody has published this line
    (None, "5.1.1", None),             # an old manifest without the DFC version
])
def test_pairing(dfc, runtime, known):
    p = pairing(dfc, runtime)
    assert p.known is known and p.mismatch is (known is False)
    if known is False:
        assert "not a known pair" in p.detail and release_line(runtime) in p.detail


def test_the_two_ways_out_name_both_releases_and_say_never_both():
    text = ways_out("5.3.0", "5.1.1")
    assert "DFC 5.1.x" in text and "HailoRT 5.3.x" in text and "never both" in text
    assert "Raspberry Pi" in text and "Developer Zone" in text


def test_a_build_records_the_runtime_its_hef_needs():
    assert hailort_pair("5.3.0+fake")["release"] == "5.3"
    assert hailort_pair("5.9.0") == {"release": None,
                                     "source": "no public source pairs DFC 5.9.0 with a HailoRT release"}


def test_hailorts_refusal_is_recognised_as_the_binding_words_it():
    # PYH ExceptionWrapper: a status without a class of its own -> "libhailort failed with error: N (NAME)"
    assert is_hef_refused(RuntimeError("libhailort failed with error: 92 (HAILO_HEF_NOT_SUPPORTED)"))
    assert not is_hef_refused(RuntimeError("libhailort failed with error: 93 (HAILO_HEF_NOT_COMPATIBLE_WITH_DEVICE)"))
    assert not is_hef_refused(RuntimeError("libhailort failed with error: 920 (SOMETHING)"))


def test_the_fake_hailort_version_is_set_by_the_environment(tmp_path):
    """Another process (the arm64 Pi check) sets HEFSEARCH_FAKE_HAILORT_VERSION to the Raspberry Pi
    archive's 5.1.1; hailo_platform.__version__ (as the real binding's __init__.py has it) follows."""
    code = "import hailo_platform; print(hailo_platform.__version__)"
    env = {**os.environ, "HEFSEARCH_FAKE_HAILORT_VERSION": "5.1.1", "PYTHONPATH": str(FAKES)}
    env.pop("HEFSEARCH_FAKE_HAILO_WORLD", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "5.1.1"


def _bundle(tiny_bert_bundle, tmp_path, dfc):
    path = copy_bundle(tiny_bert_bundle, tmp_path / f"b{dfc}")
    add_fake_hef(path, in_type="FLOAT32", dfc_version=dfc)
    return path


def test_doctor_on_the_raspberry_pi_runtime_with_a_dfc_530_hef(fake_hailo, tiny_bert_bundle, tmp_path):
    """HailoRT 5.1.1 (the Raspberry Pi archive's) and a HEF from DFC 5.3.0: doctor prints both
    versions, says they are no known pair, and the fix is the two ways out; HailoRT refuses the HEF."""
    fake_hailo.version = "5.1.1"
    checks = {c.name: c for c in run_doctor(_bundle(tiny_bert_bundle, tmp_path, "5.3.0"), check_lib=False).checks}
    assert "HailoRT 5.1.1" in checks["HailoRT"].detail
    hef = checks["HEF encoder.hailo10h.hef"]
    assert hef.status == FAIL  # the fake HailoRT refuses it, as a 5.1 runtime is expected to
    assert "DFC 5.3.0" in hef.detail and "HailoRT 5.1.1" in hef.detail and "not a known pair" in hef.detail
    assert "DFC 5.1.x" in hef.fix and "HailoRT 5.3.x" in hef.fix and "never both" in hef.fix
    assert hef.fix.count("never both") == 1


def test_doctor_says_a_known_pair(fake_hailo, tiny_bert_bundle, tmp_path):
    fake_hailo.version = "5.1.1"
    checks = {c.name: c for c in run_doctor(_bundle(tiny_bert_bundle, tmp_path, "5.1.0"), check_lib=False).checks}
    hef = checks["HEF encoder.hailo10h.hef"]
    assert hef.status == OK and "DFC 5.1.0 and HailoRT 5.1.1 are a known pair" in hef.detail


def test_doctor_warns_on_a_mismatch_hailort_still_reads(fake_hailo, tiny_bert_bundle, tmp_path):
    """An older DFC's HEF on a newer runtime loads in the fake (a guess); doctor still warns: no
    public source pairs them, and the ways out are the same."""
    fake_hailo.version = "5.3.0"
    checks = {c.name: c for c in run_doctor(_bundle(tiny_bert_bundle, tmp_path, "5.1.0"), check_lib=False).checks}
    hef = checks["HEF encoder.hailo10h.hef"]
    assert hef.status == WARN and "not a known pair" in hef.detail and "streams match the manifest" in hef.detail
    assert "DFC 5.3.x" in hef.fix and "never both" in hef.fix


def test_the_backend_names_both_versions_when_hailort_refuses_the_hef(fake_hailo, tiny_bert_bundle, tmp_path):
    fake_hailo.version = "5.1.1"
    with pytest.raises(BackendUnavailable) as e:
        Encoder.open(_bundle(tiny_bert_bundle, tmp_path, "5.3.0"), backend="hailo")
    msg, hint = e.value.message, e.value.hint
    assert "HailoRT 5.1.1 refused" in msg and "DFC 5.3.0" in msg and "HAILO_HEF_NOT_SUPPORTED" in msg
    assert "DFC 5.1.x" in hint and "HailoRT 5.3.x" in hint and "never both" in hint

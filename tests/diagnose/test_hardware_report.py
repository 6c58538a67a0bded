"""``hefsearch doctor --report FILE`` against the contract fake of HailoRT (tests/fakes).

Verified against the fake only: what a real device reports is what the file is for.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from hefsearch.cli.main import main


def test_report_holds_versions_device_streams_contract_verify_and_speed(fake_hailo, hef_bundle, tmp_path):
    fake_hailo.async_queue_size = 8
    out = tmp_path / "report.json"
    res = CliRunner().invoke(main, ["doctor", "--report", str(out), "--bundle", str(hef_bundle),
                                    "--library", str(tmp_path / "lib")])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["versions"]["hailort"] == fake_hailo.version
    (dev,) = doc["devices"]
    assert dev["arch"] == "hailo10h" and dev["firmware"]
    (hef,) = doc["hefs"]
    names = [s["name"] for s in hef["hailort"]["inputs"] + hef["hailort"]["outputs"]]
    assert names == ["encoder/input_layer1", "encoder/input_layer2", "encoder/layer_normalization5"]
    assert hef["hailort"]["inputs"][1]["shape"] == [1, 1, 64]  # the keys01 mask: one 0/1 value per key
    assert hef["contract"]["ok"] and hef["contract"]["mask_layout"]["layout"] == "keys01"
    assert doc["verify"]["cause"] == "match"
    by_batch = {s["requested_device_batch"]: s for s in doc["speed"]}
    assert by_batch[1]["device_batch"] == 1 and by_batch[8]["device_batch"] == 8
    assert all(s["frames_per_s"] > 0 for s in doc["speed"])
    # a float32 stream in this fake HEF: 64 keys x 4 bytes; HailoRT 5.x converts on the device
    assert by_batch[8]["link_bytes_per_frame"]["attention_mask"] == 64 * 4
    assert by_batch[8]["link_bytes_per_frame"]["last_hidden_state"] == 64 * 32 * 4
    assert by_batch[8]["format_conversion"] == "device"
    assert 1 in fake_hailo.stats.configured_batches and 8 in fake_hailo.stats.configured_batches
    assert "wrote" in res.output and "contract ok" in res.output


def test_report_is_written_without_hailort(no_hailo, hef_bundle, tmp_path):
    out = tmp_path / "report.json"
    res = CliRunner().invoke(main, ["doctor", "--report", str(out), "--bundle", str(hef_bundle),
                                    "--library", str(tmp_path / "lib")])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["versions"]["hailort"] is None
    assert "HailoRT" in doc["devices"]["error"]
    assert all("error" in s for s in doc["speed"])
    assert doc["bundle"]["hidden"] > 0

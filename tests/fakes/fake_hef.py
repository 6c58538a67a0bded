"""Write fake "HEF" files (JSON read by the fake ``hailo_platform``) into a bundle, the way
``hefsearch compile hef`` records a real one in the manifest. Tests only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hefsearch.embed.bundle import Bundle, EncoderEntry

FAKES = Path(__file__).resolve().parent


def copy_bundle(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _hidden_range(bundle: Bundle, seq: int) -> tuple[float, float]:
    """min/max of the FP32 body's hidden states on the sample texts (the "calibration")."""
    from hefsearch.embed.encoder import Encoder
    from hefsearch.embed.samples import VERIFY_TEXTS

    with Encoder.open(bundle, backend="cpu") as enc:
        host = enc.host
        tok = host.tokenize(VERIFY_TEXTS[:12])
        ids = [a[:seq] for a in tok.ids]
        e, m = host.embed(ids, pad_to=seq)
        h = enc.backend.run(e, m)
    h = h[m.astype(bool)]
    return float(h.min()), float(h.max())


def _quant(lo: float, hi: float, qmax: int = 255) -> list[list[float]]:
    lo, hi = min(lo, 0.0) * 1.05, max(hi, 0.0) * 1.05
    scale = (hi - lo) / qmax
    return [[scale, float(round(-lo / scale))]]


def add_fake_hef(
    bundle_dir: Path,
    *,
    hw_arch: str = "hailo10h",
    seq_len: int | None = None,
    out_type: str = "FLOAT32",
    out_order: str = "FCR",
    split: str | None = None,
    in_type: str = "UINT8",
    device_bug: str | None = None,
    manifest_streams: bool = True,
    dfc_version: str = "5.3.0",
    precision: str = "a8",
    net: str = "encoder",
    file: str | None = None,
) -> EncoderEntry:
    """Add a fake HEF to the bundle in ``bundle_dir`` and record it in the manifest.

    ``out_type`` is the output's native type on the "device" (UINT8: values are quantised with
    a scale and zero point from the FP32 range); ``split`` "channels"/"tokens" splits the
    output over two streams; ``device_bug`` "transpose"/"permute_channels" makes the device
    write a wrong layout (for ``doctor --verify``).
    """
    bundle = Bundle.open(bundle_dir)
    seq = int(seq_len or bundle.seq_len)
    hidden = bundle.hidden
    file = file or (f"encoder.{hw_arch}.hef" if seq == bundle.seq_len else f"encoder.{hw_arch}.s{seq}.hef")
    quant = _quant(*_hidden_range(bundle, seq)) if out_type != "FLOAT32" else [[1.0, 0.0]]
    inputs = [
        {"name": f"{net}/input_layer1", "role": "embeddings", "shape": [1, seq, hidden], "order": "NHWC",
         "type": in_type, "quant": [[0.05, 128.0]]},
        {"name": f"{net}/input_layer2", "role": "attention_mask", "shape": [1, 1, seq], "order": "NHWC",
         "type": in_type, "quant": [[1.0 / 255, 0.0]]},
    ]
    if split is None:
        outputs = [{"name": f"{net}/output_layer1", "shape": [1, seq, hidden], "order": out_order,
                    "type": out_type, "quant": quant}]
    elif split == "channels":
        half = hidden // 2
        outputs = [
            {"name": f"{net}/output_layer1", "shape": [1, seq, half], "order": out_order, "type": out_type,
             "quant": quant, "take": {"axis": "channels", "start": 0, "stop": half}},
            {"name": f"{net}/output_layer2", "shape": [1, seq, hidden - half], "order": out_order,
             "type": out_type, "quant": quant, "take": {"axis": "channels", "start": half, "stop": hidden}},
        ]
    elif split == "tokens":
        half = seq // 2
        outputs = [
            {"name": f"{net}/output_layer1", "shape": [1, half, hidden], "order": out_order, "type": out_type,
             "quant": quant, "take": {"axis": "tokens", "start": 0, "stop": half}},
            {"name": f"{net}/output_layer2", "shape": [1, seq - half, hidden], "order": out_order,
             "type": out_type, "quant": quant, "take": {"axis": "tokens", "start": half, "stop": seq}},
        ]
    else:
        raise ValueError(split)
    hef = {
        "fake_hef": 1, "hw_arch": hw_arch, "network_group": net, "onnx": "encoder.onnx",
        "seq_len": seq, "hidden": hidden, "inputs": inputs, "outputs": outputs,
        # HailoRT's sorted order is not alphabetical in general; list it explicitly
        "sorted_outputs": [o["name"] for o in outputs],
        "device_bug": device_bug,
    }
    (bundle.path / file).write_text(json.dumps(hef, indent=1))
    extra = {"precision": precision, "dfc_version": dfc_version}
    if manifest_streams:
        extra["inputs"] = {
            "embeddings": {"name": inputs[0]["name"], "shape": [1, seq, hidden]},
            "attention_mask": {"name": inputs[1]["name"], "shape": [1, 1, seq]},
        }
        extra["outputs"] = {"last_hidden_state": {"names": [o["name"] for o in outputs], "shape": [1, seq, hidden]}}
    entry = EncoderEntry(kind="hef", file=file, seq_len=seq, hw_arch=hw_arch, extra=extra)
    bundle.add_file(file)
    bundle.upsert_encoder(entry)
    bundle.save_manifest()
    return entry


def edit_fake_hef(bundle_dir: Path, file: str, edit) -> None:
    """Change a fake HEF's JSON with ``edit(dict)`` and refresh its manifest checksum."""
    path = Path(bundle_dir) / file
    d = json.loads(path.read_text())
    edit(d)
    path.write_text(json.dumps(d, indent=1))
    manifest = json.loads((Path(bundle_dir) / "manifest.json").read_text())
    bundle = Bundle(Path(bundle_dir), manifest)  # not Bundle.open: the recorded size is stale now
    bundle.add_file(file)
    bundle.save_manifest()


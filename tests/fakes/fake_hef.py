"""Write fake "HEF" files (JSON read by the fake ``hailo_platform``) into a bundle, the way
``hefsearch compile hef`` records a real one in the manifest. Tests only.

The streams follow what Hailo's compiler makes of a zoo-style encoder (docs/hailo-facts.md,
"Compiled stream contract" and "Attention mask"): inputs ``<net>/input_layerN`` folded by the
allocator's automatic spatial reshape, outputs named after the layer that feeds them, the mask
in the per-key 0/1 layout at the mask Mul (the public Hailo-10H report, the default), the
score-shaped one (the zoo's MiniLM recipe) or the per-key additive one (the zoo's BERT recipe);
with ``set_input_mask_to_softmax()`` the carried ONNX applies the mask inside softmax as the
fake DFC does (``hailo_semantics.py``). Quantisation ranges (min/max with a 5% margin) are the
fake's own choice, not the DFC's algorithm."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

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


def folded(shape: list[int]) -> list[int]:
    """The allocator's automatic spatial reshape as the zoo documents it: [1, W, C] -> [W/8, 8, C]
    (all_minilm_l6_v2: 1x128x384 -> 16x8x384, 1x128x1536 -> 16x8x1536)."""
    h, w, c = shape
    if h == 1 and w > 8 and w % 8 == 0:
        return [w // 8, 8, c]
    return list(shape)


def _quant_of(values: list[float], qmax: int = 255) -> list[list[float]]:
    return _quant(min(values), max(values), qmax)


def _exact_quant(values: list[float], qmax: int = 255) -> list[list[float]]:
    lo, hi = min(min(values), 0.0), max(max(values), 0.0)
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
    manifest_streams: str | bool = "hef",
    mask_mode: str = "keys01",
    fold: bool = True,
    dfc_version: str = "5.3.0",
    precision: str = "a8",
    net: str = "encoder",
    file: str | None = None,
    out_layer: str = "layer_normalization5",
    flags: dict | None = None,
    output_basis: str | None = None,
    mask_quant: str = "exact",
) -> EncoderEntry:
    """Add a fake HEF to the bundle in ``bundle_dir`` and record it in the manifest.

    The HEF looks like what the Dataflow Compiler makes of the zoo-style body: inputs
    ``<net>/input_layer1`` (embeddings) and ``<net>/input_layer2`` (mask, layout by ``mask_mode``),
    folded by the automatic spatial reshape (``fold``); the output named after the layer that
    feeds it (``out_layer``). The device runs the DFC-facing body written next to the HEF.

    ``manifest_streams``: "hef" records the HEF's own streams (what ``compile hef`` does), "parsed"
    records the parsed network's names and shapes (``output_layer1``, unfolded), False none.
    ``out_type`` is the output's native type on the "device" (UINT8: values are quantised with
    a scale and zero point from the FP32 range); ``split`` "channels"/"tokens" splits the
    output over two streams; ``device_bug`` "transpose"/"permute_channels" makes the device
    write a wrong layout (for ``doctor --verify``); ``flags`` {stream name: "TRANSPOSED"};
    ``output_basis`` "permuted"/"rotated": the outputs in the compiled network's own channel basis;
    ``mask_quant`` "exact" (min/max of the two mask values, as a calibration of a two-valued input
    gives them, so uint8 holds both) or "margin" (the 5% margin of the other streams: it cannot).
    """
    from hefsearch.compile.hef.dfc_onnx import MASK, make_dfc_onnx
    from hefsearch.embed.mask_layout import MaskLayout, hef_mask_mode

    from .hailo_semantics import mask_inside_softmax

    bundle = Bundle.open(bundle_dir)
    seq = int(seq_len or bundle.seq_len)
    hidden = bundle.hidden
    heads = int(bundle.model.get("heads") or 1)
    file = file or (f"encoder.{hw_arch}.hef" if seq == bundle.seq_len else f"encoder.{hw_arch}.s{seq}.hef")
    quant = _quant(*_hidden_range(bundle, seq)) if out_type != "FLOAT32" else [[1.0, 0.0]]
    layout = MaskLayout.for_mode(mask_mode, seq, heads, bundle.mask_value)
    body = file + ".body.onnx"
    make_dfc_onnx(bundle, bundle.path / body, seq, mask_mode)
    softmax = hef_mask_mode(mask_mode).softmax_command
    if softmax:
        path = bundle.path / body
        path.write_bytes(mask_inside_softmax(path.read_bytes(), MASK))
    e_lo, e_hi = _embedding_range(bundle)
    mask_vals = [0.0, 1.0] if layout.binary else [bundle.mask_value, 0.0]
    emb_shape = [1, seq, hidden]
    mask_shape = list(layout.parsed_shape)
    flags = flags or {}
    inputs = [
        {"name": f"{net}/input_layer1", "role": "embeddings", "shape": folded(emb_shape) if fold else emb_shape,
         "order": "NHWC", "type": in_type, "quant": _quant(e_lo, e_hi)},
        {"name": f"{net}/input_layer2", "role": "attention_mask",
         "shape": folded(mask_shape) if fold else mask_shape, "order": "NHWC", "type": in_type,
         "quant": _quant_of(mask_vals) if mask_quant == "margin" else _exact_quant(mask_vals)},
    ]
    for i in inputs:
        i["flags"] = flags.get(i["name"], "NONE")
    o = f"{net}/{out_layer}"
    if split is None:
        outputs = [{"name": o, "shape": [1, seq, hidden], "order": out_order, "type": out_type, "quant": quant}]
    elif split == "channels":
        half = hidden // 2
        outputs = [
            {"name": f"{o}_1", "shape": [1, seq, half], "order": out_order, "type": out_type,
             "quant": quant, "take": {"axis": "channels", "start": 0, "stop": half}},
            {"name": f"{o}_0", "shape": [1, seq, hidden - half], "order": out_order,
             "type": out_type, "quant": quant, "take": {"axis": "channels", "start": half, "stop": hidden}},
        ]
    elif split == "tokens":
        half = seq // 2
        outputs = [
            {"name": f"{o}_1", "shape": [1, half, hidden], "order": out_order, "type": out_type,
             "quant": quant, "take": {"axis": "tokens", "start": 0, "stop": half}},
            {"name": f"{o}_0", "shape": [1, seq - half, hidden], "order": out_order,
             "type": out_type, "quant": quant, "take": {"axis": "tokens", "start": half, "stop": seq}},
        ]
    else:
        raise ValueError(split)
    for out in outputs:
        out["flags"] = flags.get(out["name"], "NONE")
    hef = {
        "fake_hef": 1, "hw_arch": hw_arch, "network_group": net, "onnx": body, "sdk_version": dfc_version,
        "seq_len": seq, "hidden": hidden, "inputs": inputs, "outputs": outputs,
        "mask_input": {"layout": layout.layout, "heads": heads, "softmax": softmax},
        "output_basis": output_basis,
        # HailoRT's sorted order is neither alphabetical nor the listing order in general
        "sorted_outputs": [x["name"] for x in outputs],
        "device_bug": device_bug,
    }
    (bundle.path / file).write_text(json.dumps(hef, indent=1))
    extra = {"precision": precision, "dfc_version": dfc_version, "mask": layout.mode,
             "mask_mode": hef_mask_mode(mask_mode).name,
             "mask_value": bundle.mask_value, "mask_input": layout.to_dict()}
    if manifest_streams == "hef" or manifest_streams is True:
        extra["inputs"] = {x["role"]: {"name": x["name"], "shape": x["shape"]} for x in inputs}
        extra["outputs"] = {"last_hidden_state": {"names": [x["name"] for x in outputs], "shape": [1, seq, hidden]}}
    elif manifest_streams == "parsed":
        extra["inputs"] = {"embeddings": {"name": f"{net}/input_layer1", "shape": emb_shape},
                           "attention_mask": {"name": f"{net}/input_layer2", "shape": mask_shape}}
        extra["outputs"] = {"last_hidden_state": {"names": [f"{net}/output_layer1"], "shape": [1, seq, hidden]}}
    entry = EncoderEntry(kind="hef", file=file, seq_len=seq, hw_arch=hw_arch, extra=extra)
    bundle.add_file(file)
    bundle.upsert_encoder(entry)
    bundle.save_manifest()
    return entry


def _embedding_range(bundle: Bundle) -> tuple[float, float]:
    """min/max of the host's embedding sums (the "calibration" of the embeddings input)."""
    word, pos = bundle.table("word"), bundle.table("position")
    lo = float(np.min(word[:2000])) + float(np.min(pos)) + float(np.min(bundle.table("token_type")[0]))
    hi = float(np.max(word[:2000])) + float(np.max(pos)) + float(np.max(bundle.table("token_type")[0]))
    return lo, hi


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


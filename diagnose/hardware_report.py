"""``hefsearch doctor --report FILE``: one JSON file a Pi owner can share, the first real data
point for the NPU path (everything else in hefsearch's NPU code is verified against fakes only).

It holds, each part independent so one failure does not lose the rest:

- versions: hefsearch, Python, platform, HailoRT, numpy, onnxruntime, tokenizers;
- devices: id, architecture and firmware as the device reports them;
- the doctor checks (as ``hefsearch doctor --json``);
- every HEF of the bundle: its stream infos exactly as HailoRT reports them (name, shape, format
  order/type/flags, quantisation), the manifest's record, and the contract check (which stream
  is which, notes, problems);
- ``--verify``: the NPU's vectors against FP32 on the built-in sentences;
- speed: frames/s through the hailo backend at device batch 1 and 8 (HailoRT may lower 8), with
  the bytes each frame costs on the host and on the PCIe link.

This module, too, is verified against the contract fake of hailo_platform (tests/fakes) only.
"""

from __future__ import annotations

import platform
import sys
import time
import traceback
from pathlib import Path

import numpy as np

#: frames timed per device batch setting
SPEED_FRAMES = 64


def _guard(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except Exception as e:  # a report must be written whatever fails; say what failed
        return {"error": f"{type(e).__name__}: {getattr(e, 'message', None) or e}",
                "where": traceback.format_exc(limit=3).splitlines()[-3:]}


def versions() -> dict:
    from hefsearch.embed.hailo_device import runtime_version

    from .doctor import dist_version

    out = {"python": sys.version.split()[0], "platform": platform.platform(), "machine": platform.machine(),
           "hailort": runtime_version()}
    for dist in ("hefsearch", "numpy", "onnxruntime", "tokenizers", "faiss-cpu"):
        out[dist] = dist_version(dist)
    return out


def devices() -> list[dict]:
    from hefsearch.embed.hailo_device import probe_devices

    return [{"id": d.id, "arch": d.arch, "label": d.label, "firmware": d.firmware}
            for d in probe_devices()]


def _spec(s) -> dict:
    return {"name": s.name, "shape": list(s.shape), "order": s.order, "type": s.type, "flags": s.flags,
            "quant": [list(q) for q in s.quant]}


def hef_streams(bundle) -> list[dict]:
    from hefsearch.embed.hef_file import inspect_hef

    out = []
    for entry in bundle.encoder_entries("hef"):
        item = {"file": entry.file, "hw_arch": entry.hw_arch, "seq_len": entry.seq_len,
                "recorded": {k: entry.extra.get(k) for k in ("inputs", "outputs", "mask_input", "streams_from",
                                                             "dfc_version", "precision")}}
        streams = _guard(inspect_hef, bundle.path / entry.file, bundle)
        if isinstance(streams, dict):
            item["hailort"] = streams
        else:
            item["hailort"] = {"network_groups": streams.network_groups,
                               "inputs": [_spec(s) for s in streams.inputs],
                               "outputs": [_spec(s) for s in streams.outputs],
                               "sorted_outputs": streams.sorted_outputs}
            item["contract"] = streams.check.to_dict() if streams.check else None
        out.append(item)
    return out


def speed(bundle, device_batch: int, frames: int = SPEED_FRAMES) -> dict:
    """frames/s of the hailo backend at one device batch setting, on full-window frames."""
    from hefsearch.embed.backends import open_backend
    from hefsearch.embed.host import HostPipeline
    from hefsearch.embed.samples import VERIFY_TEXTS

    be = open_backend("hailo", bundle, device_batch=device_batch, batch_size=max(8, device_batch))
    try:
        seq = max(be.seq_lens)
        host = HostPipeline(bundle, max_tokens=seq)
        ids = host.tokenize([" ".join(VERIFY_TEXTS[i % len(VERIFY_TEXTS):] + VERIFY_TEXTS)
                             for i in range(frames)]).ids
        e, mask = host.embed(ids, pad_to=seq)
        be.run(e[:2], mask[:2])  # first frames pay for the pipeline's start
        t0 = time.perf_counter()
        be.run(e, mask)
        seconds = time.perf_counter() - t0
        cost = be.frame_cost(seq)
        return {"requested_device_batch": device_batch, "device_batch": be.device_batch, "seq_len": seq,
                "frames": frames, "frames_per_s": round(frames / seconds, 2),
                "host_bytes_per_frame": cost.host_bytes, "link_bytes_per_frame": cost.link_bytes,
                "format_conversion": cost.conversion,
                "notes": list(be.notes)}
    finally:
        be.close()


def build_report(bundle: str | Path | None = None, library: str | Path | None = None, *,
                 verify: bool = True, say=None) -> dict:
    from hefsearch.embed.bundle import Bundle

    from .doctor import library_bundle, run_doctor

    say = say or (lambda m: None)
    report: dict = {"report": "hefsearch hardware report", "version": 1,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    say("versions")
    report["versions"] = _guard(versions)
    say("devices")
    report["devices"] = _guard(devices)
    say("doctor checks")
    doc = _guard(run_doctor, bundle, library)
    if isinstance(doc, dict):
        report["doctor"] = doc
        target = bundle or _guard(library_bundle, library)
    else:  # the bundle the doctor checked: the given one, else the library's (opened once)
        report["doctor"] = doc.to_dict()
        target = doc.bundle
    if not target or isinstance(target, dict):
        report["bundle"] = {"error": "no bundle: pass --bundle BUNDLE"}
        return report
    b = _guard(Bundle.open, target)
    if isinstance(b, dict):
        report["bundle"] = b
        return report
    report["bundle"] = {"path": str(b.path), "model": b.model_id, "hidden": b.hidden, "seq_len": b.seq_len}
    say("HEF streams")
    report["hefs"] = _guard(hef_streams, b)
    if verify:
        from hefsearch.evaluate.npu_verify import verify_npu

        say("verify (NPU vs FP32)")
        v = _guard(verify_npu, b, backend="hailo")
        report["verify"] = v if isinstance(v, dict) else v.to_dict()
    report["speed"] = []
    for batch in (1, 8):
        say(f"speed at device batch {batch}")
        report["speed"].append(_guard(speed, b, batch))
    return report


def summary(report: dict) -> list[str]:
    """A few lines for the terminal about what the report holds."""
    lines = []
    devs = report.get("devices")
    if isinstance(devs, list):
        lines.append("devices: " + (", ".join(f"{d['label']} (fw {d['firmware']})" for d in devs) or "none found"))
    else:
        lines.append(f"devices: {devs.get('error') if isinstance(devs, dict) else devs}")
    hefs = report.get("hefs")
    for h in hefs if isinstance(hefs, list) else []:
        c = h.get("contract") or {}
        lines.append(f"{h['file']}: contract {'ok' if c.get('ok') else 'NOT ok' if c else 'not checked'}")
    v = report.get("verify")
    if isinstance(v, dict) and "error" not in v:
        lines.append(f"verify: {v.get('verdict', '')}")
    for s in report.get("speed") or []:
        if "error" in s:
            lines.append(f"speed: {s['error']}")
        else:
            lines.append(f"speed: {s['frames_per_s']} frames/s at device batch {s['device_batch']} "
                         f"(asked {s['requested_device_batch']})")
    return lines


def json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)

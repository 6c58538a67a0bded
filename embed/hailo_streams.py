"""What crosses the link to a Hailo device: the stream types, the host's quantisers, bytes per frame.

Where HailoRT converts formats decides what crosses PCIe (docs/hailo-facts.md, "Bytes over the
link"): on HailoRT 4.x (Hailo-8/8L) in the host process, so the link carries the HEF's native
bytes whatever the host asks for; on 5.x (Hailo-10H) on the device, so a FLOAT32 buffer crosses
as 4 bytes per value. ``auto`` stream types (:func:`resolve_stream_types`) therefore quantise on
the host to the input stream's own type on 5.x (:func:`stream_quantiser`, HailoRT's formula) and
leave FLOAT32 to HailoRT on 4.x. :class:`FrameCost` counts the bytes; ``bench/host_overhead.py``
measures them. numpy only: nothing here touches HailoRT.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hefsearch.base import settings
from .hef_contract import StreamSpec
from hefsearch.base.versions import major_version

#: the stream types: auto (native on HailoRT 5.x, FLOAT32 on 4.x), float32 or native
ENV_STREAMS = settings.HAILO_STREAMS.name
STREAM_TYPES = ("auto", "float32", "native")
#: the largest value of each native stream type the host quantises to
QMAX = {"UINT8": 255, "UINT16": 65535}


def exact_quantiser(spec: StreamSpec, values: tuple[float, ...]):
    """A host-side quantiser for an input whose only values are ``values``, when the stream's
    native type and single quant info represent them exactly; else None (feed FLOAT32)."""
    if spec.type not in QMAX or len(spec.quant) != 1:
        return None
    scale, zp = spec.quant[0]
    if not scale > 0:
        return None
    q = [v / scale + zp for v in values]
    if any(abs(x - round(x)) > 1e-3 or not 0 <= round(x) <= QMAX[spec.type] for x in q):
        return None
    return stream_quantiser(spec)


def stream_quantiser(spec: StreamSpec):
    """A host-side quantiser to the input stream's native type, or None when the stream has no
    single (scale, zero point): HailoRT's own formula (``quantization.hpp`` ``quantize_input``:
    clip x to the stream's ``limvals`` first, then ``x / scale + zp``, round half to even), so the
    device receives the bytes it would have made from FLOAT32 itself. Without limvals the clip is
    to the float range the type spans; the final clip to the type only guards the cast."""
    if spec.type not in QMAX or len(spec.quant) != 1 or not spec.quant[0][0] > 0:
        return None
    scale, zp = (np.float32(v) for v in spec.quant[0])
    qmax = QMAX[spec.type]
    dtype = np.uint8 if spec.type == "UINT8" else np.uint16
    if scale == 1 and zp == 0:  # HailoRT's identity quant info: rounded only, no limvals clip
        lo, hi = np.float32(-np.inf), np.float32(np.inf)
    elif spec.limvals:
        lo, hi = (np.float32(v) for v in spec.limvals[0])
    else:
        lo, hi = (np.float32(0) - zp) * scale, (np.float32(qmax) - zp) * scale

    def encode(v: np.ndarray) -> np.ndarray:
        q = np.clip(np.asarray(v, dtype=np.float32), lo, hi)
        q /= scale
        q += zp
        np.rint(q, out=q)  # numpy rounds half to even, as HailoRT's bankers_round
        np.clip(q, 0, qmax, out=q)
        return q.astype(dtype)

    return encode


@dataclass
class FrameCost:
    """Bytes one frame costs on the host and on the link, per stream (for bench and doctor):
    ``host_bytes`` what the host builds or reads (the configured format), ``link_bytes`` what
    crosses PCIe (HailoRT 5.x: the configured format, converted on the device; 4.x: the HEF's
    native format, converted in the host process)."""

    host_bytes: dict
    link_bytes: dict
    #: "device" (HailoRT 5.x) or "host" (4.x): where HailoRT converts FLOAT32
    conversion: str = "host"


def resolve_stream_types(kind: str, runtime: str | None) -> str:
    """``auto`` -> "native" on HailoRT 5.x (conversion on the device: send and read the native
    types), "float32" on 4.x (conversion in the host process either way)."""
    if kind not in STREAM_TYPES:
        raise ValueError(f"stream types must be one of {', '.join(STREAM_TYPES)}, not {kind!r}")
    if kind != "auto":
        return kind
    return "native" if (major_version(runtime) or 5) >= 5 else "float32"

"""The ``hailo`` backend: the encoder body compiled to a HEF, run on a Hailo NPU by HailoRT.

Uses HailoRT's InferModel API (HailoRT >= 4.18; the only API on Hailo-10H):

- one ``VDevice`` with the round-robin scheduler and the group id ``"SHARED"``, so the TUI and
  an indexer in another process can use the device at the same time; on a machine with several
  chips, ``device_id`` (or ``HEFSEARCH_HAILO_DEVICE``) names the one to open (set as the params'
  ``device_ids``, so the scheduler and group id stay), as each Ray actor of a multi-chip node does;
- one ``InferModel`` per HEF (a bundle may carry HEFs for several SEQ); each stream's format
  type set *before* ``configure()``. Where HailoRT converts formats decides what crosses the
  link (docs/hailo-facts.md, "Bytes over the link"): on HailoRT 4.x (Hailo-8/8L) in the host
  process, so the link carries the HEF's native bytes whatever the host asks for; on 5.x
  (Hailo-10H) on the device, so a FLOAT32 buffer crosses PCIe as 4 bytes per value. The
  ``auto`` stream types (the default) therefore send the embeddings already quantised to the
  input stream's own type (HailoRT's formula, :func:`stream_quantiser`) and read native outputs,
  dequantising them on the host, on 5.x (4x fewer bytes each way, measured by
  ``bench/host_overhead.py``), and leave both to HailoRT as FLOAT32 on 4.x. The mask, 0/1 or the
  additive pair, is always sent in the stream's own type when it represents the values exactly;
- one Bindings per frame, submitted with ``run_async`` after ``wait_for_async_ready`` (the
  device queue, not the host, sets the pace), then every job waited for with a timeout;
- before the first frame, the HEF's stream infos are checked against the manifest
  (:mod:`hefsearch.embed.hef_contract`); outputs are read with the shape, format order, type
  and quantisation the HEF reports, never assumed.

``hailo_platform`` is imported only here, at call time. HailoRT errors and timeouts become
:class:`DeviceError` with a plain message.

Verified against the contract fake in ``tests/fakes/hailo_platform`` only (written from the
public HailoRT 4.23/5.2 Python sources); not yet run on a physical Hailo device.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import space_names
from ..bundle import Bundle, EncoderEntry
from ..errors import BackendUnavailable, DeviceError, HefsearchError
from ..hef_contract import ContractCheck, HefContract, OutputAssembler, StreamSpec, check_contract, to_stream
from ..versions import major_version
from .base import Backend

log = logging.getLogger("hefsearch.embed.hailo")

SHARED_GROUP_ID = "SHARED"
#: environment overrides: the per-frame timeout, HailoRT 4.x's multi-process service, the bulk
#: device batch
ENV_TIMEOUT = "HEFSEARCH_HAILO_TIMEOUT_MS"
ENV_SERVICE = "HEFSEARCH_HAILO_SERVICE"
ENV_DEVICE_BATCH = "HEFSEARCH_HAILO_DEVICE_BATCH"
#: the one device to open (a PCIe address as Device.scan() lists it) on a machine with several
ENV_DEVICE = "HEFSEARCH_HAILO_DEVICE"
#: the stream types: auto (native on HailoRT 5.x, FLOAT32 on 4.x), float32 or native
ENV_STREAMS = "HEFSEARCH_HAILO_STREAMS"
STREAM_TYPES = ("auto", "float32", "native")
#: the device batch for bulk encoding; the zoo's MiniLM runs 156 FPS at batch 1 and 742 at 8
BULK_DEVICE_BATCH = 8
DEFAULT_TIMEOUT_MS = 10_000
DEFAULT_BATCH_SIZE = 8

INSTALL_HINT = (
    "On a Raspberry Pi 5: 'sudo apt install hailo-h10-all' (AI HAT+ 2, Hailo-10H) or "
    "'sudo apt install hailo-all' (AI Kit / AI HAT+, Hailo-8/8L), reboot, and create your venv "
    "with --system-site-packages so it sees the python3-hailort package. On x86-64: install the "
    "hailort wheel for your Python from Hailo's Developer Zone. Or run on the CPU: --backend cpu."
)
DEVICE_HINT = (
    "Check the device with 'hailortcli fw-control identify' and 'dmesg | grep -i hailo'. "
    "'hefsearch doctor' checks the whole setup."
)

ARCH_LABELS = {
    "hailo8": "Hailo-8",
    "hailo8l": "Hailo-8L",
    "hailo8r": "Hailo-8R",
    "hailo10h": "Hailo-10H",
    "hailo15h": "Hailo-15H",
    "hailo15m": "Hailo-15M",
    "hailo15l": "Hailo-15L",
}


# -- SDK access ---------------------------------------------------------------------------------
def import_hailort():
    """``hailo_platform``, or BackendUnavailable with the install instructions."""
    try:
        import hailo_platform
    except ImportError as e:
        detail = "" if getattr(e, "name", None) == "hailo_platform" else f" ({e})"
        raise BackendUnavailable(
            f"HailoRT's Python package (hailo_platform) is not installed or does not load{detail}.",
            INSTALL_HINT,
        ) from None
    except Exception as e:  # e.g. MissingPyHRTLib: a wheel built for another Python
        raise BackendUnavailable(f"HailoRT's Python package (hailo_platform) failed to load: {e}", INSTALL_HINT) from None
    return hailo_platform


def runtime_version() -> str | None:
    """The installed HailoRT Python package's version, or None when it is not installed."""
    try:
        hp = import_hailort()
    except BackendUnavailable:
        return None
    return str(getattr(hp, "__version__", "") or "unknown")


def arch_name(device_architecture) -> str:
    """A HailoRT DeviceArchitectureTypes value -> the DFC's hw_arch name ("hailo10h")."""
    name = getattr(device_architecture, "name", None) or str(device_architecture)
    name = name.lower()
    return "hailo8" if name == "hailo8_a0" else name


def arch_label(hw_arch: str | None) -> str:
    return ARCH_LABELS.get((hw_arch or "").lower(), hw_arch or "Hailo")


@dataclass(frozen=True)
class DeviceInfo:
    id: str
    arch: str  # DFC hw_arch name: "hailo8", "hailo8l", "hailo10h", ...
    firmware: str | None = None

    @property
    def label(self) -> str:
        return arch_label(self.arch)


def scan_device_ids(hp=None) -> list[str]:
    """The ids of this machine's Hailo devices (PCIe addresses like "0000:01:00.0"), sorted."""
    hp = hp or import_hailort()
    try:
        return sorted(str(i) for i in hp.Device.scan())
    except Exception as e:
        raise DeviceError(f"HailoRT could not scan for devices: {type(e).__name__}: {e}", DEVICE_HINT) from None


def probe_devices(hp=None) -> list[DeviceInfo]:
    """Scan for Hailo devices and read each one's architecture from the device itself.

    Raises DeviceError when a device is present but does not answer.
    """
    hp = hp or import_hailort()
    return [identify_device(hp, dev_id) for dev_id in scan_device_ids(hp)]


def identify_device(hp, dev_id: str) -> DeviceInfo:
    """One device's architecture and firmware, read from the device."""
    try:
        with hp.Device(dev_id) as dev:
            info = dev.control.identify()
    except Exception as e:
        if _is_hailo8_on_5x(e, getattr(hp, "__version__", None)):
            raise hailo8_needs_4x(getattr(hp, "__version__", None)) from None
        raise DeviceError(
            f"Hailo device {dev_id} is present but did not answer: {type(e).__name__}: {e}",
            DEVICE_HINT + " If another program holds the device, stop it or let it use the scheduler.",
        ) from None
    fw = getattr(info, "firmware_version", None)
    return DeviceInfo(str(dev_id), arch_name(info.device_architecture), str(fw) if fw else None)


def _pcie_address(dev_id: str) -> tuple | None:
    """(domain or None, bus, device, function) of "DDDD:BB:DD.F" or "BB:DD.F"; None otherwise."""
    m = re.fullmatch(r"(?:([0-9a-f]{1,4}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.(\d)", dev_id.strip().lower())
    if not m:
        return None
    return (int(m.group(1), 16) if m.group(1) else None, int(m.group(2), 16), int(m.group(3), 16), int(m.group(4)))


def same_device(a: str, b: str) -> bool:
    """Whether two device ids name one device, as HailoRT compares them (the PCIe domain may be
    left out: "01:00.0" is "0000:01:00.0"; docs/hailo-facts.md, Choosing the device)."""
    pa, pb = _pcie_address(str(a)), _pcie_address(str(b))
    if pa is None or pb is None:
        return str(a).strip() == str(b).strip()
    return pa[1:] == pb[1:] and (pa[0] is None or pb[0] is None or pa[0] == pb[0])


def find_device(hp, device_id: str) -> DeviceInfo:
    """The device ``device_id`` names, identified; BackendUnavailable listing the ones there are."""
    ids = scan_device_ids(hp)
    match = [i for i in ids if same_device(i, device_id)]
    if not match:
        raise BackendUnavailable(
            f"No Hailo device {device_id} on this machine; HailoRT finds "
            + (", ".join(ids) if ids else "none") + ".",
            f"Pass one of those (--device ID or {ENV_DEVICE}=ID; 'hailortcli scan' lists them), or leave "
            "it out to use the first free device. " + DEVICE_HINT)
    return identify_device(hp, match[0])


def hef_entries_for(bundle: Bundle, hw_arch: str, precision: str | None = None) -> list[EncoderEntry]:
    """The bundle's HEFs for one chip, one per SEQ (the last listed wins), shortest SEQ first.

    A Hailo-8 also runs HEFs compiled for the Hailo-8L (HailoRT only warns: "lower
    performance"), used when the bundle has none for the Hailo-8 itself.
    """
    def pick(arch: str) -> list[EncoderEntry]:
        by_seq: dict[int, EncoderEntry] = {}
        for e in bundle.encoder_entries("hef"):
            if (e.hw_arch or "").lower() != arch or not e.seq_len:
                continue
            if precision and precision_name(e) != precision:
                continue
            by_seq[int(e.seq_len)] = e
        return [by_seq[s] for s in sorted(by_seq)]

    found = pick(hw_arch.lower())
    if not found and hw_arch.lower() == "hailo8":
        found = pick("hailo8l")
    return found


def precision_name(entry: EncoderEntry) -> str:
    """The precision profile's name ("a8", "balanced", ...); the manifest may hold its dict."""
    p = entry.extra.get("precision")
    if isinstance(p, dict):
        return str(p.get("name", "custom"))
    return str(p) if p else "unknown"


def _enum_name(v) -> str:
    return getattr(v, "name", None) or str(v).split(".")[-1]


def _quant_pairs(quant_infos) -> tuple[tuple[float, float], ...]:
    return tuple((float(q.qp_scale), float(q.qp_zp)) for q in (quant_infos or []))


def _flags_name(fmt) -> str:
    flags = getattr(fmt, "flags", None)
    if flags is None:
        return "NONE"
    name = getattr(flags, "name", None)
    if name:
        return name
    try:  # an int-like value (pybind arithmetic enum): HAILO_FORMAT_FLAGS_TRANSPOSED = 1 << 1
        return "TRANSPOSED" if int(flags) & 2 else "NONE"
    except (TypeError, ValueError):
        return str(flags).split(".")[-1]


def spec_from_vstream_info(info) -> StreamSpec:
    q = getattr(info, "quant_info", None)
    return StreamSpec(
        name=str(info.name),
        shape=tuple(int(x) for x in info.shape),
        order=_enum_name(info.format.order),
        type=_enum_name(info.format.type),
        quant=_quant_pairs([q] if q is not None else []),
        flags=_flags_name(info.format),
    )


def spec_from_infer_stream(stream) -> StreamSpec:
    fmt = stream.format
    return StreamSpec(
        name=str(stream.name),
        shape=tuple(int(x) for x in stream.shape),
        order=_enum_name(fmt.order),
        type=_enum_name(fmt.type),
        quant=_quant_pairs(stream.quant_infos),
        flags=_flags_name(fmt),
    )


@dataclass
class HefStreams:
    """A HEF's stream infos, as plain data (for ``inspect`` and the contract check)."""

    path: Path
    network_groups: list[str]
    inputs: list[StreamSpec]
    outputs: list[StreamSpec]
    sorted_outputs: list[str]
    check: ContractCheck | None = None
    entry: EncoderEntry | None = None
    notes: list[str] = field(default_factory=list)


def read_hef(path: str | Path, hp=None) -> HefStreams:
    """Open a HEF file (no device needed) and read its stream infos."""
    hp = hp or import_hailort()
    path = Path(path)
    try:
        hef = hp.HEF(str(path))
        groups = list(hef.get_network_group_names())
        ins = [spec_from_vstream_info(i) for i in hef.get_input_vstream_infos()]
        outs = [spec_from_vstream_info(o) for o in hef.get_output_vstream_infos()]
        sorted_names = list(hef.get_sorted_output_names())
    except Exception as e:
        raise BackendUnavailable(
            f"HailoRT cannot read {path}: {type(e).__name__}: {e}",
            "Is it a HEF for this HailoRT version? Recompile it, or copy the bundle again.",
        ) from None
    return HefStreams(path, groups, ins, outs, sorted_names)


def inspect_hef(path: str | Path, bundle: Bundle | None = None, hp=None) -> HefStreams:
    """Stream infos of a HEF and, when a bundle lists it, the check against its manifest entry."""
    path = Path(path)
    streams = read_hef(path, hp)
    if bundle is None:
        return streams
    entry = next((e for e in bundle.encoder_entries("hef") if (bundle.path / e.file).resolve() == path.resolve()), None)
    if entry is None:
        streams.notes.append(f"{path.name} is not listed in {bundle.path / 'manifest.json'}")
        return streams
    streams.entry = entry
    streams.check = check_contract(
        HefContract.from_entry(entry, bundle.hidden, bundle.mask_value), streams.inputs, streams.outputs,
        streams.sorted_outputs)
    return streams


def _is_timeout(e: BaseException) -> bool:
    return any("Timeout" in c.__name__ for c in type(e).__mro__)


def _root_cause(errors: list[BaseException]) -> BaseException:
    """After one failure HailoRT aborts every other frame in flight; report the first real one."""
    real = [e for e in errors if not any("Aborted" in c.__name__ for c in type(e).__mro__)]
    return (real or errors)[0]


def timeout_bound_s(timeout_ms: int) -> float:
    """The longest a frame can take before we give up: HailoRT's ``AsyncInferJob.wait(t)`` can
    block for up to twice ``t`` (docs/hailo-facts.md, Timeouts)."""
    return 2 * timeout_ms / 1000


def device_error(e: BaseException, doing: str, timeout_ms: int) -> DeviceError:
    if isinstance(e, DeviceError):
        return e
    if _is_timeout(e):
        return DeviceError(
            f"The Hailo device did not answer while {doing}: no frame finished within the timeout of "
            f"{timeout_ms / 1000:g} s per wait (up to {timeout_bound_s(timeout_ms):g} s, as HailoRT's wait can "
            f"block for twice its timeout).",
            DEVICE_HINT + f" A slow link may need a longer timeout: {ENV_TIMEOUT}=<ms>.")
    return DeviceError(f"The Hailo device failed while {doing}: {type(e).__name__}: {e}", DEVICE_HINT)


# -- sharing the device between processes ----------------------------------------------------
#: HailoRT 4.x's multi-process service listens here unless HAILORT_SERVICE_ADDRESS says otherwise
#: (hailort branch hailo8, hailort/rpc/rpc_definitions.hpp)
SERVICE_SOCKET = "/tmp/hailort_uds.sock"
STATUS_OUT_OF_PHYSICAL_DEVICES = 74
STATUS_DEVICE_IN_USE = 73


def service_running() -> bool:
    """True when HailoRT 4.x's multi-process service (hailort.service) is listening."""
    addr = os.environ.get("HAILORT_SERVICE_ADDRESS")
    if addr and not addr.startswith("unix:"):
        return True  # a TCP address was configured on purpose; trust it
    path = addr.removeprefix("unix://").removeprefix("unix:") if addr else SERVICE_SOCKET
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def _status_code(e: BaseException) -> int | None:
    m = re.search(r"error:?\s*(\d+)", str(e))
    return int(m.group(1)) if m else None


def _is_out_of_devices(e: BaseException) -> bool:
    """74 when HailoRT scans for a free device, 73 when a device id was named (hailort.h)."""
    return _status_code(e) in (STATUS_OUT_OF_PHYSICAL_DEVICES, STATUS_DEVICE_IN_USE) or \
        "OUT_OF_PHYSICAL_DEVICES" in str(e) or "DEVICE_IN_USE" in str(e)


def _is_hailo8_on_5x(e: BaseException, version: str | None = None) -> bool:
    """HailoRT 5.x opening a Hailo-8/8L: pcie_device.cpp logs "only supported in versions 4.x.x"
    and returns HAILO_NOT_SUPPORTED (79), which the Python binding raises as a bare status."""
    if "only supported in versions 4" in str(e):
        return True
    major = major_version(version)
    return major is not None and major >= 5 and (_status_code(e) == 79 or "HAILO_NOT_SUPPORTED" in str(e))


class WrongRuntime(BackendUnavailable):
    """The installed HailoRT's major version cannot drive this chip (5.x and a Hailo-8/8L)."""

    title = "wrong HailoRT for this device"


def hailo8_needs_4x(version: str | None) -> BackendUnavailable:
    return WrongRuntime(
        f"This is a Hailo-8/8L, and HailoRT {version or '5.x'} does not drive it: HailoRT 5.x supports Hailo-10H "
        "only (\"Hailo8 devices are only supported in versions 4.x.x and earlier\").",
        "Install HailoRT 4.x for this device: on a Raspberry Pi 'sudo apt install hailo-all' (it cannot coexist "
        "with hailo-h10-all), then recreate the venv with --system-site-packages. Or run on the CPU: --backend cpu.")


def device_busy(version: str | None, label: str, service: bool | None,
                status: str = "74, HAILO_OUT_OF_PHYSICAL_DEVICES") -> BackendUnavailable:
    """``status``: 73 (HAILO_DEVICE_IN_USE) when the device was named, 74 when HailoRT looked for a free one."""
    if major_version(version) == 4 and not service:
        return BackendUnavailable(
            f"The {label} is in use by another process (HailoRT status {status}). "
            "HailoRT 4.x lets several processes share a device only through its multi-process service.",
            "Start it once: 'sudo systemctl enable --now hailort.service'; hefsearch then uses it by itself "
            f"(or set {ENV_SERVICE}=1). The other program must use the service too (e.g. multi_process_service=True "
            "in its VDevice params). Or stop the other program, or run this one on the CPU: --backend cpu.")
    return BackendUnavailable(
        f"The {label} is in use and HailoRT could not share it (HailoRT status {status}).",
        "Stop the other program that holds it ('hailortcli monitor' shows who runs what), or run on the CPU: "
        "--backend cpu.")


# -- one configured HEF -------------------------------------------------------------------------------
_QMAX = {"UINT8": 255, "UINT16": 65535}


def _exact_encoder(spec: StreamSpec, values: tuple[float, ...]):
    """A host-side quantiser for an input whose only values are ``values``, when the stream's
    native type and single quant info represent them exactly; else None (feed FLOAT32)."""
    if spec.type not in _QMAX or len(spec.quant) != 1:
        return None
    scale, zp = spec.quant[0]
    if not scale > 0:
        return None
    q = [v / scale + zp for v in values]
    if any(abs(x - round(x)) > 1e-3 or not 0 <= round(x) <= _QMAX[spec.type] for x in q):
        return None
    return stream_quantiser(spec)


def stream_quantiser(spec: StreamSpec):
    """A host-side quantiser to the input stream's native type, or None when the stream has no
    single (scale, zero point): HailoRT's own formula (``quantization.hpp`` ``quantize_input``:
    clip to the type's float limits, ``x / scale + zp``, round half to even), so the device
    receives the bytes it would have made from FLOAT32 itself."""
    if spec.type not in _QMAX or len(spec.quant) != 1 or not spec.quant[0][0] > 0:
        return None
    scale, zp = (np.float32(v) for v in spec.quant[0])
    qmax = _QMAX[spec.type]
    dtype = np.uint8 if spec.type == "UINT8" else np.uint16

    def encode(v: np.ndarray) -> np.ndarray:
        q = np.asarray(v, dtype=np.float32) / scale
        q += zp
        np.rint(q, out=q)  # numpy rounds half to even, as HailoRT's bankers_round
        np.clip(q, 0, qmax, out=q)  # = clipping x to limvals [(0 - zp) * scale, (qmax - zp) * scale]
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


class _HefModel:
    """One HEF (one SEQ) configured on the shared VDevice."""

    def __init__(self, hp, vdevice, bundle: Bundle, entry: EncoderEntry, *, input_type: str, output_type: str,
                 device_batch: int | None, timeout_ms: int, conversion: str = "host"):
        self.entry = entry
        self.seq = int(entry.seq_len)
        self.hidden = bundle.hidden
        self.timeout_ms = timeout_ms
        self.path = bundle.path / entry.file
        streams = read_hef(self.path, hp)
        check = check_contract(
            HefContract.from_entry(entry, bundle.hidden, bundle.mask_value), streams.inputs, streams.outputs,
            streams.sorted_outputs)
        check.raise_if_failed(self.path)
        self.check = check
        self.layout = check.contract.mask_layout
        self.notes = list(check.notes)
        self.cim = None
        im = vdevice.create_infer_model(str(self.path))
        self.emb_name = check.embeddings.name
        self.mask_name = check.attention_mask.name
        native = {s.name: s for s in streams.inputs}
        native_out = {s.name: s for s in streams.outputs}
        # The mask has two values only: when the stream's own type holds them exactly, the host
        # quantises the few per-key values and broadcasts bytes (a score-shaped mask is heads x
        # SEQ per token). The embeddings go in quantised by the host ("native") or as FLOAT32
        # (HailoRT quantises with the HEF's scales).
        self.mask_encode = _exact_encoder(native[self.mask_name], self.layout.value_pair)
        self.emb_encode = stream_quantiser(native[self.emb_name]) if input_type == "native" else None
        host_encoded = {self.mask_name: self.mask_encode, self.emb_name: self.emb_encode}
        for name in im.input_names:
            if host_encoded.get(name) is not None:
                im.input(name).set_format_type(getattr(hp.FormatType, native[name].type))
            else:
                im.input(name).set_format_type(hp.FormatType.FLOAT32)
        for name in im.output_names:
            keep = output_type == "native" and name in native_out and native_out[name].type in _QMAX
            im.output(name).set_format_type(getattr(hp.FormatType, native_out[name].type) if keep
                                            else hp.FormatType.FLOAT32)
        self.cim, self.device_batch = self._configure(im, device_batch)
        self.emb_spec = spec_from_infer_stream(im.input(self.emb_name))
        self.mask_spec = spec_from_infer_stream(im.input(self.mask_name))
        for spec, encode in ((self.emb_spec, self.emb_encode), (self.mask_spec, self.mask_encode)):
            want = native[spec.name].type if encode is not None else "FLOAT32"
            if spec.type != want:
                raise DeviceError(f"HailoRT kept input {spec.name} at {spec.type} after set_format_type({want}).",
                                  f"Update HailoRT, or set {ENV_STREAMS}=float32.")
        # The configured output formats (FLOAT32, or the native type) size the buffers; native
        # ones are dequantised on the host with the HEF's own quant infos.
        self.out_specs = [spec_from_infer_stream(im.output(s.name)) for s in check.outputs]
        self.assemble = OutputAssembler(check, self.out_specs)
        self.queue_size = max(1, int(self.cim.get_async_queue_size()))
        roles = {"embeddings": [(self.emb_spec, native[self.emb_name])],
                 "attention_mask": [(self.mask_spec, native[self.mask_name])],
                 "last_hidden_state": [(o, native_out.get(o.name, o)) for o in self.out_specs]}

        def nbytes(spec: StreamSpec) -> int:
            return spec.size * spec.dtype.itemsize

        self.cost = FrameCost(
            host_bytes={r: sum(nbytes(user) for user, _ in pairs) for r, pairs in roles.items()},
            link_bytes={r: sum(nbytes(user if conversion == "device" else nat) for user, nat in pairs)
                        for r, pairs in roles.items()},
            conversion=conversion,
        )

    def _configure(self, im, device_batch: int | None):
        """configure() with the device batch asked for; HailoRT refuses a batch above its internal
        queue size (HAILO_INVALID_OPERATION), so a refused batch is halved until it fits."""
        if not device_batch or int(device_batch) <= 1:
            return im.configure(), 1  # HailoRT's default batch resolves to 1: lowest latency
        batch = int(device_batch)
        while True:
            im.set_batch_size(batch)
            try:
                return im.configure(), batch
            except Exception as e:
                if batch <= 1:
                    raise
                log.info("hailo: device batch %d refused by configure() (%s); trying %d", batch, e, batch // 2)
                self.notes.append(f"device batch {batch} refused by HailoRT ({type(e).__name__}); halved")
                batch //= 2

    def frames(self, e: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The input buffers for N frames, in each stream's own shape, order and type."""
        e = np.ascontiguousarray(e, dtype=np.float32)
        emb = to_stream(self.emb_encode(e) if self.emb_encode is not None else e, self.emb_spec)
        m = self.layout.build(np.asarray(mask), encode=self.mask_encode)
        return emb, to_stream(m, self.mask_spec)

    def run(self, e: np.ndarray, mask: np.ndarray) -> np.ndarray:
        n = e.shape[0]
        emb, m = self.frames(e, mask)
        outs = {s.name: np.empty((n, *s.shape), dtype=s.dtype) for s in self.out_specs}
        errors: list[BaseException] = []

        def on_done(completion_info=None, **_):
            exc = getattr(completion_info, "exception", None)
            if exc is not None:
                errors.append(exc)

        jobs = []
        step = max(1, min(self.device_batch, self.queue_size))
        try:
            for start in range(0, n, step):
                idx = range(start, min(n, start + step))
                # Back-pressure: block until the device queue has room, so frames stream.
                self.cim.wait_for_async_ready(timeout_ms=self.timeout_ms, frames_count=len(idx))
                bindings = [self.cim.create_bindings(
                    input_buffers={self.emb_name: emb[i], self.mask_name: m[i]},
                    output_buffers={name: buf[i] for name, buf in outs.items()},
                ) for i in idx]
                # one run_async per device batch: HailoRT takes a list of Bindings, one per frame
                jobs.append(self.cim.run_async(bindings, callback=on_done))
        except Exception as err:
            raise _root_cause(errors + [err]) from None
        failure = None
        for job in jobs:
            try:
                job.wait(self.timeout_ms)
            except Exception as err:
                failure = failure or err
                if _is_timeout(err):
                    break  # do not wait another timeout for every frame behind it
        if errors or failure:
            raise _root_cause(errors + ([failure] if failure else []))
        return self.assemble(outs)

    def close(self) -> None:
        cim, self.cim = self.cim, None
        if cim is not None:
            try:
                cim.shutdown()
            except Exception as e:  # already broken; nothing more to release
                log.debug("shutdown of %s failed: %s", self.path, e)


# -- the backend ------------------------------------------------------------------------------------
class HailoBackend(Backend):
    """Runs the bundle's HEF(s) for the local Hailo device. See the module docstring."""

    name = "hailo"
    space_kind = space_names.HEF

    @classmethod
    def available(cls, bundle: Bundle) -> tuple[bool, str]:
        """For ``auto``: SDK importable, a device answers, the bundle has a HEF for its chip."""
        try:
            hp = import_hailort()
        except BackendUnavailable:
            return False, "HailoRT (hailo_platform) is not installed"
        if not bundle.encoder_entries("hef"):
            return False, "the bundle has no HEF (compile one with 'hefsearch compile hef')"
        try:
            devices = probe_devices(hp)
        except HefsearchError as e:
            return False, e.message
        if not devices:
            return False, "no Hailo device found"
        dev = devices[0]
        runtime = runtime_version()
        if dev.arch in ("hailo8", "hailo8l") and major_version(runtime) not in (None, 4):
            return False, hailo8_needs_4x(runtime).message
        entries = hef_entries_for(bundle, dev.arch)
        if not entries:
            have = sorted({e.hw_arch or "?" for e in bundle.encoder_entries("hef")})
            return False, f"{dev.label} found, but the bundle's HEFs are for {', '.join(have)}"
        files = ", ".join(f"{e.file} (SEQ {e.seq_len})" for e in entries)
        return True, f"{dev.label} found; bundle has {files}"

    def __init__(self, bundle: Bundle, *, batch_size: int = DEFAULT_BATCH_SIZE, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 device_batch: int | None = None, bulk: bool = False, output_type: str | None = None,
                 input_type: str | None = None, precision: str | None = None, group_id: str = SHARED_GROUP_ID,
                 multi_process_service: bool | None = None, device_id: str | None = None, **_ignored):
        streams = os.environ.get(ENV_STREAMS) or "auto"
        input_type, output_type = input_type or streams, output_type or streams
        for kind in (input_type, output_type):
            if kind not in STREAM_TYPES:
                raise BackendUnavailable(f"Unknown Hailo stream type {kind!r}.",
                                         f"Use one of {', '.join(STREAM_TYPES)} (or unset {ENV_STREAMS}).")
        self.bundle = bundle
        self.batch_size = int(batch_size)
        self.timeout_ms = int(os.environ.get(ENV_TIMEOUT) or timeout_ms)
        if multi_process_service is None and os.environ.get(ENV_SERVICE):
            multi_process_service = os.environ[ENV_SERVICE].lower() in ("1", "true", "yes", "on")
        if device_batch is None:
            # Bulk work (index, backfill, calibration) fills the device in batches; a query goes
            # alone at HailoRT's default batch 1, the lowest latency.
            device_batch = int(os.environ.get(ENV_DEVICE_BATCH) or BULK_DEVICE_BATCH) if bulk else 1
        self.batch_size = max(self.batch_size, int(device_batch))
        self._types = (input_type, output_type)
        self._opts = dict(device_batch=int(device_batch), timeout_ms=self.timeout_ms)
        self._group_id = group_id
        self._multi_process_service = multi_process_service
        self._lock = threading.Lock()
        self._hp = import_hailort()
        self.runtime = str(getattr(self._hp, "__version__", "") or "unknown")
        self.notes: list[str] = []
        #: the one device to open (None: HailoRT picks, e.g. the first free one on 4.x)
        self.device_id = device_id or os.environ.get(ENV_DEVICE) or None
        if self.device_id:
            self.device = find_device(self._hp, self.device_id)
        else:
            devices = probe_devices(self._hp)
            if not devices:
                raise BackendUnavailable("No Hailo device found.", DEVICE_HINT + " Or run on the CPU: --backend cpu.")
            self.device = devices[0]
        self.hw_arch = self.device.arch
        self.label = self.device.label
        if self.hw_arch in ("hailo8", "hailo8l") and major_version(self.runtime) not in (None, 4):
            raise hailo8_needs_4x(self.runtime)
        self.entries = hef_entries_for(bundle, self.hw_arch, precision)
        if self.entries and any((e.hw_arch or "").lower() != self.hw_arch for e in self.entries):
            msg = (f"the bundle has no HEF for the {self.label}; running its Hailo-8L HEF, which HailoRT allows "
                   "at lower performance (compile one with --hw-arch hailo8 for full speed)")
            log.warning("hailo: %s", msg)
            self.notes.append(msg)
        if not self.entries:
            have = sorted({e.hw_arch or "?" for e in bundle.encoder_entries("hef")})
            raise BackendUnavailable(
                f"Bundle {bundle.path} has no HEF for this {self.label} ({self.hw_arch})"
                + (f"; it has HEFs for {', '.join(have)}." if have else "."),
                f"Compile one on an x86 host: hefsearch compile hef {bundle.path} --hw-arch {self.hw_arch}",
            )
        self.seq_lens = tuple(int(e.seq_len) for e in self.entries)
        self.precision = ",".join(sorted({precision_name(e) for e in self.entries}))
        self._file_sha = {int(e.seq_len): bundle.file_sha256(e.file) for e in self.entries}
        self._vdevice = None
        self._models: dict[int, _HefModel] = {}
        self._open()

    # -- lifecycle ---------------------------------------------------------------------------------
    def _open(self) -> None:
        hp = self._hp
        service = self._multi_process_service
        if major_version(self.runtime) == 4:
            if service is None:  # HailoRT 4.x shares a device across processes only via its service
                service = service_running()
        else:
            service = None  # 5.x (Hailo-10H) shares by itself and rejects the flag
        self.uses_service = bool(service)
        try:
            params = hp.VDevice.create_params()
            params.scheduling_algorithm = hp.HailoSchedulingAlgorithm.ROUND_ROBIN
            params.group_id = self._group_id
            if service is not None:
                params.multi_process_service = bool(service)
            if self.device_id:
                # in the params, not VDevice(device_ids=...), which drops them for HailoRT's defaults
                # (scheduler NONE on 4.x, group "UNIQUE"): docs/hailo-facts.md, Choosing the device
                params.device_ids = [self.device.id]
            self._vdevice = hp.VDevice(params)
        except Exception as e:
            if _is_hailo8_on_5x(e, self.runtime):
                raise hailo8_needs_4x(self.runtime) from None
            if _is_out_of_devices(e):
                raise device_busy(self.runtime, self._where, service,
                                  "73, HAILO_DEVICE_IN_USE" if self.device_id else "74, HAILO_OUT_OF_PHYSICAL_DEVICES") from None
            if self.device_id and "Invalid argument" in str(e):  # gone since the scan (HAILO_INVALID_ARGUMENT)
                raise BackendUnavailable(f"Cannot open the {self._where}: HailoRT no longer finds it ({e}).",
                                         DEVICE_HINT) from None
            if service and (_status_code(e) == 77 or "RPC_FAILED" in str(e)):
                raise BackendUnavailable(
                    f"HailoRT's multi-process service did not answer (status 77, HAILO_RPC_FAILED) while opening "
                    f"the {self.label}.",
                    "Start it: 'sudo systemctl enable --now hailort.service', or do not force it "
                    f"({ENV_SERVICE}=0) when this is the only program using the device.") from None
            raise BackendUnavailable(
                f"Cannot open the {self.label}: {type(e).__name__}: {e}", DEVICE_HINT
            ) from None
        conversion = "device" if (major_version(self.runtime) or 5) >= 5 else "host"
        opts = dict(self._opts, input_type=resolve_stream_types(self._types[0], self.runtime),
                    output_type=resolve_stream_types(self._types[1], self.runtime), conversion=conversion)
        try:
            for entry in self.entries:
                self._models[int(entry.seq_len)] = _HefModel(hp, self._vdevice, self.bundle, entry, **opts)
        except HefsearchError:
            self.close()
            raise
        except Exception as e:
            self.close()
            raise BackendUnavailable(
                f"HailoRT cannot load the HEF on the {self.label}: {type(e).__name__}: {e}",
                "Check that the HEF was compiled for this chip and HailoRT version ('hefsearch doctor').",
            ) from None
        for m in self._models.values():
            self.notes += [n for n in m.notes if n not in self.notes]
        log.info("hailo: %s ready with SEQ %s, device batch %s", self.label, ", ".join(map(str, self.seq_lens)),
                 ", ".join(str(m.device_batch) for m in self._models.values()))

    @property
    def _where(self) -> str:
        """The device as messages name it: "Hailo-10H", or "Hailo-10H 0000:01:00.0" when chosen."""
        return f"{self.label} {self.device.id}" if self.device_id else self.label

    @property
    def device_batch(self) -> int:
        return min((m.device_batch for m in self._models.values()), default=self._opts["device_batch"])

    def frame_cost(self, seq: int | None = None):
        """Host and link bytes per frame of the HEF for ``seq`` (default: the longest)."""
        return self._models[seq or max(self._models)].cost

    def close(self) -> None:
        models, self._models = self._models, {}
        for m in models.values():
            m.close()
        vdev, self._vdevice = self._vdevice, None
        if vdev is not None:
            try:
                vdev.release()
            except Exception as e:
                log.debug("VDevice release failed: %s", e)

    def __del__(self):  # a forgotten close() must not leave the device claimed
        try:
            self.close()
        except Exception:
            pass

    # -- identity -------------------------------------------------------------------------------------
    def encoder_entries(self) -> list[EncoderEntry]:
        return list(self.entries)  # one HEF per SEQ

    def fingerprint_parts(self) -> dict:
        return {
            "encoder": "hef",
            "hw_arch": self.hw_arch,
            "precision": self.precision,
            "file_sha256": {str(s): sha for s, sha in sorted(self._file_sha.items())},
        }

    # -- running -----------------------------------------------------------------------------------------
    def run(self, embeddings: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """E [N,S,H] float32 and mask [N,S] -> last hidden state [N,S,H], on the NPU.

        Each batch goes to the HEF compiled for SEQ = S (or the smallest SEQ >= S, padding
        with zeros and a zero mask, then cropping).
        """
        n, s, h = embeddings.shape
        if h != self.bundle.hidden:
            raise ValueError(f"embeddings have H={h}; the bundle's hidden size is {self.bundle.hidden}")
        fitting = [q for q in self.seq_lens if q >= s]
        if not fitting:
            raise ValueError(f"{s} tokens exceed the longest compiled SEQ {max(self.seq_lens)}; truncate first")
        seq = fitting[0]
        if n == 0:
            return np.zeros((0, s, h), dtype=np.float32)
        if seq != s:
            e = np.zeros((n, seq, h), dtype=np.float32)
            e[:, :s] = embeddings
            m = np.zeros((n, seq), dtype=mask.dtype)
            m[:, :s] = mask
        else:
            e, m = embeddings, mask
        with self._lock:
            if not self._models:  # closed after an earlier device error: try once to reopen
                try:
                    self._open()
                except HefsearchError as err:
                    raise DeviceError(err.message, err.hint) from None
            try:
                out = self._models[seq].run(e, m)
            except HefsearchError:
                raise
            except Exception as err:
                self.close()  # HailoRT shuts the pipeline down after an error; release it all
                raise device_error(err, f"encoding {n} text(s) with the SEQ {seq} HEF", self.timeout_ms) from None
        return out[:, :s] if seq != s else out

"""Fake of ``hailo_platform.pyhailort.pyhailort``: VDevice, HEF, InferModel, ConfiguredInferModel.

Every behaviour below is modelled on the public HailoRT sources (hailo-ai/hailort: branch
``hailo8`` = 4.23.0, ``master`` = 5.2.0); docs/hailo-facts.md gives file and line for each.
"Own analysis" marks what the fake infers where the sources say nothing explicit.

API and stream descriptions (``PYH`` = bindings/python/platform/hailo_platform/pyhailort/pyhailort.py):

- ``VDevice(params)`` with ``VDevice.create_params()`` (scheduler ROUND_ROBIN, group id
  "UNIQUE" by default: ``hailort_defaults.cpp``, ``hailort.h``); ``create_infer_model`` only
  in the creating process; the legacy ``configure()`` is HAILO_NOT_IMPLEMENTED on Hailo-10H
  (``vdevice_hrpc_client.cpp``).
- ``HEF(str | bytes)``: vstream infos whose ``shape`` follows the format order ((h,w,c); (c,) for
  NC; (h,w) for NHW), ``format.type/order/flags``, ``quant_info.qp_scale/qp_zp`` (PYH).
  ``FormatFlags.TRANSPOSED`` is ``1 << 1`` (``hailort.h``, ``pyhailort.cpp``).
- Stream names are the HEF's: inputs ``<net>/input_layerN``, outputs named after the layer that
  feeds them (``<net>/conv41``; own analysis from zoo configs), inputs as folded by the
  allocator's automatic spatial reshape ([1,128,C] -> [16,8,C], zoo all_minilm_l6_v2);
  ``tests/fakes/fake_hef.py`` writes them that way.
- ``InferModel``: streams with ``shape``, ``format``, ``quant_infos`` (``limvals_min/max`` from
  the HEF's "limvals" or the type's range; input quantisation clips to them before rounding,
  ``quantization.hpp``), ``set_format_type`` (read at ``configure()``; later changes do not
  affect a configured model: ``infer_model.cpp``); ``set_format_order`` is allowed and recorded
  (PYH ``InferStream.set_format_order``). Host buffers of NHCW device streams are NHWC: HailoRT
  does not use NHCW host-side (``hailort.h``; ``hailort_defaults.cpp`` maps it to NHWC);
  ``set_batch_size`` (default 0 = HAILO_DEFAULT_BATCH_SIZE resolves to 1: ``hef.hpp``,
  ``core_op.cpp``); ``configure()`` refuses a batch above the internal queue size with
  HAILO_INVALID_OPERATION (``infer_model.cpp``; the fake's internal queue is
  ``WORLD.async_queue_size``).
- ``ConfiguredInferModel``: ``run_async`` takes a list of Bindings, one frame each ("Multiple
  bindings are useful for batch inference", PYH); buffers must be C-contiguous; every buffer's
  byte size must equal the frame size of the stream's format ("Input buffer size X is different
  than expected Y for input 'name'", HAILO_INVALID_OPERATION); the async queue holds
  ``get_async_queue_size()`` frames and ``run_async`` on a full queue fails with
  HAILO_QUEUE_IS_FULL, so callers use ``wait_for_async_ready``; frames complete in any order
  (no ordering guarantee in the API; own analysis); ``job.wait(timeout_ms)`` raises
  HailoRTTimeout (HAILO_TIMEOUT, ``infer_model.cpp``) or the job's error; after an error the
  pipeline is shut down and the other frames are aborted.

Devices and runtimes:

- HailoRT 5.x refuses a Hailo-8/8L with status 79 HAILO_NOT_SUPPORTED (``pcie_device.cpp``,
  ``control.cpp``); the log text "only supported in versions 4.x.x" is not in the exception.
- A HEF carries the DFC version that made it (``sdk_version``, as the real header's
  ``ProtoHEFSdkVersion``, hef.proto); a HEF of a DFC line newer than the runtime's pair is refused
  with status 92 HAILO_HEF_NOT_SUPPORTED when it is opened (``HEF()``, ``create_infer_model``), as
  ``hef.cpp`` refuses HEF extensions it does not know; that every newer line trips it is a guess.
  The runtime version is ``WORLD.version`` (env ``HEFSEARCH_FAKE_HAILORT_VERSION``; default 5.3.0).
- A hailo8l HEF on a Hailo-8 runs, with a warning in hailort.log ("lower performance"); any
  other architecture mismatch is HAILO_HEF_NOT_COMPATIBLE_WITH_DEVICE (``device_internal.cpp``).
- HailoRT 5.x rejects ``multi_process_service`` on Hailo-10H (HAILO_INVALID_OPERATION,
  ``vdevice.cpp``).
- HailoRT 4.x without the multi-process service: a VDevice takes its PCIe device for the
  process; another process scanning for a free device skips it and gets 74
  HAILO_OUT_OF_PHYSICAL_DEVICES when none is left, one naming it gets 73 HAILO_DEVICE_IN_USE
  (``vdevice.cpp`` ``create_devices``, ``hailort_driver.cpp``).
- Choosing the device: ``Device.scan()`` lists the ids (PCIe ``DDDD:BB:DD.F``);
  ``VDevice(params)`` with ``params.device_ids = [id]`` opens exactly that device with the
  params' scheduler and group id, ``VDevice(device_ids=[id])`` with default params (scheduler
  NONE on 4.x), both at once is HAILO_INVALID_OPERATION
  (``hailort/libhailort/bindings/python/src/vdevice_api.hpp``); an id not in the scan is
  HAILO_INVALID_ARGUMENT (``hailort/libhailort/src/vdevice/vdevice.cpp``
  ``get_accelerator_type``); ids compare as ``Device::device_ids_equal`` does, the PCIe domain
  optional (``hailort/libhailort/src/device_common/device.cpp``).
- With ``multi_process_service=True`` the VDevice lives in the ``hailort_service``; without that service running the client's RPC fails (77
  HAILO_RPC_FAILED; own analysis, the status is ``hailort.h``'s).

Not modelled: HailoRT 4.x refusing Hailo-10/15 devices; ``group_id`` matching across service
clients; ``AsyncInferJob.wait`` blocking up to twice its timeout (the fake waits once, which is
within the real bound).

A device "runs" the HEF's ``onnx`` (the bundle's FP32 body) with onnxruntime. A FLOAT32 input
buffer is quantised to the stream's native UINT8/UINT16 with its quant info before the network
sees it (HailoRT's formula: clip to the limits, ``round(x / scale + zp)``, ``quantization.hpp``
``quantize_input``), and outputs whose native type is UINT8/UINT16 are quantised the same way
(and dequantised again if the user asked for FLOAT32), so both carry 8-bit error like hardware.
Where that conversion runs decides what crosses the link, counted in ``WORLD.stats.link_bytes``:

- HailoRT 4.x (Hailo-8/8L over PCIe): the transformation runs in the host process, so native
  bytes cross (own analysis of ``set_format_type`` and the host-side transform contexts);
- HailoRT 5.x (Hailo-10H): the client sends each stream's format type and order to the device
  in the configure request and the buffers as the user gives them, so a FLOAT32 buffer crosses
  as 4 bytes per value and the conversion runs on the device
  (``src/net_flow/pipeline/infer_model_hrpc_client.cpp`` ``InferModelHrpcClient::configure``;
  ``hailort_server/hailort_server.cpp`` sets those formats on the server's InferModel).

The HEF JSON's ``mask_input.softmax`` (``set_input_mask_to_softmax()``) means the carried ONNX
already applies the mask input as a 0/1 mask inside every softmax
(``tests/fakes/hailo_semantics.py``), so the device feeds the mask values as they come;
``output_basis`` ("permuted", "rotated") maps the output channels to the compiled network's own
basis (the public Hailo-10H report's finding, same module).
"""

from __future__ import annotations

import enum
import json
import re
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._fake import WORLD

try:  # the compiled network's semantics, shared with the fake DFC
    from hailo_semantics import to_basis
except ImportError:  # pragma: no cover - the fakes folder is always on the path together
    from tests.fakes.hailo_semantics import to_basis


# -- exceptions (names and messages as in pyhailort.py) ---------------------------------------
class HailoRTException(Exception):
    pass


class HailoRTTimeout(HailoRTException):
    pass


class HailoRTStreamAborted(HailoRTException):
    pass


class HailoRTStreamAbortedByUser(HailoRTException):
    pass


class HailoRTInvalidOperationException(HailoRTException):
    pass


class HailoRTInvalidArgumentException(HailoRTException):
    pass


class HailoRTNotFoundException(HailoRTException):
    pass


class HailoRTInvalidHEFException(HailoRTException):
    pass


class HailoRTHEFNotCompatibleWithDevice(HailoRTException):
    pass


class HailoRTDriverOperationFailedException(HailoRTException):
    pass


class HailoCommunicationClosedException(HailoRTException):
    pass


def _timeout():
    return HailoRTTimeout("Received a timeout - hailort has failed because a timeout had occurred")


def _status(code: int, name: str):
    return HailoRTException(f"libhailort failed with error: {code} ({name})")


def _injected_failure():
    kind = WORLD.fail_kind
    if kind == "communication":
        return HailoCommunicationClosedException("Communication closed failure. Check server-client connection")
    if kind == "aborted":
        return HailoRTStreamAborted("Stream was aborted")
    return HailoRTDriverOperationFailedException(
        "Failure in hailort driver ioctl. run 'dmesg | grep hailo' for more information"
    )


# -- enums ---------------------------------------------------------------------------------
class FormatType(enum.IntEnum):
    AUTO = 0
    UINT8 = 1
    UINT16 = 2
    FLOAT32 = 3


class FormatOrder(enum.IntEnum):
    AUTO = 0
    NHWC = 1
    NHCW = 2
    FCR = 3
    F8CR = 4
    NHW = 5
    NC = 6
    NCHW = 7
    HAILO_NMS_BY_CLASS = 20


class FormatFlags(enum.IntEnum):
    NONE = 0
    TRANSPOSED = 2  # HAILO_FORMAT_FLAGS_TRANSPOSED = 1 << 1 (hailort.h)


class HailoSchedulingAlgorithm(enum.IntEnum):
    NONE = 0
    ROUND_ROBIN = 1


class HailoStreamInterface(enum.IntEnum):
    PCIe = 0
    INTEGRATED = 1
    ETH = 2
    MIPI = 3


class DeviceArchitectureTypes(enum.IntEnum):
    HAILO8_A0 = 0
    HAILO8 = 1
    HAILO8L = 2
    HAILO15H = 3
    HAILO15L = 4
    HAILO15M = 5
    HAILO10H = 6

    def __str__(self):
        return self.name


_DTYPES = {FormatType.UINT8: np.uint8, FormatType.UINT16: np.uint16, FormatType.FLOAT32: np.float32}
_QMAX = {FormatType.UINT8: 255, FormatType.UINT16: 65535}


# -- stream descriptions ----------------------------------------------------------------------
@dataclass
class HailoFormat:
    type: FormatType
    order: FormatOrder
    flags: FormatFlags = FormatFlags.NONE


@dataclass
class QuantInfo:
    qp_zp: float
    qp_scale: float
    limvals_min: float = 0.0
    limvals_max: float = 0.0


def _reported_shape(hwc, order: FormatOrder) -> tuple:
    h, w, c = hwc
    if order == FormatOrder.NC:
        return (h * w * c,)
    if order == FormatOrder.NHW:
        return (h, w * c)
    return (h, w, c)


class VStreamInfo:
    def __init__(self, d: dict, network_name: str, direction: str):
        self.name = d["name"]
        self.network_name = network_name
        self.direction = direction
        self._hwc = tuple(int(x) for x in d["shape"])
        order = FormatOrder[d.get("order", "NHWC")]
        self.format = HailoFormat(FormatType[d.get("type", "UINT8")], order, FormatFlags[d.get("flags", "NONE")])
        q = (d.get("quant") or [[1.0, 0.0]])
        qmax = _QMAX.get(self.format.type)
        # limvals (hailo_quant_info_t.limvals_min/max): the HEF's own "limvals" when it has them
        # (they may be narrower than the type), else the float range the native type spans
        lims = d.get("limvals") or [[(0 - float(z)) * float(s) if qmax else 0.0,
                                     (qmax - float(z)) * float(s) if qmax else 0.0] for s, z in q]
        self.quant_infos = [QuantInfo(qp_zp=float(z), qp_scale=float(s), limvals_min=float(lo), limvals_max=float(hi))
                            for (s, z), (lo, hi) in zip(q, lims)]
        self.quant_info = self.quant_infos[0]
        self.spec = d

    @property
    def shape(self):
        return _reported_shape(self._hwc, self.format.order)

    def __repr__(self):
        return f'VStreamInfo("{self.name}")'


def _paired_dfc(runtime: str) -> tuple[int, int] | None:
    """The DFC release line a HailoRT release reads HEFs of: 5.Y for HailoRT 5.Y (hailo_model_zoo
    v5.x README badges; the report's 5.3.0 pair), 3.(Y+10) for HailoRT 4.Y (v2.17/2.18: 3.33 with
    4.23; v2.19: 3.34 with 4.24; the +10 elsewhere is the fake's extrapolation)."""
    m = re.match(r"(\d+)\.(\d+)", str(runtime))
    if not m:
        return None
    major, minor = int(m.group(1)), int(m.group(2))
    return (5, minor) if major >= 5 else (3, minor + 10) if major == 4 else None


def _refuse_newer_dfc(sdk_version) -> None:
    """HailoRT refuses a HEF it cannot read: ``Hef::Impl::validate_hef_extensions`` (hef.cpp) fails
    with HAILO_HEF_NOT_SUPPORTED (92; hailort.h: "Make sure the DFC version is compatible") and logs
    "Failed opening non-compatible HEF with the following unsupported extensions: ...", and the
    binding raises the bare status (no class of its own in PYH's ExceptionWrapper). A guess where
    the sources are silent: that every HEF of a DFC line newer than the runtime's pair uses such an
    extension (the extensions a DFC release writes are not public), and that an older line's HEF
    loads (HailoRT refuses only HEFs "outdated and no longer supported", from far older lines)."""
    if not sdk_version:
        return
    m = re.match(r"(\d+)\.(\d+)", str(sdk_version))
    paired = _paired_dfc(WORLD.version)
    if not m or paired is None or int(m.group(1)) != paired[0]:
        return
    if (int(m.group(1)), int(m.group(2))) > paired:
        WORLD.stats.warnings.append(f"Failed opening non-compatible HEF with the following unsupported extensions: "
                                    f"(a HEF of DFC {sdk_version} on HailoRT {WORLD.version})")
        raise _status(92, "HAILO_HEF_NOT_SUPPORTED")


class HEF:
    """A fake HEF: a JSON file (or its bytes) describing the streams and the ONNX to run."""

    def __init__(self, hef_source):
        if isinstance(hef_source, str):
            try:
                raw = Path(hef_source).read_bytes()
            except OSError:
                raise HailoRTException("libhailort failed with error: 61 (HAILO_NOT_FOUND)") from None
            base = Path(hef_source).parent
            self._path = hef_source
        elif isinstance(hef_source, bytes):
            raw, base, self._path = hef_source, Path.cwd(), None
        else:
            raise ValueError("HEF can only be created from a file path (str) or a buffer (bytes)")
        try:
            self._d = json.loads(raw.decode("utf-8"))
            assert self._d.get("fake_hef") == 1
        except Exception:
            raise HailoRTInvalidHEFException("Invalid HEF. See hailort.log for more information") from None
        _refuse_newer_dfc(self._d.get("sdk_version"))
        self._base = base
        self._group = self._d.get("network_group", "net")
        self._inputs = [VStreamInfo(s, self._group, "H2D") for s in self._d["inputs"]]
        self._outputs = [VStreamInfo(s, self._group, "D2H") for s in self._d["outputs"]]

    @property
    def path(self):
        return self._path

    @property
    def hw_arch(self) -> str:
        return self._d["hw_arch"]

    def get_network_group_names(self):
        return [self._group]

    def get_networks_names(self, network_group_name=None):
        return [f"{self._group}/{self._group}"]

    def get_input_vstream_infos(self, name=None):
        return list(self._inputs)

    def get_output_vstream_infos(self, name=None):
        return list(self._outputs)

    def get_all_vstream_infos(self, name=None):
        return self._inputs + self._outputs

    def get_sorted_output_names(self, network_group_name=None):
        return list(self._d.get("sorted_outputs") or sorted(s.name for s in self._outputs))

    def bottleneck_fps(self, network_group_name=None):
        return float(self._d.get("fps", 200.0))


# -- devices ------------------------------------------------------------------------------------
class _FwVersion:
    def __init__(self, v: str):
        self.major, self.minor, self.revision = (int(x) for x in v.split(".")[:3])

    def __str__(self):
        return f"{self.major}.{self.minor}.{self.revision} (release,app)"


class BoardInformation:
    def __init__(self, arch: str, fw: str):
        self.device_architecture = DeviceArchitectureTypes[arch]
        self.firmware_version = _FwVersion(fw)
        self.board_name = "Hailo-" + arch.removeprefix("HAILO")
        self.serial_number = "FAKE0001"
        self.product_name = "fake"


class Control:
    def __init__(self, dev: dict):
        self._dev = dev

    def identify(self):
        WORLD.stats.identify_calls += 1
        if WORLD.identify_fails:
            raise HailoRTDriverOperationFailedException(
                "Failure in hailort driver ioctl. run 'dmesg | grep hailo' for more information"
            )
        return BoardInformation(self._dev["arch"], self._dev.get("fw", WORLD.version))


class Device:
    @classmethod
    def scan(cls):
        return [d["id"] for d in WORLD.devices]

    def __init__(self, device_id=None):
        ids = Device.scan()
        if device_id is None:
            if not ids:
                raise HailoRTException("HailoRT device not found in the system")
            device_id = ids[0]
        match = [d for d in WORLD.devices if d["id"] == device_id]
        if not match:
            raise _status(61, "HAILO_NOT_FOUND")
        _refuse_hailo8_on_5x(match[0]["arch"])
        self._device_id = device_id
        self._control_object = Control(match[0])

    @property
    def device_id(self):
        return self._device_id

    @property
    def control(self):
        return self._control_object

    def release(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.release()
        return False


def _refuse_hailo8_on_5x(arch: str) -> None:
    """HailoRT 5.x: pcie_device.cpp "Hailo8 devices are only supported in versions 4.x.x and
    earlier" -> HAILO_NOT_SUPPORTED, raised by the binding as a bare status."""
    if arch in ("HAILO8", "HAILO8L", "HAILO8_A0") and not WORLD.version.startswith("4."):
        raise _status(79, "HAILO_NOT_SUPPORTED")


class _PhysicalDeviceLock:
    """HailoRT 4.x without the multi-process service: a VDevice marks the PCIe device in use through
    the driver (``VdmaDevice::mark_as_used``, ``create_devices`` in
    ``hailort/libhailort/src/vdevice/vdevice.cpp``). Modelled with an
    flock on a file per device in ``WORLD.lock_dir``, so it holds across real processes and is
    released when the holder exits; VDevices of one process share it (own simplification)."""

    held: dict = {}  # device id -> [fd, refcount] in this process

    @classmethod
    def try_acquire(cls, dev_id: str) -> bool:
        """False when another process holds the device (the driver's HAILO_DEVICE_IN_USE)."""
        import fcntl
        import tempfile

        entry = cls.held.get(dev_id)
        if entry is not None:
            entry[1] += 1
            return True
        folder = WORLD.lock_dir or tempfile.gettempdir()
        path = os.path.join(folder, "fake-hailo-" + dev_id.replace(":", "_").replace("/", "_") + ".lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        cls.held[dev_id] = [fd, 1]
        return True

    @classmethod
    def release(cls, dev_id: str) -> None:
        entry = cls.held.get(dev_id)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            os.close(entry[0])
            del cls.held[dev_id]


def _pcie_bdf(dev_id: str):
    """(domain or None, bus, device, func) of "DDDD:BB:DD.F" or "BB:DD.F", else None
    (``PcieDevice::parse_pcie_device_info`` in ``hailort/libhailort/src/vdma/pcie/pcie_device.cpp``:
    the domain is optional, hex fields)."""
    import re

    m = re.fullmatch(r"(?:([0-9a-fA-F]{1,4}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.(\d)", str(dev_id).strip())
    if not m:
        return None
    domain = int(m.group(1), 16) if m.group(1) else None
    return domain, int(m.group(2), 16), int(m.group(3), 16), int(m.group(4))


def _same_device(a: str, b: str) -> bool:
    """``Device::device_ids_equal`` (``hailort/libhailort/src/device_common/device.cpp``): PCIe
    ids match on bus/device/func, and on the domain when both name one
    (``pcie_device_infos_equal``, ``hailort/libhailort/src/vdma/pcie/pcie_device.cpp``); other
    ids must be equal."""
    pa, pb = _pcie_bdf(a), _pcie_bdf(b)
    if pa is None or pb is None:
        return a == b
    return pa[1:] == pb[1:] and (pa[0] is None or pb[0] is None or pa[0] == pb[0])


class VDeviceParams:
    def __init__(self):
        self.device_count = 1
        self.device_ids = []
        self.scheduling_algorithm = HailoSchedulingAlgorithm.ROUND_ROBIN
        self.group_id = "UNIQUE"
        self.multi_process_service = False


class ConfigureParams:
    @staticmethod
    def create_from_hef(hef, interface):
        return {name: {} for name in hef.get_network_group_names()}


class VDevice:
    """``VDevice(params)``: see the module docstring for what opening it checks (runtime vs chip,
    the Hailo-10H service flag, HailoRT 4.x device exclusivity and its service)."""

    def __init__(self, params=None, *, device_ids=None):
        self._vdevice = None
        if params is not None and list(getattr(params, "device_ids", []) or []) and device_ids:
            # hailort/libhailort/bindings/python/src/vdevice_api.hpp VDeviceWrapper::create:
            # "VDevice device_ids can be set in params or device_ids argument"
            raise HailoRTInvalidOperationException("Invalid operation. See hailort.log for more information")
        if device_ids:
            # vdevice_api.hpp VDeviceWrapper::create_from_ids: default params with these ids; on 4.x also the
            # scheduler NONE (5.x keeps the default ROUND_ROBIN)
            params = VDevice.create_params()
            params.device_ids = list(device_ids)
            if WORLD.version.startswith("4."):
                params.scheduling_algorithm = HailoSchedulingAlgorithm.NONE
        self._params = params or VDevice.create_params()
        self._creation_pid = os.getpid()
        named = [str(i) for i in (getattr(self._params, "device_ids", None) or [])]
        service = bool(getattr(self._params, "multi_process_service", False))
        exclusive = WORLD.version.startswith("4.") and not service
        dev = self._named_device(named) if named else self._first_device()
        _refuse_hailo8_on_5x(dev["arch"])
        if dev["arch"] == "HAILO10H" and service:
            raise HailoRTInvalidOperationException("Invalid operation. See hailort.log for more information")
        if WORLD.version.startswith("4.") and service and not WORLD.service_running:
            raise _status(77, "HAILO_RPC_FAILED")  # no hailort_service to talk to
        self._locked = False
        if exclusive:
            dev = self._take(dev, named)
            self._locked = True
        self._arch, self._dev_id = dev["arch"], dev["id"]
        WORLD.stats.vdevice_params.append(
            (self._params.scheduling_algorithm, self._params.group_id, self._params.multi_process_service)
        )
        WORLD.stats.vdevice_devices.append(self._dev_id)
        self._vdevice = object()

    @staticmethod
    def _named_device(named: list) -> dict:
        """``get_accelerator_type`` (``hailort/libhailort/src/vdevice/vdevice.cpp``): every named id
        must be in the scan, else HAILO_INVALID_ARGUMENT
        ("VDevice creation failed. device_id {} not found" in hailort.log). One device per VDevice
        here (a multi-device VDevice is not modelled)."""
        if len(named) != 1:
            raise NotImplementedError("fake hailo_platform: a VDevice over several devices is not modelled")
        match = [d for d in WORLD.devices if _same_device(d["id"], named[0])]
        if not match:
            raise HailoRTInvalidArgumentException("Invalid argument. See hailort.log for more information")
        return match[0]

    @staticmethod
    def _first_device() -> dict:
        if not WORLD.devices:
            raise _status(74, "HAILO_OUT_OF_PHYSICAL_DEVICES")
        return WORLD.devices[0]

    @staticmethod
    def _take(dev: dict, named: list) -> dict:
        """HailoRT 4.x without the service (``create_devices`` in
        ``hailort/libhailort/src/vdevice/vdevice.cpp``): a named device another process
        holds fails with 73 HAILO_DEVICE_IN_USE; without ids, held devices are skipped in scan
        order and 74 HAILO_OUT_OF_PHYSICAL_DEVICES means none was free."""
        if named:
            if not _PhysicalDeviceLock.try_acquire(dev["id"]):
                raise _status(73, "HAILO_DEVICE_IN_USE")
            return dev
        for d in WORLD.devices:
            if _PhysicalDeviceLock.try_acquire(d["id"]):
                return d
        raise _status(74, "HAILO_OUT_OF_PHYSICAL_DEVICES")

    @staticmethod
    def create_params():
        return VDeviceParams()

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.release()
        return False

    def release(self):
        if self._vdevice is not None:
            self._vdevice = None
            WORLD.stats.released_vdevices += 1
            if self._locked:
                _PhysicalDeviceLock.release(self._dev_id)
                self._locked = False

    def configure(self, hef, configure_params_by_name={}):
        """The legacy path: HAILO_NOT_IMPLEMENTED on Hailo-10H (an HRPC client there)."""
        WORLD.stats.legacy_configure_calls += 1
        if os.getpid() != self._creation_pid:
            raise HailoRTException("VDevice can only be configured from the process it was created in.")
        if self._arch == "HAILO10H":
            raise _status(7, "HAILO_NOT_IMPLEMENTED")
        raise NotImplementedError("fake hailo_platform: the legacy InferVStreams path is not modelled")

    def get_physical_devices_ids(self):
        """The ids of the devices this VDevice opened, not every scanned one (``VDeviceHandle``
        asks its ``VDeviceBase``, ``hailort/libhailort/src/vdevice/vdevice.cpp``; 5.x
        ``VDeviceHrpcClient`` returns its one device id, ``vdevice_hrpc_client.cpp``)."""
        return [self._dev_id]

    def create_infer_model(self, hef_source, name=""):
        if os.getpid() != self._creation_pid:
            raise HailoRTException("InferModel can be created only from the process VDevice was created in.")
        if self._vdevice is None:
            raise _status(6, "HAILO_INVALID_OPERATION")
        hef = HEF(hef_source)
        if hef.hw_arch.upper() == "HAILO8L" and self._arch == "HAILO8":
            # device_internal.cpp: runs, with a warning in hailort.log
            WORLD.stats.warnings.append("HEF was compiled for Hailo8L device, while the device itself is Hailo8. "
                                        "This will result in lower performance.")
        elif hef.hw_arch.upper() != self._arch:
            raise HailoRTHEFNotCompatibleWithDevice(
                "HEF file is not compatible with device. See hailort.log for more information"
            )
        WORLD.stats.infer_models += 1
        return InferModel(hef, hef_source)


# -- InferModel ---------------------------------------------------------------------------------
class InferModel:
    class InferStream:
        def __init__(self, info: VStreamInfo, model: "InferModel"):
            self._info = info
            self._model = model
            self._type = info.format.type

        @property
        def name(self):
            return self._info.name

        @property
        def shape(self):
            return list(self._info.shape)

        @property
        def format(self):
            return HailoFormat(self._type, self._info.format.order, self._info.format.flags)

        def set_format_type(self, type):
            WORLD.stats.set_format_types.append((self._info.name, FormatType(type), self._model._configured))
            self._type = FormatType(type)

        def set_format_order(self, order):
            """HailoRT lets the host choose its buffer order (PYH ``InferModel.InferStream.set_format_order``);
            the fake records it (its device writes NHWC-like host buffers, the layout hefsearch uses)."""
            WORLD.stats.set_format_orders.append((self._info.name, order))
            self._order = order

        @property
        def quant_infos(self):
            return list(self._info.quant_infos)

        @property
        def is_nms(self):
            return False

        def frame_dtype(self):
            t = self._type if self._type != FormatType.AUTO else self._info.format.type
            return np.dtype(_DTYPES[t])

        def frame_size(self):
            return int(np.prod(self._info._hwc)) * self.frame_dtype().itemsize

        def native_frame_size(self):
            return int(np.prod(self._info._hwc)) * np.dtype(_DTYPES[self._info.format.type]).itemsize

    def __init__(self, hef: HEF, hef_path):
        self._hef = hef
        self._hef_path = hef_path
        self._configured = False
        self._batch_size = 0
        self._inputs = {i.name: self.InferStream(i, self) for i in hef.get_input_vstream_infos()}
        self._outputs = {o.name: self.InferStream(o, self) for o in hef.get_output_vstream_infos()}

    @property
    def hef(self):
        return self._hef

    @property
    def input_names(self):
        return list(self._inputs)

    @property
    def output_names(self):
        return list(self._outputs)

    @property
    def inputs(self):
        return list(self._inputs.values())

    @property
    def outputs(self):
        return list(self._outputs.values())

    def _get(self, table, name):
        if name == "" and len(table) == 1:
            return next(iter(table.values()))
        if name not in table:
            raise HailoRTNotFoundException("Item not found. See hailort.log for more information")
        return table[name]

    def input(self, name=""):
        return self._get(self._inputs, name)

    def output(self, name=""):
        return self._get(self._outputs, name)

    def set_batch_size(self, batch_size):
        WORLD.stats.batch_sizes.append(batch_size)
        self._batch_size = batch_size

    def set_power_mode(self, power_mode):
        pass

    def configure(self):
        # HAILO_DEFAULT_BATCH_SIZE (0) resolves to DEFAULT_ACTUAL_BATCH_SIZE = 1 (hef.hpp, core_op.cpp)
        batch = self._batch_size or 1
        if batch > WORLD.async_queue_size:
            # infer_model.cpp: "Trying to configure a model with a batch={} bigger than
            # internal_queue_size={}, which is not supported" -> HAILO_INVALID_OPERATION
            raise HailoRTInvalidOperationException("Invalid operation. See hailort.log for more information")
        WORLD.stats.configures += 1
        WORLD.stats.configured_batches.append(batch)
        self._configured = True
        return ConfiguredInferModel(self, batch)


# -- ConfiguredInferModel -----------------------------------------------------------------------------
class AsyncInferCompletionInfo:
    def __init__(self, exception):
        self._exception = exception

    @property
    def exception(self):
        return self._exception


class AsyncInferJob:
    def __init__(self, n_frames: int):
        self._left = n_frames
        self._done = threading.Event()
        self._error = None

    def wait(self, timeout_ms):
        """Waits once with the timeout. The real binding waits for the job, then for the Python
        callback, each with the full timeout, so it can take up to twice ``timeout_ms``
        (``infer_model_api.cpp``); the fake stays within that bound."""
        if not self._done.wait(timeout_ms / 1000.0):
            raise _timeout()
        if self._error is not None:
            raise self._error


class ConfiguredInferModel:
    class Bindings:
        class InferStream:
            def __init__(self):
                self._buffer = None

            def set_buffer(self, buffer):
                if not buffer.flags.c_contiguous:
                    raise HailoRTException("Buffer must be C_CONTIGUOUS")
                self._buffer = buffer

            def get_buffer(self, tf_format=False):
                return self._buffer

        def __init__(self, input_names, output_names):
            self._inputs = {n: self.InferStream() for n in input_names}
            self._outputs = {n: self.InferStream() for n in output_names}

        def _get(self, table, name):
            if name == "" and len(table) == 1:
                return next(iter(table.values()))
            if name not in table:
                raise HailoRTNotFoundException("Item not found. See hailort.log for more information")
            return table[name]

        def input(self, name=""):
            return self._get(self._inputs, name)

        def output(self, name=""):
            return self._get(self._outputs, name)

    def __init__(self, model: InferModel, batch: int = 1):
        self._model = model
        self._batch = batch
        # formats are fixed at configure() time, as in HailoRT
        self._in = {n: (s.frame_size(), s.frame_dtype()) for n, s in model._inputs.items()}
        self._out = {n: (s.frame_size(), s.frame_dtype()) for n, s in model._outputs.items()}
        self._in_streams = dict(model._inputs)
        self._out_streams = dict(model._outputs)
        # bytes per frame over the link: 5.x converts on the device (the user's format crosses),
        # 4.x on the host (the native format crosses)
        on_device = int(str(WORLD.version).split(".")[0]) >= 5
        self._link = {n: (s.frame_size() if on_device else s.native_frame_size())
                      for n, s in list(model._inputs.items()) + list(model._outputs.items())}
        self._queue_size = WORLD.async_queue_size
        self._pending = deque()  # (seq_no, bindings, job)
        self._in_flight = 0
        self._cv = threading.Condition()
        self._closed = False
        self._failed = None
        self._session = None
        self._thread = threading.Thread(target=self._worker, name="fake-hailo-device", daemon=True)
        self._thread.start()
        self._completion_order = []
        WORLD.stats.completion_order.append(self._completion_order)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        pass

    def create_bindings(self, input_buffers=None, output_buffers=None):
        b = self.Bindings(list(self._in), list(self._out))
        for name, buf in (input_buffers or {}).items():
            b.input(name).set_buffer(buf)
        for name, buf in (output_buffers or {}).items():
            b.output(name).set_buffer(buf)
        return b

    def get_async_queue_size(self):
        return self._queue_size

    def wait_for_async_ready(self, timeout_ms=1000, frames_count=1):
        WORLD.stats.ready_waits += 1
        deadline = time.monotonic() + timeout_ms / 1000.0
        with self._cv:
            while self._queue_size - self._in_flight < frames_count:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    raise _timeout()
                self._cv.wait(left)

    def _validate(self, b):
        for kind, table, streams in (("input", self._in, b._inputs), ("output", self._out, b._outputs)):
            for name, (size, _dtype) in table.items():
                buf = streams[name]._buffer
                if buf is None:
                    raise HailoRTNotFoundException(f"Couldnt find {kind} buffer for '{name}'")
                if buf.nbytes != size:
                    raise HailoRTInvalidOperationException(
                        f"{kind.capitalize()} buffer size {buf.nbytes} is different than expected {size} for {kind} '{name}'"
                    )

    def run_async(self, bindings, callback=None):
        WORLD.stats.run_async_calls += 1
        if self._closed:
            raise _status(6, "HAILO_INVALID_OPERATION")
        if self._failed is not None:
            raise HailoRTStreamAborted("Stream was aborted")
        for b in bindings:
            self._validate(b)
        with WORLD.lock:
            WORLD.stats.link_bytes["in"] += len(bindings) * sum(self._link[n] for n in self._in)
            WORLD.stats.link_bytes["out"] += len(bindings) * sum(self._link[n] for n in self._out)
            WORLD.stats.link_frames += len(bindings)
        job = AsyncInferJob(len(bindings))
        job._callback = callback
        with self._cv:
            if self._in_flight + len(bindings) > self._queue_size:
                raise _status(82, "HAILO_QUEUE_IS_FULL")
            for b in bindings:
                with WORLD.lock:
                    seq_no = WORLD.stats.frames
                    WORLD.stats.frames += 1
                self._pending.append((seq_no, b, job))
                self._in_flight += 1
            WORLD.stats.max_in_flight = max(WORLD.stats.max_in_flight, self._in_flight)
            self._cv.notify_all()
        return job

    def run(self, bindings, timeout):
        job = self.run_async(bindings)
        job.wait(timeout)

    def set_scheduler_timeout(self, timeout_ms):
        pass

    def set_scheduler_threshold(self, threshold):
        pass

    def set_scheduler_priority(self, priority):
        pass

    def shutdown(self):
        WORLD.stats.shutdowns += 1
        with self._cv:
            self._closed = True
            aborted = list(self._pending)
            self._pending.clear()
            self._cv.notify_all()
        for _, _, job in aborted:
            self._finish(job, HailoRTStreamAbortedByUser("Stream was aborted by user"))

    # -- the simulated device ------------------------------------------------------------------
    def _finish(self, job, error):
        if error is not None and job._error is None:
            job._error = error
        job._left -= 1
        if job._left == 0:
            if job._callback is not None:
                job._callback(completion_info=AsyncInferCompletionInfo(job._error))
            job._done.set()

    def _worker(self):
        while True:
            with self._cv:
                while not self._pending and not self._closed:
                    self._cv.wait()
                if self._closed:
                    return
            if WORLD.batch_latency_ms is None:
                time.sleep(0.002)  # let the host queue more frames, like a busy device
            with self._cv:
                if not self._pending:
                    continue
                if WORLD.batch_latency_ms is None:
                    batch = list(self._pending)
                    self._pending.clear()
                else:  # one device batch at a time: fixed cost per batch + cost per frame
                    batch = [self._pending.popleft() for _ in range(min(self._batch, len(self._pending)))]
            if WORLD.batch_latency_ms is not None:
                base, per_frame = WORLD.batch_latency_ms
                time.sleep((base + per_frame * len(batch)) / 1000.0)
            if WORLD.out_of_order:
                batch.reverse()
            for seq_no, b, job in batch:
                if WORLD.hang_after_frames is not None and seq_no >= WORLD.hang_after_frames:
                    continue  # never completes; the frame stays in flight
                error = None
                if self._failed is not None:
                    error = HailoRTStreamAborted("Stream was aborted")
                elif WORLD.fail_after_frames is not None and seq_no >= WORLD.fail_after_frames:
                    error = self._failed = _injected_failure()
                else:
                    try:
                        if WORLD.timing_only:
                            for out in b._outputs.values():
                                out._buffer[...] = 0
                        else:
                            self._compute(b)
                    except Exception as e:  # a fake bug must not hang the test
                        error = HailoRTException(f"fake device crashed: {e!r}")
                self._completion_order.append(seq_no)
                with self._cv:
                    self._in_flight -= 1
                    self._cv.notify_all()
                self._finish(job, error)

    def _onnx(self):
        if self._session is None:
            import base64

            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            opts.log_severity_level = 3
            d = self._model._hef._d
            src = base64.b64decode(d["onnx_b64"]) if d.get("onnx_b64") else str(self._model._hef._base / d["onnx"])
            self._session = ort.InferenceSession(src, sess_options=opts, providers=["CPUExecutionProvider"])
        return self._session

    def _read_input(self, b, role):
        """One frame of an input as the network sees it: a native-type buffer dequantised, a FLOAT32
        buffer quantised to the stream's native type first (HailoRT's host-side transformation)."""
        spec = next(i for i in self._model._hef._d["inputs"] if i["role"] == role)
        name = spec["name"]
        stream = self._in_streams[name]
        raw = b._inputs[name]._buffer
        x = np.frombuffer(raw.tobytes(), dtype=stream.frame_dtype())
        if stream.frame_dtype() != np.float32:  # the device's own type: dequantise like HailoRT would
            q = stream.quant_infos[0]
            x = (x.astype(np.float32) - q.qp_zp) * q.qp_scale
        else:  # HailoRT quantises a FLOAT32 buffer to the stream's type on the host
            t = stream._info.format.type
            if t in _QMAX:
                # quantization.hpp quantize_input: clip to limvals, then x / scale + zp, round half to even
                q = stream.quant_infos[0]
                x = np.clip(x, q.limvals_min, q.limvals_max)
                x = (np.clip(np.rint(x / q.qp_scale + q.qp_zp), 0, _QMAX[t]) - q.qp_zp) * q.qp_scale
        return x.astype(np.float32)

    def _mask_feed(self, m: np.ndarray, seq: int):
        """The compiled network's mask input, from the frame's mask values (row-major, any fold),
        in the carried ONNX's shape.

        ``scores``: the zoo's all_minilm_l6_v2 mask (``masked_fill``, NGWC, one row per query,
        heads x keys columns); ``keys01``: one value per key at the mask Mul (the public Hailo-10H
        report); both with ``set_input_mask_to_softmax()``, which the carried ONNX applies as a
        0/1 mask inside softmax, so the values go in as they came. ``keys``: the zoo's BERT mask,
        the additive bias itself, one value per key."""
        mi = self._model._hef._d.get("mask_input")
        if not mi:  # the body's own 0/1 key mask [1, S]
            return np.rint(m.reshape(1, seq)).astype(np.int64)
        if mi["layout"] == "scores":  # one row per query, heads x keys columns (NGWC)
            heads = int(mi["heads"])
            return m.reshape(seq, heads, seq).transpose(1, 0, 2)[None].astype(np.float32)  # [1, heads, Sq, Sk]
        return m.reshape(1, 1, 1, seq).astype(np.float32)  # keys01 / keys: one value per key

    def _compute(self, b):
        d = self._model._hef._d
        seq, hidden = int(d["seq_len"]), int(d["hidden"])
        e = self._read_input(b, "embeddings").reshape(1, seq, hidden)
        m = self._mask_feed(self._read_input(b, "attention_mask"), seq)
        (h,) = self._onnx().run(["last_hidden_state"], {"embeddings": e, "attention_mask": m})
        h = to_basis(h[0], d.get("output_basis"))  # [seq, hidden] in the compiled network's basis
        bug = d.get("device_bug")
        if bug == "transpose":  # the device writes [H, S] into a buffer declared [S, H]
            h = np.ascontiguousarray(h.T).reshape(seq, hidden)
        elif bug == "permute_channels":
            h = h[:, np.random.default_rng(7).permutation(hidden)]
        noise = float(d.get("noise", 0.0))  # stands in for quantisation damage inside the network
        if noise:
            rng = np.random.default_rng(int(np.abs(e).sum() * 1000) % (2**32))
            h = h + rng.standard_normal(h.shape).astype(np.float32) * noise * float(h.std())
        for spec in d["outputs"]:
            name = spec["name"]
            take = spec.get("take")
            part = h
            if take:
                sl = slice(take["start"], take["stop"])
                part = h[:, sl] if take["axis"] == "channels" else h[sl, :]
            native = FormatType[spec.get("type", "UINT8")]
            stream = self._out_streams[name]
            user = stream.frame_dtype()
            if native != FormatType.FLOAT32:
                qs = np.asarray(spec["quant"], dtype=np.float64)
                scale, zp = (qs[0, 0], qs[0, 1]) if len(qs) == 1 else (qs[:, 0], qs[:, 1])
                q = np.clip(np.rint(part / scale + zp), 0, _QMAX[native])
                part = q if user != np.float32 else (q - zp) * scale
            hwc = tuple(spec["shape"])
            order = spec.get("order", "NHWC")
            # NHCW is a device-side order: HailoRT hands the host an NHWC buffer for it (hailort.h)
            if order in ("NHWC", "FCR", "F8CR", "NC", "NHW", "NHCW"):
                host = part.reshape(hwc)
            elif order == "NCHW":
                host = part.reshape(hwc).transpose(2, 0, 1)
            else:
                raise ValueError(f"fake cannot lay out order {order}")
            out = b._outputs[name]._buffer
            out.reshape(-1).view(np.uint8)[:] = np.ascontiguousarray(host, dtype=user).reshape(-1).view(np.uint8)

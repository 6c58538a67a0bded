"""The Hailo device as HailoRT sees it: the SDK, the chips on this machine, sharing them.

What every Hailo-facing part needs before (or without) running a HEF: ``doctor`` and the
hardware report probe the devices, a Ray actor picks its chip, the ``hailo`` backend opens one.

- :func:`import_hailort` is the one place ``hailo_platform`` is imported, at call time: a
  machine without HailoRT imports this module (and the whole core) without it;
- the devices: :func:`scan_device_ids` (PCIe addresses, sorted), :func:`probe_devices` (each
  one's chip and firmware, read from the device), :func:`same_device` (ids compared as HailoRT
  compares them), :func:`find_device`;
- sharing: whether HailoRT 4.x's multi-process service listens, and the errors HailoRT raises
  when a device is held or the runtime cannot drive the chip (5.x and a Hailo-8/8L), turned into
  what to do (:func:`device_busy`, :func:`hailo8_needs_4x`).

Verified against the contract fake in ``tests/fakes/hailo_platform`` only.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass

from hefsearch.base import settings
from hefsearch.base.errors import BackendUnavailable, DeviceError
from hefsearch.base.versions import major_version

#: the one device to open (a PCIe address as Device.scan() lists it) on a machine with several
ENV_DEVICE = settings.HAILO_DEVICE.name
#: HailoRT 4.x's multi-process service: 1 forces it, 0 keeps it off (default: used when it listens)
ENV_SERVICE = settings.HAILO_SERVICE.name

INSTALL_HINT = (
    "On a Raspberry Pi 5 (64-bit Raspberry Pi OS Trixie): 'sudo apt install dkms hailo-h10-all' for the "
    "AI HAT+ 2 (Hailo-10H; Python binding python3-h10-hailort) or 'sudo apt install dkms hailo-all' for "
    "the AI Kit / AI HAT+ (Hailo-8/8L; python3-hailort), never both; reboot, and create your venv with "
    "--system-site-packages so it sees that binding. On x86-64: install the hailort wheel for your "
    "Python from Hailo's Developer Zone. Or run on the CPU: --backend cpu."
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
        if is_hailo8_on_5x(e, getattr(hp, "__version__", None)):
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


def status_code(e: BaseException) -> int | None:
    m = re.search(r"error:?\s*(\d+)", str(e))
    return int(m.group(1)) if m else None


def is_out_of_devices(e: BaseException) -> bool:
    """74 when HailoRT scans for a free device, 73 when a device id was named (hailort.h)."""
    return status_code(e) in (STATUS_OUT_OF_PHYSICAL_DEVICES, STATUS_DEVICE_IN_USE) or \
        "OUT_OF_PHYSICAL_DEVICES" in str(e) or "DEVICE_IN_USE" in str(e)


def is_hailo8_on_5x(e: BaseException, version: str | None = None) -> bool:
    """HailoRT 5.x opening a Hailo-8/8L: pcie_device.cpp logs "only supported in versions 4.x.x"
    and returns HAILO_NOT_SUPPORTED (79), which the Python binding raises as a bare status."""
    if "only supported in versions 4" in str(e):
        return True
    major = major_version(version)
    return major is not None and major >= 5 and (status_code(e) == 79 or "HAILO_NOT_SUPPORTED" in str(e))


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

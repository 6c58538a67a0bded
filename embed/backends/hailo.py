"""The ``hailo`` backend: the encoder body compiled to a HEF, run on a Hailo NPU by HailoRT.

Uses HailoRT's InferModel API (HailoRT >= 4.18; the only API on Hailo-10H):

- one ``VDevice`` with the round-robin scheduler and the group id ``"SHARED"``, so the TUI and
  an indexer in another process can use the device at the same time;
- one ``InferModel`` per HEF (a bundle may carry HEFs for several SEQ); every input and
  output set to FLOAT32 *before* ``configure()``, so HailoRT quantises the inputs and
  dequantises the outputs with the HEF's own scales;
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
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..bundle import Bundle, EncoderEntry
from ..errors import BackendUnavailable, DeviceError, HefsearchError
from ..hef_contract import ContractCheck, HefContract, OutputAssembler, StreamSpec, check_contract

log = logging.getLogger("hefsearch.embed.hailo")

SHARED_GROUP_ID = "SHARED"
#: environment overrides: the per-frame timeout, and HailoRT 4.x's multi-process service
ENV_TIMEOUT = "HEFSEARCH_HAILO_TIMEOUT_MS"
ENV_SERVICE = "HEFSEARCH_HAILO_SERVICE"
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


def probe_devices(hp=None) -> list[DeviceInfo]:
    """Scan for Hailo devices and read each one's architecture from the device itself.

    Raises DeviceError when a device is present but does not answer.
    """
    hp = hp or import_hailort()
    try:
        ids = list(hp.Device.scan())
    except Exception as e:
        raise DeviceError(f"HailoRT could not scan for devices: {type(e).__name__}: {e}", DEVICE_HINT) from None
    found = []
    for dev_id in ids:
        try:
            with hp.Device(dev_id) as dev:
                info = dev.control.identify()
        except Exception as e:
            raise DeviceError(
                f"Hailo device {dev_id} is present but did not answer: {type(e).__name__}: {e}",
                DEVICE_HINT + " If another program holds the device, stop it or let it use the scheduler.",
            ) from None
        fw = getattr(info, "firmware_version", None)
        found.append(DeviceInfo(str(dev_id), arch_name(info.device_architecture), str(fw) if fw else None))
    return found


def hef_entries_for(bundle: Bundle, hw_arch: str, precision: str | None = None) -> list[EncoderEntry]:
    """The bundle's HEFs for one chip, one per SEQ (the last listed wins), shortest SEQ first."""
    by_seq: dict[int, EncoderEntry] = {}
    for e in bundle.encoder_entries("hef"):
        if (e.hw_arch or "").lower() != hw_arch.lower() or not e.seq_len:
            continue
        if precision and precision_name(e) != precision:
            continue
        by_seq[int(e.seq_len)] = e
    return [by_seq[s] for s in sorted(by_seq)]


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


def spec_from_vstream_info(info) -> StreamSpec:
    q = getattr(info, "quant_info", None)
    return StreamSpec(
        name=str(info.name),
        shape=tuple(int(x) for x in info.shape),
        order=_enum_name(info.format.order),
        type=_enum_name(info.format.type),
        quant=_quant_pairs([q] if q is not None else []),
    )


def spec_from_infer_stream(stream) -> StreamSpec:
    fmt = stream.format
    return StreamSpec(
        name=str(stream.name),
        shape=tuple(int(x) for x in stream.shape),
        order=_enum_name(fmt.order),
        type=_enum_name(fmt.type),
        quant=_quant_pairs(stream.quant_infos),
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
        HefContract.from_entry(entry, bundle.hidden), streams.inputs, streams.outputs, streams.sorted_outputs
    )
    return streams


def _is_timeout(e: BaseException) -> bool:
    return any("Timeout" in c.__name__ for c in type(e).__mro__)


def _root_cause(errors: list[BaseException]) -> BaseException:
    """After one failure HailoRT aborts every other frame in flight; report the first real one."""
    real = [e for e in errors if not any("Aborted" in c.__name__ for c in type(e).__mro__)]
    return (real or errors)[0]


def device_error(e: BaseException, doing: str, timeout_ms: int) -> DeviceError:
    if isinstance(e, DeviceError):
        return e
    if _is_timeout(e):
        return DeviceError(f"The Hailo device did not answer within {timeout_ms / 1000:g} s while {doing}.", DEVICE_HINT)
    return DeviceError(f"The Hailo device failed while {doing}: {type(e).__name__}: {e}", DEVICE_HINT)


# -- one configured HEF -------------------------------------------------------------------------------
class _HefModel:
    """One HEF (one SEQ) configured on the shared VDevice."""

    def __init__(self, hp, vdevice, bundle: Bundle, entry: EncoderEntry, *, output_type: str,
                 device_batch: int | None, timeout_ms: int):
        self.entry = entry
        self.seq = int(entry.seq_len)
        self.hidden = bundle.hidden
        self.timeout_ms = timeout_ms
        self.path = bundle.path / entry.file
        streams = read_hef(self.path, hp)
        check = check_contract(
            HefContract.from_entry(entry, bundle.hidden), streams.inputs, streams.outputs, streams.sorted_outputs
        )
        check.raise_if_failed(self.path)
        self.check = check
        self.cim = None
        im = vdevice.create_infer_model(str(self.path))
        # FLOAT32 everywhere before configure(): HailoRT (de)quantises with the HEF's scales.
        for name in im.input_names:
            im.input(name).set_format_type(hp.FormatType.FLOAT32)
        if output_type == "float32":
            for name in im.output_names:
                im.output(name).set_format_type(hp.FormatType.FLOAT32)
        if device_batch:
            im.set_batch_size(int(device_batch))
        self.cim = im.configure()
        self.emb_name = check.embeddings.name
        self.mask_name = check.attention_mask.name
        self.emb_shape = tuple(int(x) for x in im.input(self.emb_name).shape)
        self.mask_shape = tuple(int(x) for x in im.input(self.mask_name).shape)
        for name, shape, dtype_name in ((self.emb_name, self.emb_shape, im.input(self.emb_name).format.type),
                                        (self.mask_name, self.mask_shape, im.input(self.mask_name).format.type)):
            if _enum_name(dtype_name) != "FLOAT32":
                raise DeviceError(f"HailoRT kept input {name} at {_enum_name(dtype_name)} after set_format_type(FLOAT32).",
                                  "Update HailoRT; hefsearch needs FLOAT32 inputs.")
        # The configured output formats (FLOAT32, or the native type when asked) size the buffers.
        self.out_specs = [spec_from_infer_stream(im.output(s.name)) for s in check.outputs]
        self.assemble = OutputAssembler(check, self.out_specs)
        self.queue_size = max(1, int(self.cim.get_async_queue_size()))

    def run(self, e: np.ndarray, mask: np.ndarray) -> np.ndarray:
        n = e.shape[0]
        e = np.ascontiguousarray(e, dtype=np.float32)
        m = np.ascontiguousarray(mask, dtype=np.float32)  # the raw 0/1 mask, as the HEF expects
        outs = {s.name: np.empty((n, *s.shape), dtype=s.dtype) for s in self.out_specs}
        errors: list[BaseException] = []

        def on_done(completion_info=None, **_):
            exc = getattr(completion_info, "exception", None)
            if exc is not None:
                errors.append(exc)

        jobs = []
        try:
            for i in range(n):
                # Back-pressure: block until the device queue has room, so frames stream.
                self.cim.wait_for_async_ready(timeout_ms=self.timeout_ms, frames_count=1)
                bindings = self.cim.create_bindings(
                    input_buffers={self.emb_name: e[i].reshape(self.emb_shape),
                                   self.mask_name: m[i].reshape(self.mask_shape)},
                    output_buffers={name: buf[i] for name, buf in outs.items()},
                )
                jobs.append(self.cim.run_async([bindings], callback=on_done))
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
class HailoBackend:
    """Runs the bundle's HEF(s) for the local Hailo device. See the module docstring."""

    name = "hailo"
    space_kind = "hef"

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
        entries = hef_entries_for(bundle, dev.arch)
        if not entries:
            have = sorted({e.hw_arch or "?" for e in bundle.encoder_entries("hef")})
            return False, f"{dev.label} found, but the bundle's HEFs are for {', '.join(have)}"
        files = ", ".join(f"{e.file} (SEQ {e.seq_len})" for e in entries)
        return True, f"{dev.label} found; bundle has {files}"

    def __init__(self, bundle: Bundle, *, batch_size: int = DEFAULT_BATCH_SIZE, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 device_batch: int | None = None, output_type: str = "float32", precision: str | None = None,
                 group_id: str = SHARED_GROUP_ID, multi_process_service: bool | None = None, **_ignored):
        if output_type not in ("float32", "native"):
            raise ValueError("output_type must be 'float32' or 'native'")
        self.bundle = bundle
        self.batch_size = int(batch_size)
        self.timeout_ms = int(os.environ.get(ENV_TIMEOUT) or timeout_ms)
        if multi_process_service is None and os.environ.get(ENV_SERVICE):
            multi_process_service = os.environ[ENV_SERVICE].lower() in ("1", "true", "yes", "on")
        self._opts = dict(output_type=output_type, device_batch=device_batch, timeout_ms=self.timeout_ms)
        self._group_id = group_id
        self._multi_process_service = multi_process_service
        self._lock = threading.Lock()
        self._hp = import_hailort()
        devices = probe_devices(self._hp)
        if not devices:
            raise BackendUnavailable("No Hailo device found.", DEVICE_HINT + " Or run on the CPU: --backend cpu.")
        self.device = devices[0]
        self.hw_arch = self.device.arch
        self.label = self.device.label
        self.entries = hef_entries_for(bundle, self.hw_arch, precision)
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
        try:
            params = hp.VDevice.create_params()
            params.scheduling_algorithm = hp.HailoSchedulingAlgorithm.ROUND_ROBIN
            params.group_id = self._group_id
            if self._multi_process_service is not None:  # HailoRT 4.x multi-process service only
                params.multi_process_service = bool(self._multi_process_service)
            self._vdevice = hp.VDevice(params)
        except Exception as e:
            raise BackendUnavailable(
                f"Cannot open the {self.label}: {type(e).__name__}: {e}", DEVICE_HINT
            ) from None
        try:
            for entry in self.entries:
                self._models[int(entry.seq_len)] = _HefModel(hp, self._vdevice, self.bundle, entry, **self._opts)
        except HefsearchError:
            self.close()
            raise
        except Exception as e:
            self.close()
            raise BackendUnavailable(
                f"HailoRT cannot load the HEF on the {self.label}: {type(e).__name__}: {e}",
                "Check that the HEF was compiled for this chip and HailoRT version ('hefsearch doctor').",
            ) from None
        log.info("hailo: %s ready with SEQ %s", self.label, ", ".join(map(str, self.seq_lens)))

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

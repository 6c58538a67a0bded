"""The ``hailo`` backend: the encoder body compiled to a HEF, run on a Hailo NPU by HailoRT's
InferModel API (HailoRT >= 4.18; the only API on Hailo-10H).

- one ``VDevice``, round-robin scheduler, group id ``"SHARED"`` (the TUI and an indexer in another
  process share the device); ``device_id`` picks one chip of several, set in the params so the
  scheduler and group id stay;
- one ``InferModel`` per HEF (one SEQ each), stream format types set before ``configure()``
  (:mod:`hefsearch.embed.hailo_streams`: host-quantised on 5.x, FLOAT32 on 4.x);
- one Bindings per frame, ``run_async`` after ``wait_for_async_ready``, every job waited for with
  a timeout; HailoRT errors and timeouts become :class:`DeviceError` with a plain message;
- the HEF's stream infos are checked against the manifest (:mod:`hefsearch.embed.hef_contract`)
  before the first frame; outputs are read as the HEF reports them, never assumed.

Devices (scan, sharing, open errors, the ``hailo_platform`` import) are
:mod:`hefsearch.embed.hailo_device`. Verified against the contract fake in
``tests/fakes/hailo_platform`` (written from the public HailoRT 4.23/5.2 Python sources) only.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, fields

import numpy as np

from hefsearch.base import settings
from .. import space_names
from ..bundle import Bundle, EncoderEntry
from hefsearch.base.errors import BackendUnavailable, DeviceError, HefsearchError
from ..hailo_device import (DEVICE_HINT, ENV_DEVICE, ENV_SERVICE, device_busy, find_device, hailo8_needs_4x,
                            import_hailort, is_hailo8_on_5x, is_out_of_devices, probe_devices, runtime_version,
                            scan_device_ids, service_running, status_code)
from ..hailo_streams import ENV_STREAMS, QMAX, STREAM_TYPES, FrameCost, exact_quantiser, resolve_stream_types, \
    stream_quantiser
from ..hef_contract import HefContract, OutputAssembler, StreamSpec, check_contract, to_stream
from ..hef_file import hef_entries_for, precision_name, read_hef, spec_from_infer_stream
from ..runtime_pairing import is_hef_refused, refused_hef
from hefsearch.base.versions import major_version
from .base import Backend

log = logging.getLogger("hefsearch.embed.hailo")

SHARED_GROUP_ID = "SHARED"
#: environment overrides: the per-frame timeout and the bulk device batch (the device, the
#: multi-process service and the stream types: hailo_device, hailo_streams)
ENV_TIMEOUT = settings.HAILO_TIMEOUT_MS.name
#: the device batch for bulk encoding; the zoo's MiniLM runs 156 FPS at batch 1 and 742 at 8
BULK_DEVICE_BATCH = 8
DEFAULT_TIMEOUT_MS = 10_000
DEFAULT_BATCH_SIZE = 8


# -- a frame that failed --------------------------------------------------------------------------
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


# -- one configured HEF -------------------------------------------------------------------------------
@dataclass(frozen=True)
class StreamSetup:
    """How every HEF of one backend is configured: the stream types (resolved for the runtime),
    the device batch asked for, the per-frame timeout, and where quantisation happens."""

    input_type: str
    output_type: str
    device_batch: int | None
    timeout_ms: int
    conversion: str = "host"


class _HefModel:
    """One HEF (one SEQ) configured on the shared VDevice."""

    def __init__(self, hp, vdevice, bundle: Bundle, entry: EncoderEntry, setup: StreamSetup):
        input_type, output_type, conversion = setup.input_type, setup.output_type, setup.conversion
        timeout_ms, device_batch = setup.timeout_ms, setup.device_batch
        self.entry = entry
        self.seq = int(entry.seq_len)
        self.hidden = bundle.hidden
        self.timeout_ms = timeout_ms
        self.path = bundle.path / entry.file
        streams = read_hef(self.path, hp, entry.extra.get("dfc_version"))
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
        self.mask_encode = exact_quantiser(native[self.mask_name], self.layout.value_pair)
        if self.mask_encode is None and conversion == "device":
            # HailoRT 5.x: never a FLOAT32 mask (FLOAT32 input buffers are reported failing with a
            # Hailo-10H on 5.2, community thread 18979); HailoRT's own formula, as the device would
            self.mask_encode = stream_quantiser(native[self.mask_name])
        self.emb_encode = stream_quantiser(native[self.emb_name]) if input_type == "native" else None
        host_encoded = {self.mask_name: self.mask_encode, self.emb_name: self.emb_encode}
        for name in im.input_names:
            if host_encoded.get(name) is not None:
                im.input(name).set_format_type(getattr(hp.FormatType, native[name].type))
            else:
                im.input(name).set_format_type(hp.FormatType.FLOAT32)
        for name in im.output_names:
            keep = output_type == "native" and name in native_out and native_out[name].type in QMAX
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
@dataclass(frozen=True)
class HailoOptions:
    """The ``hailo`` backend's options (``Encoder.open`` keywords, or a space's stored
    ``backend_opts``); None: the setting (``HEFSEARCH_HAILO_*``) or the default decides."""

    batch_size: int = DEFAULT_BATCH_SIZE
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    device_batch: int | None = None
    #: bulk work (index, backfill, calibration): fill the device in batches
    bulk: bool = False
    output_type: str | None = None
    input_type: str | None = None
    precision: str | None = None
    group_id: str = SHARED_GROUP_ID
    multi_process_service: bool | None = None
    device_id: str | None = None

    @classmethod
    def from_opts(cls, opts: dict) -> "HailoOptions":
        """The options this backend knows; another backend's (``threads``, ``profile`` ...) are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in opts.items() if k in known})


class HailoBackend(Backend):
    """Runs the bundle's HEF(s) for the local Hailo device. See the module docstring."""

    name = "hailo"
    space_kind = space_names.HEF
    #: one Ray actor per chip: a node offers ``--resources='{"hailo": N}'`` for N chips
    ray_resource = "hailo"

    @classmethod
    def device_ids(cls) -> list[str]:
        """The chips of this machine, sorted (``Device.scan()``): a Ray actor takes the one of its rank."""
        return scan_device_ids()

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

    @classmethod
    def open(cls, bundle: Bundle, opts: dict) -> "HailoBackend":
        return cls(bundle, HailoOptions.from_opts(opts))

    def __init__(self, bundle: Bundle, options: HailoOptions = HailoOptions()):
        streams = settings.HAILO_STREAMS.value() or "auto"
        input_type, output_type = options.input_type or streams, options.output_type or streams
        for kind in (input_type, output_type):
            if kind not in STREAM_TYPES:
                raise BackendUnavailable(f"Unknown Hailo stream type {kind!r}.",
                                         f"Use one of {', '.join(STREAM_TYPES)} (or unset {ENV_STREAMS}).")
        self.bundle = bundle
        self.batch_size = int(options.batch_size)
        self.timeout_ms = int(settings.HAILO_TIMEOUT_MS.value() or options.timeout_ms)
        service = settings.HAILO_SERVICE.value()
        multi_process_service, device_batch = options.multi_process_service, options.device_batch
        if multi_process_service is None and service:
            multi_process_service = service.lower() in ("1", "true", "yes", "on")
        if device_batch is None:
            # Bulk work (index, backfill, calibration) fills the device in batches; a query goes
            # alone at HailoRT's default batch 1, the lowest latency.
            device_batch = int(settings.HAILO_DEVICE_BATCH.value() or BULK_DEVICE_BATCH) if options.bulk else 1
        self.batch_size = max(self.batch_size, int(device_batch))
        self._types = (input_type, output_type)
        self._device_batch = int(device_batch)
        self._group_id = options.group_id
        self._multi_process_service = multi_process_service
        self._lock = threading.Lock()
        self._hp = import_hailort()
        self.runtime = str(getattr(self._hp, "__version__", "") or "unknown")
        self.notes: list[str] = []
        #: the one device to open (None: HailoRT picks, e.g. the first free one on 4.x)
        self.device_id = options.device_id or settings.HAILO_DEVICE.value() or None
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
        self.entries = hef_entries_for(bundle, self.hw_arch, options.precision)
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
            if is_hailo8_on_5x(e, self.runtime):
                raise hailo8_needs_4x(self.runtime) from None
            if is_out_of_devices(e):
                raise device_busy(self.runtime, self._where, service,
                                  "73, HAILO_DEVICE_IN_USE" if self.device_id else "74, HAILO_OUT_OF_PHYSICAL_DEVICES") from None
            if self.device_id and "Invalid argument" in str(e):  # gone since the scan (HAILO_INVALID_ARGUMENT)
                raise BackendUnavailable(f"Cannot open the {self._where}: HailoRT no longer finds it ({e}).",
                                         DEVICE_HINT) from None
            if service and (status_code(e) == 77 or "RPC_FAILED" in str(e)):
                raise BackendUnavailable(
                    f"HailoRT's multi-process service did not answer (status 77, HAILO_RPC_FAILED) while opening "
                    f"the {self.label}.",
                    "Start it: 'sudo systemctl enable --now hailort.service', or do not force it "
                    f"({ENV_SERVICE}=0) when this is the only program using the device.") from None
            raise BackendUnavailable(
                f"Cannot open the {self.label}: {type(e).__name__}: {e}", DEVICE_HINT
            ) from None
        conversion = "device" if (major_version(self.runtime) or 5) >= 5 else "host"
        setup = StreamSetup(input_type=resolve_stream_types(self._types[0], self.runtime),
                            output_type=resolve_stream_types(self._types[1], self.runtime),
                            device_batch=self._device_batch, timeout_ms=self.timeout_ms, conversion=conversion)
        try:
            for entry in self.entries:
                self._models[int(entry.seq_len)] = _HefModel(hp, self._vdevice, self.bundle, entry, setup)
        except HefsearchError:
            self.close()
            raise
        except Exception as e:
            self.close()
            if is_hef_refused(e):  # status 92: a HEF this runtime cannot read (a DFC of another release)
                dfc = next((x.extra.get("dfc_version") for x in self.entries if x.extra.get("dfc_version")), None)
                raise BackendUnavailable(*refused_hef(", ".join(x.file for x in self.entries), dfc, self.runtime,
                                                      e)) from None
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
        return min((m.device_batch for m in self._models.values()), default=self._device_batch)

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

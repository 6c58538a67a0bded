"""Test controls of the fake ``hailo_platform`` (NOT part of HailoRT's API).

Tests configure the simulated machine here: which devices answer, the runtime version, the
async queue depth, and failures to inject (other processes: a JSON file named by
``HEFSEARCH_FAKE_HAILO_WORLD``, read at import). ``WORLD.reset()`` restores the defaults (one
Hailo-10H on HailoRT 5.3.0, the public Hailo-10H report's runtime, or the version in the
environment variable ``HEFSEARCH_FAKE_HAILORT_VERSION``, e.g. 5.1.1, what the Raspberry Pi
archive installs for Hailo-10H). ``WORLD.stats`` records what the code under test did, so tests
can assert on it (back-pressure, out-of-order completion, shutdown).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field


@dataclass
class Stats:
    vdevice_params: list = field(default_factory=list)   # (scheduling_algorithm, group_id, multi_process_service)
    vdevice_devices: list = field(default_factory=list)  # the device id each VDevice opened on
    infer_models: int = 0
    set_format_types: list = field(default_factory=list)  # (stream name, FormatType, configured_already)
    set_format_orders: list = field(default_factory=list)  # (stream name, order)
    batch_sizes: list = field(default_factory=list)
    configures: int = 0
    shutdowns: int = 0
    released_vdevices: int = 0
    frames: int = 0
    run_async_calls: int = 0
    ready_waits: int = 0
    max_in_flight: int = 0
    completion_order: list = field(default_factory=list)  # per configured model: frame sequence numbers
    legacy_configure_calls: int = 0
    identify_calls: int = 0
    configured_batches: list = field(default_factory=list)  # the device batch each configure() resolved to
    warnings: list = field(default_factory=list)  # what HailoRT would write to hailort.log as warnings
    #: bytes that crossed the host-device link, inputs and outputs (pyhailort.py says where
    #: each HailoRT line converts formats), and the frames they belong to
    link_bytes: dict = field(default_factory=lambda: {"in": 0, "out": 0})
    link_frames: int = 0


#: the runtime version of a fresh world, unless the environment names one
DEFAULT_VERSION = "5.3.0"
#: the environment variable that sets the runtime version (another process, an arm64 check)
ENV_VERSION = "HEFSEARCH_FAKE_HAILORT_VERSION"


@dataclass
class World:
    #: devices Device.scan() finds: {"id": ..., "arch": DeviceArchitectureTypes name}
    devices: list = field(default_factory=lambda: [{"id": "0001:01:00.0", "arch": "HAILO10H"}])
    #: HailoRT's version (``hailo_platform.__version__``); it decides which HEFs load (pyhailort.py)
    version: str = field(default_factory=lambda: os.environ.get(ENV_VERSION) or DEFAULT_VERSION)
    #: ``ConfiguredInferModel.get_async_queue_size()``; also the internal queue size above which
    #: ``configure()`` refuses a batch (infer_model.cpp)
    async_queue_size: int = 4
    #: complete the queued frames newest-first (real hardware gives no order guarantee)
    out_of_order: bool = True
    #: after this many frames, every further frame fails with ``fail_kind``
    fail_after_frames: int | None = None
    fail_kind: str = "driver"  # "driver" | "communication" | "aborted"
    #: after this many frames, frames are never completed (job.wait times out)
    hang_after_frames: int | None = None
    #: Device(...).control.identify() raises (device busy or broken)
    identify_fails: bool = False
    #: HailoRT 4.x's multi-process service (hailort.service) is running; VDevices created with
    #: multi_process_service=True fail with HAILO_RPC_FAILED without it
    service_running: bool = False
    #: where the per-device lock files live (HailoRT 4.x exclusivity across processes); None =
    #: the system temp folder, shared by every process like the real driver's state
    lock_dir: str | None = None
    #: (ms per device batch, ms per frame): the device's speed; None = as fast as possible.
    #: The zoo's MiniLM on Hailo-8 (156 FPS at batch 1, 742 at batch 8) is about (5.8, 0.63).
    batch_latency_ms: tuple | None = None
    #: skip the body's arithmetic (outputs are written as zeros): for timing the host
    #: and the batching alone, in bench/host_overhead.py
    timing_only: bool = False
    stats: Stats = field(default_factory=Stats)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        fresh = World()
        for name in ("devices", "version", "async_queue_size", "out_of_order", "fail_after_frames",
                     "fail_kind", "hang_after_frames", "identify_fails", "service_running", "lock_dir",
                     "batch_latency_ms", "timing_only", "stats"):
            setattr(self, name, getattr(fresh, name))


WORLD = World()

#: a JSON file of World fields (devices, version, lock_dir) applied at import: the control for
#: processes a test cannot reach in memory, such as Ray actors (tests/index/test_ray_index.py)
ENV_WORLD = "HEFSEARCH_FAKE_HAILO_WORLD"


def _load_world_file() -> None:
    import json
    import os

    path = os.environ.get(ENV_WORLD)
    if path and os.path.isfile(path):
        with open(path) as f:
            for name, value in json.load(f).items():
                if name in ("devices", "version", "lock_dir"):
                    setattr(WORLD, name, value)


_load_world_file()

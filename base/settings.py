"""Every ``HEFSEARCH_*`` environment variable, declared once: its name, what it means and its
default. Modules read a variable through its :class:`Setting` (``settings.BUNDLE.value()``) and
click options take ``envvar=settings.X.name``; each caller keeps its own parsing, so a value means
what it meant before. ``tests/project/test_settings.py`` fails on a direct ``os.environ`` read elsewhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    name: str
    meaning: str
    default: str  # as the reader applies it, in words

    def value(self, fallback: str | None = None) -> str | None:
        """The variable's text as set (``""`` included), else ``fallback``; read at each call."""
        return os.environ.get(self.name, fallback)


HOME = Setting("HEFSEARCH_HOME", "one folder for data, <home>/cache and <home>/config",
               "the platform's user data, cache and config folders")
LIBRARY = Setting("HEFSEARCH_LIBRARY", "the library (a name in the data folder, or a path)",
                  "<data folder>/library")
BUNDLE = Setting("HEFSEARCH_BUNDLE", "the model bundle folder",
                 "the library's bundle, else the one 'hefsearch index' was last given")
BACKEND = Setting("HEFSEARCH_BACKEND", "the backend (cpu, cpu-int8, npu-sim, hailo, auto)", "auto")
TOKEN = Setting("HEFSEARCH_TOKEN", "the server's bearer token for clients", "the default token file")
SIM = Setting("HEFSEARCH_SIM", "the npu-sim simulation profile", "the only one, else balanced")
THREADS = Setting("HEFSEARCH_THREADS", "CPU encoder threads (ONNX Runtime intra-op threads, or batch pieces run at once)",
                  "every core")
ORT_CACHE = Setting("HEFSEARCH_ORT_CACHE", "0 turns the optimised-model cache off", "on")
ORT_FUSE = Setting("HEFSEARCH_ORT_FUSE", "0 turns ORT graph fusion off", "on")
ORT_PARALLEL = Setting("HEFSEARCH_ORT_PARALLEL", "bulk CPU encoding: batches (pieces of a batch at once) or "
                       "operators (ONNX Runtime's intra-op threads)", "the processor family's choice")
HAILO_DEVICE = Setting("HEFSEARCH_HAILO_DEVICE", "the Hailo device id to open", "the only one")
HAILO_SERVICE = Setting("HEFSEARCH_HAILO_SERVICE", "1 shares the device through the HailoRT service",
                        "the backend's choice")
HAILO_STREAMS = Setting("HEFSEARCH_HAILO_STREAMS", "the HEF stream format type", "auto")
HAILO_TIMEOUT_MS = Setting("HEFSEARCH_HAILO_TIMEOUT_MS", "the wait for one inference, in ms",
                           "the backend's timeout")
HAILO_DEVICE_BATCH = Setting("HEFSEARCH_HAILO_DEVICE_BATCH", "frames per device call on bulk opens", "8")
PROGRESS_SECONDS = Setting("HEFSEARCH_PROGRESS_SECONDS", "seconds between progress lines", "60")
DOCUMENT_LIMITS = Setting("HEFSEARCH_DOCUMENT_LIMITS",
                          "one document's limits raised, e.g. seconds=600,memory_mb=1024,ocr_pages=2000",
                          "readers/budget.py: Limits (docs/indexing.md)")

ALL = (HOME, LIBRARY, BUNDLE, BACKEND, TOKEN, SIM, THREADS, ORT_CACHE, ORT_FUSE, ORT_PARALLEL, HAILO_DEVICE, HAILO_SERVICE,
       HAILO_STREAMS, HAILO_TIMEOUT_MS, HAILO_DEVICE_BATCH, PROGRESS_SECONDS, DOCUMENT_LIMITS)

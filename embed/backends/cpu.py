"""The ``cpu`` backend: the bundle's FP32 encoder body on ONNX Runtime. The reference."""

from __future__ import annotations

import os

import numpy as np

from ..bundle import Bundle
from ..errors import BackendUnavailable, BundleError


def make_session(path: str, threads: int | None = None):
    """An ONNX Runtime CPU session with a bounded thread pool."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    n = threads or int(os.environ.get("HEFSEARCH_THREADS", "0")) or (os.cpu_count() or 1)
    opts.intra_op_num_threads = n
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    # Spinning worker threads win a little on an idle machine and lose badly when the TUI,
    # an indexer and other processes share a Pi's cores: block instead.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # ORT raises its own Fail/InvalidGraph types
        raise BundleError(f"ONNX Runtime cannot load {path}: {e}", "Re-export the bundle.") from None


class CpuBackend:
    name = "cpu"
    label = "CPU FP32"
    space_kind = "cpu-fp32"
    seq_lens = None

    def __init__(self, bundle: Bundle, threads: int | None = None, batch_size: int = 32, **_):
        entries = bundle.encoder_entries("onnx")
        if not entries:
            raise BackendUnavailable(
                f"Bundle {bundle.path} has no FP32 ONNX encoder body.", "Re-export the bundle."
            )
        self.entry = entries[0]
        self.file_sha256 = bundle.file_sha256(self.entry.file)
        self.batch_size = batch_size
        self.threads = threads
        self._session = make_session(str(bundle.path / self.entry.file), threads)

    def fingerprint_parts(self) -> dict:
        return {"encoder": "onnx-fp32", "file_sha256": self.file_sha256}

    def run(self, embeddings: np.ndarray, mask: np.ndarray) -> np.ndarray:
        (out,) = self._session.run(
            ["last_hidden_state"], {"embeddings": embeddings, "attention_mask": mask.astype(np.int64)}
        )
        return out

    def close(self) -> None:
        self._session = None

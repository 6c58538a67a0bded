"""What the ``cpu``, ``cpu-int8`` and ``npu-sim`` backends share: one encoder body of the
bundle (FP32, int8 weights, or fake-quantised) run on ONNX Runtime's CPU provider."""

from __future__ import annotations

import os

import numpy as np

from ..bundle import Bundle, EncoderEntry
from ..errors import BackendUnavailable, BundleError
from .base import Backend


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


class OnnxBodyBackend(Backend):
    """Runs ``entry``'s ONNX body: E and mask in, last hidden state out."""

    #: the error after close(); None: the session is simply gone
    closed_message: str | None = None

    def __init__(self, bundle: Bundle, entry: EncoderEntry, *, threads: int | None = None,
                 batch_size: int = 32):
        self.entry = entry
        self.file_sha256 = bundle.file_sha256(entry.file)
        self.batch_size = batch_size
        self.threads = threads
        self._session = make_session(str(bundle.path / entry.file), threads)

    def run(self, embeddings: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self._session is None:
            raise BackendUnavailable(self.closed_message or f"The {self.label} encoder was closed.")
        (out,) = self._session.run(
            ["last_hidden_state"], {"embeddings": embeddings, "attention_mask": mask.astype(np.int64)}
        )
        return out

    def close(self) -> None:
        self._session = None

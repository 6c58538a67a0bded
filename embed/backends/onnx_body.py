"""What the ``cpu``, ``cpu-int8`` and ``npu-sim`` backends share: one encoder body of the
bundle (FP32, int8 weights, or fake-quantised) run on ONNX Runtime (CPU provider by default),
its session opened through the optimised-model cache of :mod:`hefsearch.embed.ort_session`."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..bundle import Bundle, EncoderEntry
from hefsearch.base.errors import BackendUnavailable
from ..ort_session import DEFAULT_PROVIDERS, BodyFile, make_session, open_body_session
from .base import Backend

__all__ = ["DEFAULT_PROVIDERS", "OnnxBodyBackend", "make_session"]


class OnnxBodyBackend(Backend):
    """Runs ``entry``'s ONNX body: E and mask in, last hidden state out."""

    #: the error after close(); None: the session is simply gone
    closed_message: str | None = None
    #: an FP32 body whose attention ONNX Runtime's transformer optimizer may fuse (``cpu``)
    fusable: bool = False

    def __init__(self, bundle: Bundle, entry: EncoderEntry, *, threads: int | None = None,
                 batch_size: int = 32, providers: Sequence[str] | None = None, bulk: bool = False):
        self.entry = entry
        self.file_sha256 = bundle.file_sha256(entry.file)
        self.batch_size = batch_size
        self.threads = threads
        #: ONNX Runtime execution providers, in order of preference (default: the CPU's)
        self.providers = tuple(providers or DEFAULT_PROVIDERS)
        body = BodyFile(bundle.path / entry.file, self.file_sha256, heads=int(bundle.model.get("heads") or 0),
                        hidden=bundle.hidden, fusable=self.fusable and bool(bundle.model.get("heads")))
        #: "fused", "optimised" or "uncached" (see open_body_session), for benches and reports
        self._session, self.session_kind = open_body_session(body, threads, self.providers, bulk=bulk)

    def run(self, embeddings: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self._session is None:
            raise BackendUnavailable(self.closed_message or f"The {self.label} encoder was closed.")
        import onnxruntime as ort

        options = self._running = ort.RunOptions()
        if self.stopping:  # asked to stop just before this run began (stop_running read no options)
            options.terminate = True
        try:
            (out,) = self._session.run(
                ["last_hidden_state"], {"embeddings": embeddings, "attention_mask": mask.astype(np.int64)},
                options)
        finally:
            self._running = None
        return out

    #: the RunOptions of the run in flight: ``terminate`` ends it between two of its operators
    _running = None

    def stop_running(self) -> None:
        """ONNX Runtime checks ``RunOptions.terminate`` between the nodes it runs, so a batch
        of a few seconds (a long one on a loaded CPU) ends within one node's time."""
        self.stopping = True
        options = self._running
        if options is not None:
            options.terminate = True

    def close(self) -> None:
        self._session = None

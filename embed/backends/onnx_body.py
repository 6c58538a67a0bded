"""What the ``cpu``, ``cpu-int8`` and ``npu-sim`` backends share: one encoder body of the
bundle (FP32, int8 weights, or fake-quantised) run on ONNX Runtime (CPU provider by default),
its session opened through the optimised-model cache of :mod:`hefsearch.embed.ort_session`.

A bulk open follows the processor's plan (:mod:`hefsearch.embed.cpu_plan`): in ``batches`` mode
the session has one intra-op thread and :meth:`OnnxBodyBackend.run` cuts each batch into pieces
of neighbouring rows, each padded only to its own longest, run at once on threads of its own.
ONNX Runtime's ``Run`` may be called from several threads at once; with one intra-op thread
each piece runs on its caller's thread. The pieces give the vectors the whole batch gives."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from ..bundle import Bundle, EncoderEntry
from ..cpu_plan import current_plan
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
        #: the processor's plan for bulk encoding (None: a search, ONNX Runtime's own threads)
        self.plan = current_plan(threads) if bulk and self.providers == DEFAULT_PROVIDERS else None
        workers = self.plan.workers if self.plan else 1
        session_threads = self.plan.intra_op_threads if self.plan else threads
        #: "fused", "optimised" or "uncached" (see open_body_session), for benches and reports
        self._session, self.session_kind = open_body_session(body, session_threads, self.providers, bulk=bulk)
        self._pool = (ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hefsearch-ort")
                      if workers > 1 else None)
        self._workers = workers

    def run(self, embeddings: np.ndarray, mask: np.ndarray) -> np.ndarray:
        session = self._session
        if session is None:
            raise BackendUnavailable(self.closed_message or f"The {self.label} encoder was closed.")
        import onnxruntime as ort

        mask = mask.astype(np.int64, copy=False)
        pieces = split_rows(mask, piece_count(mask.shape, self._workers))
        options = self._running = [ort.RunOptions() for _ in pieces]
        if self.stopping:  # asked to stop just before this run began (stop_running read no options)
            for o in options:
                o.terminate = True

        def one(k: int) -> np.ndarray:
            a, b, width = pieces[k]
            (out,) = session.run(["last_hidden_state"], {"embeddings": embeddings[a:b, :width],
                                                         "attention_mask": mask[a:b, :width]}, options[k])
            return out

        try:
            if len(pieces) == 1 and pieces[0][2] == mask.shape[1]:
                return one(0)
            parts = list(self._pool.map(one, range(len(pieces)))) if len(pieces) > 1 else [one(0)]
        finally:
            self._running = None
        out = np.zeros(embeddings.shape, dtype=np.float32)  # padding past a piece's longest: zeros
        for (a, b, width), part in zip(pieces, parts):
            out[a:b, :width] = part
        return out

    #: the RunOptions of the runs in flight: ``terminate`` ends each between two of its operators
    _running: list | None = None

    def stop_running(self) -> None:
        """ONNX Runtime checks ``RunOptions.terminate`` between the nodes it runs, so a batch
        of a few seconds (a long one on a loaded CPU) ends within one node's time."""
        self.stopping = True
        for options in self._running or ():
            options.terminate = True

    def close(self) -> None:
        self._session = None
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None


#: a piece of at least this many tokens (rows x width) costs per token what the whole batch does
#: (MiniLM on one Zen 5 thread: 8 rows x 32 tokens 0.97x of 32 x 32, 8 x 16 1.09x of 32 x 16)
PIECE_MIN_TOKENS = 256


def piece_count(shape: tuple[int, int], workers: int) -> int:
    """Pieces to cut an [N,S] batch into for ``workers`` threads: two per worker when they stay
    large enough (a thread that finishes early takes the next, so one slowed by another
    program's work does not hold the batch up), else one each."""
    if workers <= 1:
        return 1
    rows, width = shape
    return 2 * workers if rows * width >= 2 * workers * PIECE_MIN_TOKENS else workers


def split_rows(mask: np.ndarray, pieces: int) -> list[tuple[int, int, int]]:
    """``mask`` [N,S]'s rows cut into at most ``pieces`` runs of neighbouring rows with about the
    same real tokens each: (first row, end row, width), the width being the last column any of
    its rows uses (at least 1), so a piece carries none of the columns only padding fills."""
    n = mask.shape[0]
    used = mask != 0
    lengths = used.sum(axis=1)
    pieces = max(1, min(pieces, n))
    bounds = [0]
    if pieces > 1:
        # cut where the running token count crosses each k/pieces of the total
        total = np.cumsum(np.maximum(lengths, 1))
        for k in range(1, pieces):
            cut = int(np.searchsorted(total, total[-1] * k / pieces)) + 1
            if bounds[-1] < cut < n:
                bounds.append(cut)
    bounds.append(n)
    out = []
    for a, b in zip(bounds, bounds[1:]):
        cols = np.flatnonzero(used[a:b].any(axis=0))
        out.append((a, b, int(cols[-1]) + 1 if cols.size else 1))
    return out

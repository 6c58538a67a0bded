"""``Encoder``: texts in, unit vectors out, on any backend, through one host pipeline.

    enc = Encoder.open("bundle/", backend="cpu")
    q = enc.encode_queries(["wo ist der bahnhof?"])      # float32 [1, H]
    p = enc.encode_passages(chunks)                       # float32 [N, H]

Texts are length-sorted into batches padded only to each batch's longest text (CPU), or to
the smallest fixed sequence length that fits (a HEF); the host prepares the next batch while
the backend runs the current one. Empty and whitespace-only texts get a
zero vector on purpose: they carry no meaning, so they match nothing (score 0) and are
counted in ``stats.empty``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from hefsearch.base.errors import HefsearchError

from .backends import open_backend, resolve_backend_name
from .bundle import Bundle
from .fingerprint import space_fingerprint
from .host import POOLERS, HostPipeline, l2_normalize
from .reference import REFERENCE_BACKEND


class EncodeStopped(HefsearchError):
    """An ``encode`` ended early by :meth:`Encoder.stop_running` (its vectors are not there)."""

    title = "stopped"


@dataclass
class EncodeStats:
    texts: int = 0
    truncated: int = 0
    empty: int = 0
    batches: int = 0
    frames: int = 0
    seconds: float = 0.0
    #: indexes (into the last call's input) of texts that were truncated
    last_truncated: list[int] = field(default_factory=list)


class Encoder:
    def __init__(self, bundle: Bundle, backend, *, backend_reason: str = "", post_transform=None,
                 few_texts: bool = False):
        self.bundle = bundle
        self.backend = backend
        self.backend_reason = backend_reason or backend.name
        limit = bundle.seq_len
        if backend.seq_lens:
            limit = min(limit, max(backend.seq_lens))
        # few_texts (searching): a large vocabulary is not loaded whole (embed/vocab_subset.py)
        self.host = HostPipeline(bundle, max_tokens=limit, few_texts=few_texts)
        self._pool = POOLERS[bundle.pooling]
        #: optional space post-transform (e.g. mean-centering); part of the fingerprint
        self.post_transform = post_transform
        self.stats = EncodeStats()
        #: called after every batch with the number of texts finished so far in the call
        self.on_batch: Callable[[int], None] | None = None
        #: set (by another thread) to end an ``encode`` early: no batch starts after it
        self.stop: threading.Event | None = None

    @classmethod
    def open(
        cls,
        bundle: Bundle | str | Path,
        backend: str | None = REFERENCE_BACKEND,
        *,
        post_transform=None,
        **backend_opts,
    ) -> "Encoder":
        if not isinstance(bundle, Bundle):
            bundle = Bundle.open(bundle)
        if isinstance(post_transform, dict):  # a spec stored with a space (embed/post_transform.py)
            from .post_transform import from_spec

            post_transform = from_spec(post_transform)
        name, reason = resolve_backend_name(backend, bundle)
        be = open_backend(name, bundle, **backend_opts)
        bulk = bool(backend_opts.get("bulk"))
        if bulk:  # indexing: a file damaged in place would store wrong vectors
            try:
                bundle.check_unchanged(bundle.encoding_files(be.encoder_entries()))
            except BaseException:
                be.close()
                raise
            from .vocab_subset import prepare

            prepare(bundle)  # once per tokenizer: the searches after this index run start faster
        return cls(bundle, be, backend_reason=reason, post_transform=post_transform, few_texts=not bulk)

    # -- identity ------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self.bundle.hidden

    @property
    def max_tokens(self) -> int:
        return self.host.max_tokens

    @property
    def space_kind(self) -> str:
        return self.backend.space_kind

    @property
    def space_name(self) -> str:
        """The space a library keeps these vectors in ("cpu-fp32", "hef", "npu-sim-a8", ...); a
        post-transform names a space derived from it ("cpu-fp32-neutral"), so a sync fills both."""
        return self.backend.space_name + getattr(self.post_transform, "space_suffix", "")

    @property
    def space_opts(self) -> dict:
        """Backend options recorded with the space, so a search reopens the same encoder."""
        return dict(self.backend.space_opts)

    @property
    def label(self) -> str:
        """What a person calls the backend: "CPU FP32", "Hailo-10H", "NPU simulation (a8)"."""
        return self.backend.label or self.backend.name

    @property
    def is_quantised(self) -> bool:
        return self.backend.is_quantised

    def fingerprint_parts(self) -> dict:
        parts = {
            "model_hash": self.bundle.model_hash,
            **self.backend.fingerprint_parts(),
            "pooling": self.bundle.pooling,
            "normalize": self.bundle.normalize,
            "max_tokens": self.max_tokens,
            "post_transform": None if self.post_transform is None else self.post_transform.describe(),
        }
        return parts

    @property
    def fingerprint(self) -> str:
        return space_fingerprint(self.fingerprint_parts())

    # -- encoding ------------------------------------------------------------------------
    def encode_queries(self, texts: Iterable[str]) -> np.ndarray:
        return self.encode(texts, prefix=self.bundle.prefixes["query"])

    def encode_passages(self, texts: Iterable[str], sections=None) -> np.ndarray:
        """Chunks' vectors. ``sections``: each chunk's section text or None (``embed/in_context.py``):
        a chunk with a section gets the mean of its vector and its section's, before the
        post-transform (as a derived space makes it from its base space's vectors)."""
        prefix = self.bundle.prefixes["passage"]
        texts = list(texts)
        if sections is None:
            return self.encode(texts, prefix=prefix, passages=True)
        from .in_context import ContextPlan

        plan = ContextPlan(texts, sections)
        if plan.plain:
            return self.encode(texts, prefix=prefix, passages=True)
        raw = plan.fuse(self.encode(plan.flat, prefix=prefix, passages=True, transform=False))
        # a language is told from the section: a short passage alone misleads the identifier
        return self.transformed(raw, [s or t for t, s in zip(texts, sections)], passages=True)

    def count_tokens(self, text: str, *, passage: bool = True) -> int:
        prefix = self.bundle.prefixes["passage" if passage else "query"]
        return self.host.count_tokens(prefix + text)

    def encode(self, texts: Iterable[str], prefix: str = "", *, passages: bool = False,
               transform: bool = True) -> np.ndarray:
        """``passages``: the texts are documents' chunks (a post-transform may treat them apart
        from queries: the hub correction moves queries only). ``transform=False``: the
        backend's vectors, without the post-transform (what a transform is fitted on)."""
        t0 = time.perf_counter()
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        live = [i for i, t in enumerate(texts) if t and not t.isspace()]
        self.stats.texts += len(texts)
        self.stats.empty += len(texts) - len(live)
        self.stats.last_truncated = []
        # Batches of similar length (character length predicts token length well enough), so
        # padding stays small; each batch is tokenised and gathered in a helper thread while
        # the backend runs the previous one (tokenizers and ONNX Runtime/HailoRT release the
        # GIL), so an NPU does not wait on the host.
        self.backend.stopping = False
        order = sorted(live, key=lambda i: len(texts[i]))
        batches = [order[k : k + self.backend.batch_size] for k in range(0, len(order), max(1, self.backend.batch_size))]
        done = 0
        # One batch (a query) has nothing to overlap: no helper thread on that hot path.
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hefsearch-host") if len(batches) > 1 else None
        with pool or contextlib.nullcontext():
            ready = self._prepare(texts, batches[0], prefix) if batches else None
            for b, batch in enumerate(batches):
                e, mask, truncated = ready
                nxt = pool.submit(self._prepare, texts, batches[b + 1], prefix) if b + 1 < len(batches) else None
                if self.stop is not None and self.stop.is_set():
                    raise EncodeStopped("Encoding was stopped (the run was interrupted).")
                hidden = self.backend.run(e, mask)
                vecs = self._pool(hidden, mask)
                if self.bundle.normalize:
                    vecs = l2_normalize(vecs)
                out[batch] = vecs
                cut = [batch[j] for j in np.flatnonzero(truncated)]
                self.stats.truncated += len(cut)
                self.stats.last_truncated.extend(cut)
                self.stats.batches += 1
                self.stats.frames += len(batch)
                done += len(batch)
                if self.on_batch:
                    self.on_batch(done)
                ready = nxt.result() if nxt else None
        self.stats.last_truncated.sort()
        if transform:
            out = self.transformed(out, texts, passages=passages)
        self.stats.seconds += time.perf_counter() - t0
        return out

    def stop_running(self) -> None:
        """End an ``encode`` running in another thread: no further batch starts (``stop``
        must be set) and the backend cuts the one in flight short where it can."""
        if self.stop is not None:
            self.stop.set()
        self.backend.stop_running()

    def transformed(self, vectors: np.ndarray, texts: list[str], *, passages: bool = False) -> np.ndarray:
        """The backend's ``vectors`` of ``texts`` as this encoder returns them: its
        post-transform applied (a language-neutral one also reads the unprefixed texts, and
        corrects hubs in queries, not in ``passages``)."""
        pt = self.post_transform
        if pt is None:
            return vectors
        if getattr(pt, "uses_texts", False):
            return pt.apply(vectors, texts, passages=passages)
        return pt.apply(vectors)

    def _prepare(self, texts: list[str], batch: list[int], prefix: str):
        """Host work for one batch: tokens -> (E, mask) padded for the backend, truncation flags."""
        tok = self.host.tokenize([prefix + texts[i] for i in batch])
        pad = self._pad_length(int(tok.lengths.max()))
        e, mask = self.host.embed(tok.ids, pad_to=pad)
        return e, mask, tok.truncated

    def _pad_length(self, longest: int) -> int:
        lens = self.backend.seq_lens
        if not lens:
            return longest
        fitting = [s for s in sorted(lens) if s >= longest]
        return fitting[0] if fitting else max(lens)

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> "Encoder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


"""Hash, extract and chunk each file one ahead of the encoder, in a background thread."""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from hefsearch.embed.errors import HefsearchError

from .crawl import printable
from .sync_types import Job

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder

log = logging.getLogger("hefsearch.index")

#: how long an interrupted sync waits for the extraction thread (a daemon: it may be inside
#: one slow file, and it dies with the process)
WORKER_JOIN_S = 0.5


def prepare(job: Job, first: "Encoder", overlap_tokens: int, max_bytes: int, old_sha: str | None) -> Job:
    """Hash, extract and chunk one file (runs in the background thread)."""
    from .chunk import chunk_text
    from .extract import ExtractionError, extract, read_regular_file

    try:
        # Read through the extractor's guard: a file swapped for a FIFO since the crawl must
        # not block the sync.
        job.sha256 = hashlib.sha256(read_regular_file(Path(job.path), max_bytes=max_bytes)).hexdigest()
        if old_sha is not None and job.sha256 == old_sha and job.old_status == "ok":
            job.same_content = True
            return job
        doc = extract(Path(job.path), kind=job.kind, max_bytes=max_bytes)
        job.kind, job.encoding = doc.kind, doc.encoding
        chunks = chunk_text(doc, first.count_tokens, first.max_tokens, overlap_tokens)
        lines = line_numbers(doc.text, [c.start for c in chunks])
        job.chunks = [(c, ln) for c, ln in zip(chunks, lines)]
        job.langs = chunk_languages([c.text for c in chunks])
    except ExtractionError as e:
        job.error = printable(e.message)
    except OSError as e:
        job.error = printable(f"cannot read: {e.strerror or e}")
    except Exception as e:  # an extractor bug must not stop the whole sync
        log.debug("unexpected error on %s", job.shown, exc_info=True)
        job.error = printable(f"unexpected error: {type(e).__name__}: {e}")
    return job


def line_numbers(text: str, starts: list[int]) -> list[int]:
    out, line, pos = [], 1, 0
    for s in starts:  # starts are ascending
        if s < pos:
            line, pos = 1, 0
        line += text.count("\n", pos, s)
        pos = s
        out.append(line)
    return out


class Prefetch:
    """Hashing, extraction and chunking one file ahead of the encoder, in a daemon thread;
    the prepared jobs come out of a bounded queue in ``todo`` order (None ends them)."""

    def __init__(self, todo: list[Job], first: "Encoder", overlap_tokens: int, max_bytes: int,
                 old_sha: dict[str, str | None]):
        self.jobs: queue.Queue = queue.Queue(maxsize=32)
        self.stopped = threading.Event()
        self._args = (todo, first, overlap_tokens, max_bytes, old_sha)
        self.worker = threading.Thread(target=self._produce, name="hefsearch-extract", daemon=True)
        self.worker.start()

    def _hand_over(self, item) -> None:
        # never block once the consumer has stopped (Ctrl+C): it no longer drains the queue
        while not self.stopped.is_set():
            try:
                self.jobs.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _produce(self) -> None:
        todo, first, overlap_tokens, max_bytes, old_sha = self._args
        try:
            for job in todo:
                if self.stopped.is_set():
                    return
                self._hand_over(prepare(job, first, overlap_tokens, max_bytes, old_sha.get(job.path)))
        finally:
            self._hand_over(None)

    def stop(self) -> None:
        """Let the thread go; wait at most WORKER_JOIN_S (it may be inside one slow file)."""
        self.stopped.set()
        self.worker.join(timeout=WORKER_JOIN_S)


def chunk_languages(texts: list[str]) -> list[str | None]:
    """The language of each text for ``chunks.lang``: a code, ``''`` when too unsure to tell,
    None when languages cannot be identified here (left to a later sync)."""
    from hefsearch.embed.language import identify_all

    try:
        return [lang or "" for lang in identify_all(texts)]
    except HefsearchError as e:
        log.info("chunk languages not detected: %s", e.message)
        return [None] * len(texts)

"""The sync's progress events, with an ETA from the text still to embed."""

from __future__ import annotations

import time
from typing import Callable, Sequence

from .sync_types import Job, ProgressEvent, SyncReport


class Progress:
    """Counts for progress events; the ETA from the characters of text still to embed (files
    not read yet are estimated from their size and the text per byte seen so far for their
    kind), at the rate text has been embedded so far. Counting files instead misled on real
    folders: one 8 MB page among small notes took as long as thousands of them."""

    def __init__(self, emit, files_total: int, todo: Sequence[Job], report: SyncReport,
                 clock: Callable[[], float] = time.perf_counter):
        self.emit = emit
        self.files_total = files_total
        self.files_todo = len(todo)
        self.files_done = 0
        self.todo_done = 0
        self.chunks = 0
        self.report = report
        self.phase = "index"
        self.path: str | None = None
        #: the file being read and where in it ("inbox.mbox: message 812"); None between files
        self.where: str | None = None
        self.clock = clock
        self.started = clock()
        self._last = 0.0
        #: bytes of the files not read yet, by (kind, compressed)
        self._unread: dict[tuple, int] = {}
        for job in todo:
            if job.kind == "image":  # read by OCR after the rest, with an ETA of its own (by pages)
                continue
            key = size_key(job)
            self._unread[key] = self._unread.get(key, 0) + job.size
        self._ratio: dict[tuple, list[int]] = {}  # key -> [text chars, file bytes] of read files
        self.text_read = 0  # chars of files read, not embedded yet
        self.text_done = 0  # chars embedded
        self._batch_chars = 0.0  # chars per chunk of the batch being embedded
        #: the OCR phase: pages to read, read, and when it began
        self.ocr_total = 0
        self.ocr_done = 0
        self._ocr_started = 0.0

    def start_ocr(self, pages: int) -> None:
        """The files with text are read; OCR of ``pages`` pages begins (its own ETA)."""
        self.phase = "ocr"
        self.ocr_total = pages
        self._ocr_started = self.clock()
        self.tick(force=True)

    def read(self, job: Job) -> None:
        """A file was extracted: its text replaces the estimate from its size."""
        if self.phase == "ocr":
            self.ocr_done += len(job.ocr_pages)
        if job.kind == "image":  # never in the estimate (see __init__)
            self.text_read += sum(len(c.text) for c, _ in job.chunks)
            return
        key = size_key(job)
        self._unread[key] = max(0, self._unread.get(key, 0) - job.size)
        chars = sum(len(c.text) for c, _ in job.chunks)
        seen = self._ratio.setdefault(key, [0, 0])
        seen[0] += chars
        seen[1] += job.size
        self.text_read += chars

    def embedding(self, jobs: Sequence[Job]) -> None:
        texts = [len(c.text) for job in jobs for c, _ in job.chunks]
        self._batch_chars = sum(texts) / len(texts) if texts else 0.0

    def embedded(self, jobs: Sequence[Job]) -> None:
        chars = sum(len(c.text) for job in jobs for c, _ in job.chunks)
        self.text_read -= chars
        self.text_done += chars

    def text_left(self) -> int:
        chars, size = (sum(v) for v in zip(*self._ratio.values())) if self._ratio else (0, 0)
        overall = chars / size if size else 1.0
        unread = 0.0
        for key, n in self._unread.items():
            c, b = self._ratio.get(key, (0, 0))
            unread += n * (c / b if b else overall)
        return int(self.text_read + unread)

    def tick(self, force: bool = False, extra_chunks: int = 0) -> None:
        now = self.clock()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        elapsed = max(now - self.started, 1e-6)
        chunks = self.chunks + extra_chunks
        done = self.text_done + int(extra_chunks * self._batch_chars)
        left = max(0, self.text_left() - int(extra_chunks * self._batch_chars))
        eta = None
        if done and self.files_todo and self.phase == "index":
            eta = elapsed / done * left
        elif self.phase == "ocr" and self.ocr_done:  # pages are slow and alike: by pages
            eta = (now - self._ocr_started) / self.ocr_done * max(0, self.ocr_total - self.ocr_done)
        self.emit(ProgressEvent(
            self.phase, files_total=self.files_total, files_done=self.files_done,
            files_todo=self.files_todo, chunks_done=chunks, chunks_per_s=chunks / elapsed,
            eta_s=eta, path=self.path, failed=len(self.report.failed), text_done=done, text_left=left,
            ocr_done=self.ocr_done, ocr_total=self.ocr_total, where=self.where))


def size_key(job: Job) -> tuple:
    """Files whose text per byte is alike: same kind, compressed or not."""
    from hefsearch.readers.filetypes import compression_of

    return job.kind, compression_of(job.path) is not None

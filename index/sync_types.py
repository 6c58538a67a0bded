"""What a sync takes and gives back: its options, the progress events it sends, the report it
returns, the unit of work (one file, :class:`Job`), the protocol of a first encoder that embeds
elsewhere, and :class:`DiskFull`."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from hefsearch.base.terminal_text import printable

from .crawl_options import CrawlOptions
from .errors import LibraryError

#: chunks embedded per commit (bounded memory and bounded work lost to a crash)
DEFAULT_BATCH_CHUNKS = 256


class DiskFull(LibraryError):
    """The disk holding the library is full; committed batches are kept."""

    title = "disk full"
    #: ``hefsearch index`` exits with 4: free space and run again
    exit_code = 4

    def __init__(self, library_path: Path, detail: str):
        super().__init__(
            f"Disk full: cannot write to the library {printable(library_path)} ({detail}).",
            "Free space on that disk (or index into a library on another disk with --library), "
            "then run the same command again: every batch committed so far is kept and the run "
            "continues where it stopped.")


@runtime_checkable
class BatchSubmitter(Protocol):
    """A first encoder that embeds elsewhere (:class:`~hefsearch.index.ray_pool.RayEncoder`):
    a batch is submitted now and collected later; at most ``max_in_flight`` are out at once and
    they are committed in the order sent, so a run commits the same batches as a local one.
    ``collect`` gives {space name: vectors}: the first space's and any other space it embeds
    with them (the CPU FP32 one on Ray actors), which are then not embedded here."""

    max_in_flight: int

    def submit_passages(self, texts: list[str]) -> object: ...

    def collect(self, ticket: object) -> dict[str, np.ndarray]: ...


@dataclass
class ProgressEvent:
    phase: str  # "scan", "remove", "index", "backfill", "done"
    files_total: int = 0  # files found under the roots
    files_done: int = 0  # files whose fate is settled (unchanged, indexed, failed)
    files_todo: int = 0  # files that needed work (new or changed)
    chunks_done: int = 0  # chunks embedded (by the first encoder) so far
    chunks_per_s: float = 0.0
    #: seconds left, from the characters of text still to embed and the rate so far
    eta_s: float | None = None
    path: str | None = None
    failed: int = 0
    #: characters of text embedded so far, and still to embed (estimated for files not read yet)
    text_done: int = 0
    text_left: int = 0
    #: the OCR phase ("ocr"): pages read and to read
    ocr_done: int = 0
    ocr_total: int = 0
    #: the file being read and where in it: "~/Mail/inbox.mbox: message 812" (raw: escape it)
    where: str | None = None


@dataclass
class SyncReport:
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    chunks_embedded: int = 0
    seconds: float = 0.0
    #: files that now fail to extract but whose previous version stays indexed
    stale: list[tuple[str, str]] = field(default_factory=list)
    #: skipped entries worth telling (special files, symlink loops, broken links)
    notes: list[tuple[str, str]] = field(default_factory=list)
    #: symlinks not followed, the reason naming the target
    links: list[tuple[str, str]] = field(default_factory=list)
    #: chunks embedded into a space that lacked them (space added later, lost vectors)
    backfilled: int = 0
    chunks_cut: int = 0
    spaces: list[str] = field(default_factory=list)
    encode_seconds: float = 0.0
    #: supported files found under the roots (indexed, unchanged or failed)
    found: int = 0
    #: unsupported files by suffix ("(none)" for names without one), and the first few of them
    unsupported: dict[str, int] = field(default_factory=dict)
    unsupported_examples: list[str] = field(default_factory=list)
    #: pages read by OCR this run; files left for OCR, which is not installed (said once)
    ocr_pages: int = 0
    ocr_waiting: list[str] = field(default_factory=list)
    #: folders still unfinished after this run: an earlier run over them stopped (Ctrl+C, kill)
    unfinished: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """Some files failed but the rest was indexed."""
        return bool(self.failed or self.stale)

    def skipped_text(self) -> str:
        """The non-zero skip counters, in words ("3 symlinks not followed (outside the folders)")."""
        from .crawl import skipped_text

        return skipped_text(self.skipped)

    def nothing_supported(self) -> str | None:
        """Why a run found nothing to index, or None: '0 files supported: 15 unsupported
        (.py 9, .c 6), e.g. a.py, b.c'."""
        if self.found:
            return None
        n = sum(self.unsupported.values())
        if not n:
            return "0 files found under the folders given."
        by = ", ".join(f"{k} {v}" for k, v in sorted(self.unsupported.items(), key=lambda kv: (-kv[1], kv[0]))[:6])
        return (f"0 files supported: {n} unsupported ({by}), e.g. {', '.join(self.unsupported_examples)}.")


@dataclass(frozen=True)
class SyncOptions:
    """What one sync takes besides its folders: the crawl options, carried whole (None: those
    the library remembers, :meth:`CrawlOptions.remembered`), the batch size and the passage
    length."""

    crawl: CrawlOptions | None = None
    #: chunks embedded per commit
    batch_chunks: int = DEFAULT_BATCH_CHUNKS
    #: the passage length (``index/passages.py``; 0: chunks fill the window). None: the
    #: library's, decided at its first sync; given, it must agree with what the library holds
    passage_tokens: int | None = None


@dataclass
class Job:
    path: str  # as the OS gave it (may hold surrogates): to open the file
    size: int
    mtime_ns: int
    kind: str
    doc_id: int | None  # existing document row
    old_status: str | None
    sha256: str | None = None
    same_content: bool = False
    chunks: list = field(default_factory=list)
    #: each chunk's language ('' when unsure), detected once here and stored with it
    langs: list = field(default_factory=list)
    #: with passages, each chunk's section: (ordinal of its first chunk, its text or None when
    #: the chunk is alone in it); empty without passages
    sections: list = field(default_factory=list)
    encoding: str | None = None
    error: str | None = None
    #: a document inside a file (a message of a mailbox; :mod:`hefsearch.index.containers`)
    member: bool = False
    #: a mail file's stored members (real path -> row), and the ids of those gone from it
    old_members: dict = field(default_factory=dict)
    drop_ids: list = field(default_factory=list)
    #: what was left out of an indexed document, each with why (an attachment too large)
    notes: list = field(default_factory=list)
    #: a member's text until it is chunked
    text_of: str = ""
    #: pages waiting for OCR (a PDF's pages without text), read after the text-layer files
    ocr_pages: list = field(default_factory=list)
    #: pages that need OCR, which is not installed: not written, tried again next run
    ocr_missing: bool = False

    @property
    def shown(self) -> str:
        return printable(self.path)


def path_bytes(path: str) -> bytes | None:
    """The real name bytes for ``documents.path_bytes`` when the printable form differs."""
    return None if printable(path) == path else os.fsencode(path)


def real_path(shown: str, raw: bytes | None) -> str:
    return shown if raw is None else os.fsdecode(raw)

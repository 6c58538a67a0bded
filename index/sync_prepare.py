"""Hash, extract and chunk each file one ahead of the encoder, in a background thread; files
with pages to read by OCR are held back and read after all the others (an :class:`OcrStart`
between them says how many pages follow, for the OCR progress line)."""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from hefsearch.base.errors import HefsearchError
from hefsearch.base.terminal_text import printable

from hefsearch.readers import ocr
from hefsearch.readers.formats import CONTAINER_KINDS
from .passages import Cutting, section_starts, sections_of
from .sync_types import Job, SyncOptions

if TYPE_CHECKING:  # pragma: no cover
    from hefsearch.embed.encoder import Encoder

log = logging.getLogger("hefsearch.index")

#: how long an interrupted sync waits for the extraction thread (a daemon: it may be inside
#: one slow file, and it dies with the process)
WORKER_JOIN_S = 0.5
#: kinds whose sections (chapters, slides, sheets) are chunked apart
SECTIONED_KINDS = frozenset({"epub", "ods", "odp", "pptx", "xlsx"})


def prepare(job: Job, first: "Encoder", cutting: "Cutting | int", max_bytes: int, old_sha: str | None) -> Job:
    """Hash, extract and chunk one file (runs in the background thread)."""
    from hefsearch.readers.extract import extract, read_regular_file

    try:
        # Read through the extractor's guard: a file swapped for a FIFO since the crawl must
        # not block the sync.
        job.sha256 = hashlib.sha256(read_regular_file(Path(job.path), max_bytes=max_bytes)).hexdigest()
        if old_sha is not None and job.sha256 == old_sha and job.old_status == "ok":
            job.same_content = True
            return job
        if job.kind == "image":  # read by OCR, after the files with text
            job.ocr_pages = [1]
            job.ocr_missing = not ocr.available()
            return job
        doc = extract(Path(job.path), kind=job.kind, max_bytes=max_bytes)
        job.kind, job.encoding = doc.kind, doc.encoding
        if doc.ocr_pages:  # pages without text: OCR later, or index the rest and say why
            job.ocr_pages = list(doc.ocr_pages)
            if ocr.available():
                return job
            job.ocr_missing = True
            if not doc.text.strip():
                return job
        chunked(job, doc, first, cutting)
    except Exception as e:  # noqa: BLE001 - an extractor bug must not stop the whole sync
        _failed(job, e)
    return job


def prepare_ocr(job: Job, first: "Encoder", cutting: "Cutting | int", max_bytes: int, at=None, cache=None) -> Job:
    """A file with pages to read by OCR (an image, a PDF's pages without text), after the
    files with text: each page within the OCR budget (:mod:`hefsearch.readers.ocr`); a page that
    fails is noted and the rest indexed. ``documents.encoding`` records ``ocr:PAGES``. ``at``
    hears the page being read ("page 40, 12 of 300 by OCR"); with ``cache`` (an
    :class:`~hefsearch.index.ocr_cache.OcrPageCache`) each page's text is kept as it is read,
    and pages read by an earlier run that stopped are not read again."""
    from hefsearch.readers.extract import decompressed, read_regular_file
    from hefsearch.readers.extract_image import extract_image
    from hefsearch.readers.extract_pdf import extract_pdf_ocr

    try:  # scan.pdf.gz: read through, as the text pass read it
        data = decompressed(Path(job.path), read_regular_file(Path(job.path), max_bytes=max_bytes), max_bytes)
        if job.kind == "image":
            doc = extract_image(data, max_bytes)
        else:
            read = [0]
            engine = ocr.ocr_image if cache is None else cache.reading(ocr.ocr_image)

            def ocr_page(image: bytes, what: str) -> str:
                read[0] += 1
                if at is not None:
                    at(f"{what}, {read[0]} of {len(job.ocr_pages)} by OCR")
                return engine(image, what)

            doc = extract_pdf_ocr(data, max_bytes, ocr_page, job.notes)
        job.encoding = f"ocr:{len(doc.ocr_pages or ())}"
        chunked(job, doc, first, cutting)
    except Exception as e:  # noqa: BLE001 - an OCR bug must not stop the whole sync
        _failed(job, e)
    return job


def _failed(job: Job, e: Exception) -> None:
    """The job's error, said for a person: the extractor's message, the OS's reason, or (an
    extractor bug) the exception, logged with its traceback at debug level."""
    from hefsearch.readers.extract import ExtractionError

    if isinstance(e, ExtractionError):
        job.error = printable(e.message)
    elif isinstance(e, OSError):
        job.error = printable(f"cannot read: {e.strerror or e}")
    else:
        log.debug("unexpected error on %s", job.shown, exc_info=True)
        job.error = printable(f"unexpected error: {type(e).__name__}: {e}")


@dataclass
class OcrStart:
    """Handed over between the files with text and those read by OCR: how many pages follow."""

    pages: int


def chunked(job: Job, doc, first: "Encoder", cutting: "Cutting | int") -> None:
    """``doc`` cut into the job's chunks, with their line numbers and languages. A book's
    chapters, a deck's slides and a workbook's sheets are cut apart, so no chunk spans two and
    a hit's page names its chapter, slide or sheet; so are the pages of a PDF read by OCR."""
    import dataclasses

    from .chunk import chunk_text
    from hefsearch.readers.extract_base import ExtractedText

    cut = Cutting.of(cutting)
    window = cut.window(first.max_tokens)
    if doc.pages and len(doc.pages) > 1 and (doc.kind in SECTIONED_KINDS or doc.ocr_pages):
        chunks = []
        for page, start, end in doc.pages:
            part = ExtractedText(text=doc.text[start:end], kind=doc.kind, pages=[(page, 0, end - start)])
            for c in chunk_text(part, first.count_tokens, window, cut.overlap_tokens):
                chunks.append(dataclasses.replace(c, ordinal=len(chunks), start=c.start + start, end=c.end + start))
    else:
        chunks = chunk_text(doc, first.count_tokens, window, cut.overlap_tokens)
    lines = line_numbers(doc.text, [c.start for c in chunks])
    job.chunks = [(c, ln) for c, ln in zip(chunks, lines)]
    if window < first.max_tokens:  # passages: each in its section (index/passages.py)
        starts = section_starts(chunks, first.max_tokens)
        job.sections = list(zip(starts, sections_of(chunks, starts)))
    job.notes.extend(printable(n) for n in getattr(doc, "notes", ()) if printable(n) not in job.notes)  # cut short: why
    texts = _language_texts(chunks, job.sections)
    unique = list(dict.fromkeys(texts))  # a section's passages share its text: told once
    told = dict(zip(unique, chunk_languages(unique)))
    job.langs = [told[t] for t in texts]


def _language_texts(chunks, sections) -> list[str]:
    """The text each chunk's language is told from: its section's where it has one (a short
    passage alone misleads the identifier: Chinese passages read as Wu), else its own."""
    if len(sections) != len(chunks):
        return [c.text for c in chunks]
    return [text if text is not None else c.text for c, (_, text) in zip(chunks, sections)]


def expanded(job: Job, first: "Encoder", cutting: "Cutting | int", max_bytes: int, old_sha: str | None,
             at=None) -> Iterator[Job]:
    """A mail file's member jobs, then its own (:func:`hefsearch.index.containers.expand`,
    which tells ``at`` the message it reads); the file's job alone when its bytes are those
    already indexed."""
    from hefsearch.readers.mail_file import file_sha256

    from .containers import expand

    try:
        if old_sha is not None and job.old_status == "ok":
            job.sha256 = file_sha256(job.path)
            if job.sha256 == old_sha:
                job.same_content = True
                yield job
                return
        yield from expand(job, lambda member, doc: chunked(member, doc, first, cutting), max_bytes, at)
    except Exception as e:  # a reader bug must not stop the whole sync
        log.debug("unexpected error on %s", job.shown, exc_info=True)
        job.error = printable(f"unexpected error: {type(e).__name__}: {e}")
        yield job


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

    def __init__(self, todo: list[Job], first: "Encoder", opts: SyncOptions, old_sha: dict[str, str | None],
                 ocr_cache=None):
        self.jobs: queue.Queue = queue.Queue(maxsize=32)
        self.ocr_cache = ocr_cache
        self.stopped = threading.Event()
        #: the file being read and where in it ("inbox.mbox: message 812"), for progress
        self.where: str | None = None
        self._args = (todo, first, Cutting(opts.crawl.overlap_tokens, opts.passage_tokens or 0), opts.crawl.max_bytes,
                      old_sha)
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
        todo, first, cutting, max_bytes, old_sha = self._args
        deferred: list[Job] = []  # pages for OCR: read after every file with text
        try:
            for job in todo:
                if self.stopped.is_set():
                    return
                self.where = job.shown
                if job.kind in CONTAINER_KINDS:
                    def at(position: str, shown: str = job.shown) -> None:
                        self.where = f"{shown}: {position}"

                    for part in expanded(job, first, cutting, max_bytes, old_sha.get(job.path), at):
                        if self.stopped.is_set():
                            return
                        self._hand_over(part)
                    continue
                prepared = prepare(job, first, cutting, max_bytes, old_sha.get(job.path))
                if prepared.ocr_pages and not prepared.ocr_missing and prepared.error is None:
                    deferred.append(prepared)
                    continue
                self._hand_over(prepared)
            if deferred:
                self._hand_over(OcrStart(sum(len(j.ocr_pages) for j in deferred)))
            for job in deferred:
                if self.stopped.is_set():
                    return
                self.where = job.shown

                def at(position: str, shown: str = job.shown) -> None:
                    self.where = f"{shown}: {position}"

                self._hand_over(prepare_ocr(job, first, cutting, max_bytes, at, self.ocr_cache))
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

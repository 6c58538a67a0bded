"""The sync's index stage: prepared files are gathered into batches of about ``batch_chunks``
chunks (documents whole), embedded by every encoder and committed in one transaction each
(vectors first as segments, then the rows that make them real: the crash-safety protocol of
:mod:`hefsearch.index.library`). With a :class:`~hefsearch.index.sync_types.BatchSubmitter`
first encoder (a Ray pool) up to ``max_in_flight`` batches are out at once, committed in the
order sent."""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from hefsearch.embed.in_context import ContextPlan, passage_vectors

from . import documents, sync_prepare
from .library import Library, utc_now
from .sync_progress import Progress
from .sync_types import BatchSubmitter, Job, SyncOptions, SyncReport, path_bytes

#: how often the index stage wakes while the next file is being read (progress says where)
WAKE_S = 0.5
#: how long a stopped run waits at most for the encoder's batch in flight (ONNX Runtime ends
#: it between two operators; an NPU's batch takes milliseconds). Not less: a process that
#: exits while ONNX Runtime runs aborts ("terminate called without an active exception")
STOP_WAIT_S = 30.0


@dataclass
class Target:
    """Where a sync's batches go: the library, its spaces and their encoders (the same order,
    the first one chunks), the run's report and its progress."""

    library: Library
    spaces: list
    encoders: list
    report: SyncReport
    state: Progress

def index_files(target: Target, todo: list[Job], opts: SyncOptions, old_sha: dict[str, str | None]) -> None:
    """Consumes the files that need work; embeds and commits them in batches of about
    ``opts.batch_chunks`` chunks, documents whole. A :class:`BatchSubmitter` first encoder (a Ray
    pool) gets up to ``max_in_flight`` batches at once; they are committed in the order sent."""
    from .ocr_cache import OcrPageCache

    ahead = sync_prepare.Prefetch(todo, target.encoders[0], opts, old_sha, OcrPageCache(target.library.path))
    first = target.encoders[0]
    remote = first if isinstance(first, BatchSubmitter) else None
    sent: deque = deque()  # (jobs, ticket) out at the remote encoder, oldest first
    pending: list[Job] = []
    pending_chunks = 0

    def send(jobs: list[Job]) -> None:
        if remote is None:
            flush(target, jobs)
            return
        while len(sent) >= remote.max_in_flight:  # back-pressure: commit the oldest first
            land(target, sent.popleft())
        plan = ContextPlan(*batch_texts(jobs))
        sent.append((jobs, plan, remote.submit_passages(plan.flat) if plan.texts else None))

    try:
        while True:
            try:  # woken now and then: progress says where the reading is while nothing is ready
                job = ahead.jobs.get(timeout=WAKE_S)
            except queue.Empty:
                target.state.where = ahead.where
                target.state.tick()
                continue
            target.state.where = ahead.where
            if job is None:
                break
            if isinstance(job, sync_prepare.OcrStart):  # the files with text are all read
                if pending:
                    send(pending)
                    pending, pending_chunks = [], 0
                target.state.start_ocr(job.pages)
                continue
            target.state.path = job.shown
            target.state.read(job)
            pending.append(job)
            pending_chunks += len(job.chunks)
            if pending_chunks >= opts.batch_chunks:
                send(pending)
                pending, pending_chunks = [], 0
            elif not job.chunks:
                target.state.tick()
        if pending:
            send(pending)
        while sent:
            land(target, sent.popleft())
    finally:
        ahead.stop()


def land(target: Target, sent: tuple) -> None:
    """Collect one batch from the remote first encoder, then embed the other spaces and commit."""
    jobs, plan, ticket = sent
    t = time.perf_counter()
    ready = target.encoders[0].collect(ticket) if ticket is not None else {}  # no texts: nothing to embed
    target.report.encode_seconds += time.perf_counter() - t
    # the actors' encoders have no post-transform (derived spaces are made here): their vectors
    # are the backend's, which the plan turns into the chunks' as Encoder.encode_passages does
    flush(target, jobs, ready={name: plan.fuse(v) for name, v in ready.items()})


def flush(target: Target, jobs: list[Job], ready: dict[str, np.ndarray] | None = None) -> None:
    """Embed one batch (``ready``: vectors already computed, by space name) and commit it."""
    texts, sections = batch_texts(jobs)
    vectors = embed_batch(target, jobs, (texts, sections), ready or {})
    added, removed = commit(target.library, target.spaces, jobs, vectors)
    for sp, vecs in zip(target.spaces, vectors):
        sp.committed(added, vecs, removed)
    for job in jobs:
        count_job(target.report, job)
    target.report.chunks_embedded += len(texts)
    files = [job for job in jobs if not job.member]
    state = target.state
    state.embedded(jobs)
    state.chunks += len(texts)
    state.files_done += len(files)
    state.todo_done += len(files)
    state.tick(force=True)


def batch_texts(jobs: list[Job]) -> tuple[list[str], list[str | None]]:
    """The batch's chunk texts and each chunk's section text (None: its own section)."""
    texts = [c.text for job in jobs for c, _ in job.chunks]
    sections = [text for job in jobs
                for text in ([t for _, t in job.sections] if len(job.sections) == len(job.chunks)
                             else [None] * len(job.chunks))]
    return texts, sections


def embed_batch(target: Target, jobs: list[Job], chunks: tuple[list[str], list], ready: dict[str, np.ndarray]
                ) -> list[np.ndarray]:
    """The batch's vectors in every space, in the encoders' order: those ``ready``, those
    derived from a base space's, the rest encoded (the first encoder's progress shown).
    ``chunks``: their texts and section texts (:func:`batch_texts`)."""
    (texts, sections), encoders, state = chunks, target.encoders, target.state
    vectors: list[np.ndarray] = []
    for i, enc in enumerate(encoders):
        if enc.space_name in ready:
            vectors.append(ready[enc.space_name])
            continue
        derived = derived_vectors(enc, encoders[:i], vectors, [s or t for t, s in zip(texts, sections)])
        if derived is not None:
            vectors.append(derived)
            continue
        if i == 0:
            state.embedding(jobs)
            enc.on_batch = lambda n: state.tick(extra_chunks=n)
        try:
            t = time.perf_counter()
            vectors.append(encode_stoppable(enc, texts, sections) if texts else np.empty((0, enc.dim), np.float32))
            target.report.encode_seconds += time.perf_counter() - t
        finally:
            enc.on_batch = None
    return vectors


def count_job(report: SyncReport, job: Job) -> None:
    """One committed job in the run's report: its notes, OCR, and added, changed, unchanged,
    failed or stale (a message is counted with its file, save its cut chunks)."""
    report.notes.extend((job.shown, note) for note in job.notes)
    if job.ocr_missing:
        report.ocr_waiting.append(job.shown)
        if not job.chunks and job.error is None:
            return
    if job.encoding and job.encoding.startswith("ocr:") and job.error is None:
        report.ocr_pages += len(job.ocr_pages)
    report.chunks_cut += sum(1 for c, _ in job.chunks if c.cut)
    if job.member and job.error is None:
        return
    if job.error is not None:
        (report.stale if job.old_status in ("ok", "stale") else report.failed).append((job.shown, job.error))
    elif job.same_content:
        report.unchanged += 1
    elif job.doc_id is None or job.old_status == "failed":
        report.added += 1
    else:
        report.changed += 1


def encode_stoppable(enc, texts: list[str], sections: list | None = None) -> np.ndarray:
    """``enc.encode_passages(texts, sections)`` in a helper thread while this thread waits in steps a
    signal can break: Ctrl+C or SIGTERM (raised in the main thread, which a call into ONNX
    Runtime would hold for a whole batch: seconds on a loaded CPU) stop the run at once. The
    encoder is told to stop (its batch in flight is cut short where the backend can) and is
    waited for at most ``STOP_WAIT_S``; nothing of the batch is committed."""
    box: dict = {}

    def work() -> None:
        try:
            box["out"] = passage_vectors(enc, texts, sections)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = e

    enc.stop = threading.Event()
    worker = threading.Thread(target=work, name="hefsearch-encode", daemon=True)
    try:  # started inside: a signal while it starts must stop it too
        worker.start()
        while worker.is_alive():
            worker.join(0.1)
    except BaseException:
        stop = getattr(enc, "stop_running", None)
        if stop is not None:
            stop()
        if worker.ident is not None:
            worker.join(STOP_WAIT_S)
        raise
    finally:
        if not worker.is_alive():
            enc.stop = None
    if "error" in box:
        raise box["error"]
    return box["out"]


def derived_vectors(enc, earlier, vectors: list[np.ndarray], texts: list[str]) -> np.ndarray | None:
    """A post-transformed space's vectors (the language-neutral one) made from the vectors of its
    base encoder already computed for this batch, or None (``texts``: what each chunk's language
    is told from, its section's text where it has one). The encoder itself would run the
    whole model again on the same texts and then apply the same transform (embed/encoder.py):
    deriving halves the CPU time of indexing a multilingual library, and with Ray it uses the
    FP32 vectors the actors sent."""
    pt = getattr(enc, "post_transform", None)
    if pt is None:
        return None
    # the base encoder's fingerprint parts are its own without the post-transform: equal parts,
    # equal raw vectors (embed/encoder.py Encoder.fingerprint_parts)
    base = {**enc.fingerprint_parts(), "post_transform": None}
    for other, vecs in zip(earlier, vectors):
        if other.fingerprint_parts() == base:
            return enc.transformed(vecs, texts, passages=True)
    return None


def commit(library: Library, spaces, jobs: list[Job], vectors: list[np.ndarray]) -> tuple[np.ndarray, list[int]]:
    """One transaction for a batch of whole documents; returns (new chunk ids, removed ids)."""
    now = utc_now()
    conn = library.db.conn
    staged: list[tuple] = []
    removed: list[int] = []
    new_ids: list[int] = []
    try:
        with library.transaction():
            for job in jobs:
                gone, added = write_job(conn, job, now)
                removed += gone
                new_ids += added
            ids = np.asarray(new_ids, np.int64)
            if len(ids):
                # vectors first (durable), then the members that make them real, in this transaction
                for sp, vecs in zip(spaces, vectors):
                    staged.append((sp, sp.stage(ids, vecs)))
                for sp in spaces:
                    conn.executemany("INSERT INTO space_members(space, chunk_id) VALUES (?, ?)",
                                     [(sp.info.name, int(i)) for i in ids])
    except BaseException:
        for sp, seg in staged:
            try:
                sp.unstage(seg)
            except Exception:  # pragma: no cover - reconcile removes it at the next open
                pass
        raise
    return ids, removed


def write_job(conn, job: Job, now: str) -> tuple[list[int], list[int]]:
    """One document's rows, inside the batch's transaction; returns (removed chunk ids, new
    chunk ids in ordinal order). A failing file keeps its indexed version, marked stale. A
    file that only OCR could read, with OCR not installed, is not written (read next run)."""
    if job.ocr_missing and not job.chunks and job.error is None:
        return [], []
    if job.error is not None:
        if job.old_status in ("ok", "stale"):  # keep the indexed version, say why
            documents.keep_stale(conn, job.doc_id, job.error, job.size, job.mtime_ns)
        else:
            upsert_document(conn, job, "failed", 0, 0, now)
        return [], []
    if job.same_content:
        documents.touch(conn, job.doc_id, job.size, job.mtime_ns)
        return [], []
    removed = documents.drop_chunks(conn, job.doc_id) if job.doc_id is not None else []
    if job.drop_ids:  # members no longer in their file
        removed += documents.delete_documents(conn.execute, job.drop_ids)
    cut = sum(1 for c, _ in job.chunks if c.cut)
    doc_id = upsert_document(conn, job, "ok", len(job.chunks), cut, now)
    langs = job.langs if len(job.langs) == len(job.chunks) else [None] * len(job.chunks)
    sections = [s for s, _ in job.sections] if len(job.sections) == len(job.chunks) else [None] * len(job.chunks)
    return removed, documents.insert_chunks(conn, doc_id, [
        (c.ordinal, c.text, c.start, c.end, c.page, ln, c.tokens, int(c.cut), lang, section)
        for (c, ln), lang, section in zip(job.chunks, langs, sections)])


def upsert_document(conn, job: Job, status: str, nchunks: int, cut: int, now: str) -> int:
    return documents.upsert_document(conn, (job.shown, path_bytes(job.path), job.size, job.mtime_ns, job.sha256,
                                            job.kind, status, job.error, nchunks, cut, job.encoding, now))

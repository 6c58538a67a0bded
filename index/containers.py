"""Documents inside a file: each message of an mbox, .eml or Maildir file is a document of its
own (its ``documents`` row, chunks and date), stored below its file.

A member's path is its file's path, a slash, and its key (the Message-ID, else a hash of the
message): ``~/Mail/inbox.mbox/CAF12@mail.example.org``. Nothing on disk can have that path (a
regular file holds no folder), so it never clashes with a real file, and every rule that works
on paths holds: a hit names the message, ``--path '*/inbox.mbox/*'`` keeps one mailbox, and
``--since`` reads the member's ``mtime_ns``, which is the message's date. The file itself keeps
a row of its own (no chunks) with its size, mtime and hash, so an unchanged mailbox is skipped
as any file is.

A changed mailbox is read as a stream (:func:`~hefsearch.readers.extract_mail.split_mbox`): a
message whose bytes hash as before is left as it is, a new or changed one becomes a member
:class:`~hefsearch.index.sync_types.Job` of its own (so batches stay bounded however large the
mailbox), and members no longer in the file are removed with the file's own job, last.
"""

from __future__ import annotations

import hashlib
import io
import os
from typing import Callable, Collection, Iterator

from hefsearch.base.terminal_text import printable

from hefsearch.readers.extract_base import ExtractedText, ExtractionError
from hefsearch.readers.formats import CONTAINER_KINDS
from .sync_types import Job


def split_members(existing: dict[str, tuple], containers: Collection[str] = ()
                  ) -> tuple[dict[str, tuple], dict[str, dict[str, tuple]]]:
    """Stored rows (real path -> (id, size, mtime_ns, sha256, status, error)) split into the
    files' rows and, per file, its members' rows: a row whose parent path is a stored file or
    one of ``containers`` (the mail files found on disk now). A mailbox's own row is written
    after its last message, so a run stopped before that leaves members whose file has no row
    yet: they are still its members (kept, and not embedded again), not files gone from disk."""
    files: dict[str, tuple] = {}
    members: dict[str, dict[str, tuple]] = {}
    for path, row in existing.items():
        parent = os.path.dirname(path)
        if parent != path and (parent in existing or parent in containers):
            members.setdefault(parent, {})[path] = row
        else:
            files[path] = row
    return files, members


def attach_members(plan, members: dict[str, dict[str, tuple]]) -> None:
    """The plan made aware of members: a file gone takes its members along; a file to read
    gets its members' rows, to leave unchanged messages alone."""
    for path in list(plan.gone):
        for member, row in members.get(path, {}).items():
            plan.existing[member] = row
            plan.gone.append(member)
    for job in plan.todo:
        if job.kind in CONTAINER_KINDS:
            job.old_members = members.get(job.path, {})


def expand(job: Job, prepare_text: Callable[[Job, ExtractedText], None], max_bytes: int | None,
           at: Callable[[str], None] | None = None) -> Iterator[Job]:
    """The member jobs of a mail file (new and changed messages only), then the file's own job
    (its hash, and ``drop_ids``: members no longer in the file). A file that cannot be read
    is one failed job and keeps its members. ``at`` hears where the reading is ("message 812",
    "message 812, already indexed"): a run after an interruption passes the messages it
    committed before (same hash) without embedding them again."""
    from hefsearch.readers.extract_mail import open_regular, split_mbox

    old = getattr(job, "old_members", None) or {}
    seen: dict[str, int] = {}
    kept: set[str] = set()
    digest = hashlib.sha256()
    try:
        with _opened(job.path, max_bytes) as stream:
            if job.kind == "mbox":
                messages = split_mbox(_Hashing(stream, digest), max_bytes)
            else:
                raw = stream.read(max_bytes + 1 if max_bytes is not None else -1)
                digest.update(raw)
                messages = iter([(1, raw, None)])
            for number, raw, error in messages:
                member = _member_job(job, _member_name(number, raw, seen), raw or b"", error, max_bytes)
                kept.add(member.path)
                if at is not None:
                    at(f"message {number}" + (", already indexed" if member.same_content else ""))
                if member.same_content:
                    continue
                if member.error is None:
                    prepare_text(member, ExtractedText(text=member.text_of))
                    member.text_of = ""
                yield member
    except ExtractionError as e:
        job.error = printable(e.message)
        yield job
        return
    except OSError as e:
        job.error = printable(f"cannot read: {e.strerror or e}")
        yield job
        return
    job.sha256 = getattr(stream, "sha256", None) or digest.hexdigest()
    job.drop_ids = [row[0] for path, row in old.items() if path not in kept]
    yield job


def _opened(path: str, max_bytes: int | None):
    """The mail file as a stream: the file itself, or, for ``inbox.mbox.gz``, its bytes
    decompressed in memory under the --max-size cap (a gzip bomb stops there)."""
    from hefsearch.readers.filetypes import CompressionBomb, CorruptCompressed, compression_of, decompress
    from hefsearch.readers.extract_base import too_much_text
    from hefsearch.readers.extract_mail import open_regular

    suffix = compression_of(path)
    if suffix is None:
        return open_regular(path)
    with open_regular(path) as f:
        data = f.read()
    try:
        return _Unpacked(decompress(data, suffix, max_bytes), hashlib.sha256(data).hexdigest())
    except CompressionBomb:
        raise too_much_text(suffix[1:], max_bytes) from None
    except CorruptCompressed as e:
        raise ExtractionError(e.message) from None


class _Unpacked(io.BytesIO):
    """Decompressed bytes read as a file, with the sha256 of the compressed file (what
    :func:`file_sha256` gives, so an unchanged ``.mbox.gz`` is skipped next time)."""

    def __init__(self, data: bytes, sha256: str):
        super().__init__(data)
        self.sha256 = sha256


def file_sha256(path: str) -> str:
    """A file's sha256, read in steps (a mailbox may be far larger than memory)."""
    from hefsearch.readers.extract_mail import open_regular

    digest = hashlib.sha256()
    with open_regular(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _Hashing:
    """A stream that hashes what is read from it (the file's sha256, in the same pass)."""

    def __init__(self, stream, digest):
        self.stream, self.digest = stream, digest

    def readline(self, limit: int = -1) -> bytes:
        line = self.stream.readline(limit)
        self.digest.update(line)
        return line


def _member_name(number: int, raw: bytes | None, seen: dict[str, int]) -> str:
    """A message's name inside its file: from its Message-ID (or its hash), unique in ``seen``;
    one refused by the stream (too large, ``raw`` None) is named by its number."""
    from email.parser import BytesHeaderParser
    from email import policy

    from hefsearch.readers.extract_mail import header_text, member_key

    if raw is None:
        return f"message-{number}"
    try:
        headers = BytesHeaderParser(policy=policy.default).parsebytes(raw[: 256 << 10])
        message_id = header_text(headers.get("Message-ID")).strip("<>")
    except Exception:  # noqa: BLE001 - the body parse reports a bad message
        message_id = ""
    return member_key(message_id, raw, seen)


def _member_job(job: Job, key: str, raw: bytes, error: str | None, max_bytes: int | None) -> Job:
    """The job of one message of a mail file: unchanged (same hash as its stored row), failed,
    or read, its text waiting in ``text_of``."""
    from hefsearch.readers.extract_mail import read_message

    path = f"{job.path}/{key}"
    row = (getattr(job, "old_members", None) or {}).get(path)
    sha = hashlib.sha256(raw).hexdigest()
    member = Job(path, len(raw), job.mtime_ns, job.kind, None if row is None else row[0],
                 None if row is None else row[4], sha256=sha)
    member.member = True
    if error is not None:
        member.error = printable(error)
        return member
    if row is not None and row[3] == sha and row[4] == "ok":
        member.same_content = True
        return member
    try:
        msg = read_message(raw, max_bytes)
    except ExtractionError as e:
        member.error = printable(e.message)
        return member
    if msg.date_ns is not None:
        member.mtime_ns = msg.date_ns
    member.text_of = msg.text
    member.notes = [printable(n) for n in msg.notes]
    return member


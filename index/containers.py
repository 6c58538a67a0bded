"""Documents inside a file: each message of an mbox, .eml or Maildir file is a document of its
own (its ``documents`` row, chunks and date), stored below its file.

A member's path is its file's path, a slash, and its key (the Message-ID, else a hash of the
message): ``~/Mail/inbox.mbox/CAF12@mail.example.org``. Nothing on disk can have that path (a
regular file holds no folder), so it never clashes with a real file, and every rule that works
on paths holds: a hit names the message, ``--path '*/inbox.mbox/*'`` keeps one mailbox, and
``--since`` reads the member's ``mtime_ns``, which is the message's date. The file itself keeps
a row of its own (no chunks) with its size, mtime and hash, so an unchanged mailbox is skipped
as any file is.

A changed mailbox is read as a stream (:mod:`hefsearch.readers.mail_file`): a
message whose bytes hash as before is left as it is, a new or changed one becomes a member
:class:`~hefsearch.index.sync_types.Job` of its own (so batches stay bounded however large the
mailbox), and members no longer in the file are removed with the file's own job, last.
"""

from __future__ import annotations

import hashlib
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
    from hefsearch.readers.mail_file import open_mail_file, read_messages

    old = getattr(job, "old_members", None) or {}
    seen: dict[str, int] = {}
    kept: set[str] = set()
    digest = hashlib.sha256()
    try:
        with open_mail_file(job.path, max_bytes) as stream:
            for number, raw, error in read_messages(stream, job.kind, max_bytes, digest):
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


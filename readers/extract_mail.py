"""Mail: one message's text (its subject, sender, date and bodies, and the text of its
attachments), and the messages of an mbox read as a stream.

A message is parsed by the standard library's ``email`` package (``policy.default``), which
decodes quoted-printable and base64 and any charset Python knows (an unknown or lying charset
is decoded as UTF-8 with replacements, never an error). HTML parts go through the HTML
extractor; of a ``multipart/alternative`` only the plain part is read when there is one.
Attachments whose name has a known suffix (text, PDF, DOCX, EPUB, office files...) are read by
that format's extractor with the same --max-size cap; images and unknown types are named only.

Hostile mail is bounded: a message over --max-size is refused (in an mbox, without holding it:
the stream skips to the next message); MIME deeper than :data:`MAX_MIME_DEPTH` or with more
than :data:`MAX_PARTS` parts is refused; an attachment whose encoded size says it decodes to
more than the cap is named and left out without decoding it."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import BinaryIO, Iterator

from hefsearch.base.terminal_text import name_segment

from .budget import current, reading
from .extract_base import ExtractedText, ExtractionError, clean_text, describe, too_much_text

#: multiparts inside multiparts (real mail: 3-5; a bomb: thousands)
MAX_MIME_DEPTH = 20
#: parts in one message
MAX_PARTS = 1_000
#: a line that starts a message in an mbox: "From sender day mon dd hh:mm:ss yyyy"
_FROM_LINE = re.compile(rb"^From \S+ +\S.*\d\d?:\d\d")
#: kinds never read as an attachment (mail inside mail is read as a message part)
_NOT_ATTACHMENT_KINDS = frozenset({"eml", "mbox", "image"})
#: characters of a member key (the message's name inside its container)
_KEY_CHARS = 150


@dataclass
class Message:
    """One message read: its text and what names it."""

    text: str
    subject: str = ""
    sender: str = ""
    date_ns: int | None = None
    message_id: str = ""
    #: attachments left out, each with why
    notes: list[str] = field(default_factory=list)


def extract_eml(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``eml`` kind: the message's text (the sync makes it a member
    document of its file, see :mod:`hefsearch.index.containers`)."""
    return ExtractedText(text=read_message(data, max_chars).text)


def extract_mbox(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``mbox`` kind, for a caller that wants one text: every message's,
    in order (the sync reads an mbox as a stream of member documents instead)."""
    import io

    texts = []
    for _, raw, error in split_mbox(io.BytesIO(data), max_chars):
        if raw is not None:
            texts.append(read_message(raw, max_chars).text)
    return ExtractedText(text="\n\n".join(texts))


def header_text(value) -> str:
    """A header as one line of text ('' when absent or undecodable)."""
    if value is None:
        return ""
    try:
        return " ".join(str(value).split())
    except Exception:  # noqa: BLE001 - a malformed encoded word
        return ""


def read_message(raw: bytes, max_chars: int | None = None) -> Message:
    """The text of one message: a header block (Subject, From, To, Date), then its bodies and
    attachments, each attachment opening with an "Attachment: NAME" line."""
    import email
    from email import policy
    from email.utils import parsedate_to_datetime

    if max_chars is not None and len(raw) > max_chars:
        raise ExtractionError(f"message larger than {max_chars / 2**20:.1f} MiB (the --max-size limit); not indexed")
    _check_nesting(raw)
    try:
        msg = email.message_from_bytes(raw, policy=policy.default)
    except RecursionError:
        raise ExtractionError(f"message is nested deeper than {MAX_MIME_DEPTH} MIME levels; refusing") from None
    except Exception as e:  # noqa: BLE001 - the parser is lenient; this is rare
        raise ExtractionError(f"message could not be parsed: {describe(e)}") from None
    out = Message(text="")
    out.subject = header_text(msg.get("Subject"))
    out.sender = header_text(msg.get("From"))
    out.message_id = header_text(msg.get("Message-ID")).strip("<>")
    date = header_text(msg.get("Date"))
    try:
        out.date_ns = int(parsedate_to_datetime(date).timestamp() * 1e9) if date else None
    except (TypeError, ValueError, OverflowError, IndexError):
        out.date_ns = None
    head = [f"{k}: {v}" for k, v in (("Subject", out.subject), ("From", out.sender),
                                      ("To", header_text(msg.get("To"))), ("Date", date)) if v]
    blocks = ["\n".join(head)]
    state = {"parts": 0, "chars": 0}
    with reading("message", max_chars):  # its attachments share the message's budget
        _walk(msg, blocks, out.notes, max_chars, 0, state)
    out.text = clean_text("\n\n".join(b.strip() for b in blocks if b.strip()))
    return out


def subject_of(text: str) -> str | None:
    """The subject of a message's stored text (its header block comes first, ``Subject: ...``
    on the first line when it has one), for a title; None when it has none."""
    first = text.lstrip().split("\n", 1)[0]
    return first[len("Subject:"):].strip() or None if first.startswith("Subject:") else None


def _check_nesting(raw: bytes) -> None:
    """Refuse a message declaring more multipart boundaries than any real mail nests, before
    the parser (which recurses per level) sees it."""
    declared = len(re.findall(rb"(?i)boundary\s*=", raw[: 4 << 20]))
    if declared > MAX_MIME_DEPTH * 10:
        raise ExtractionError(f"message declares {declared} MIME boundaries (nested deeper than "
                              f"{MAX_MIME_DEPTH} levels or a MIME bomb); refusing")


def _walk(part, blocks: list[str], notes: list[str], max_chars, depth: int, state: dict) -> None:
    _count_part(state, depth)
    ctype = part.get_content_type()
    filename = _filename(part)
    inner = _inner_parts(part, ctype, filename)
    if inner is not None:
        for child in inner:
            _walk(child, blocks, notes, max_chars, depth + 1, state)
        return
    text = _leaf_text(part, ctype, filename, notes, max_chars)
    if text:
        state["chars"] += len(text)
        if max_chars is not None and state["chars"] > max_chars:
            raise too_much_text("message", max_chars)
        blocks.append(text)


def _count_part(state: dict, depth: int) -> None:
    """One more MIME part: a message past the parts or depth any real mail has is refused."""
    current().tick()
    state["parts"] += 1
    if state["parts"] > MAX_PARTS:
        raise ExtractionError(f"message has more than {MAX_PARTS} MIME parts; refusing")
    if depth > MAX_MIME_DEPTH:
        raise ExtractionError(f"message is nested deeper than {MAX_MIME_DEPTH} MIME levels; refusing")


def _inner_parts(part, ctype: str, filename: str | None) -> list | None:
    """The parts to read inside ``part`` (of an alternative, the plain text one, else the last),
    or None for a leaf; a forwarded message not attached as a file is read as inner parts."""
    if part.is_multipart():
        children = list(part.iter_parts())
        if ctype == "multipart/alternative":
            plain = [c for c in children if c.get_content_type() == "text/plain" and not _filename(c)]
            children = plain[:1] or children[-1:]
        return children
    if ctype == "message/rfc822" and not filename:
        return list(part.iter_parts())
    return None


def _leaf_text(part, ctype: str, filename: str | None, notes: list[str], max_chars) -> str:
    """A body's text, or an attachment's ('Attachment: NAME' and its text); "" for the rest."""
    attached = filename is not None or part.get_content_disposition() == "attachment"
    if attached:
        return _attachment_text(part, filename or "(unnamed)", notes, max_chars)
    if ctype in ("text/plain", "text/html"):
        return _body_text(part, ctype)
    return ""


def _filename(part) -> str | None:
    try:
        name = part.get_filename()
    except Exception:  # noqa: BLE001 - a malformed parameter
        return None
    return PurePath(str(name).replace("\\", "/")).name if name else None


def _payload(part) -> bytes:
    """A leaf part's decoded bytes (base64 / quoted-printable undone; bad padding tolerated)."""
    data = part.get_payload(decode=True)
    return data if isinstance(data, bytes) else b""


def _body_text(part, ctype: str) -> str:
    data = _payload(part)
    if ctype == "text/html":
        from .extract_html import html_to_text

        try:
            return html_to_text(data)
        except ExtractionError:
            return ""
    charset = part.get_content_charset() or "utf-8"
    try:
        return data.decode(charset)
    except (LookupError, UnicodeDecodeError):  # unknown or lying charset: the text detection decides
        from .extract_text import decode_text

        try:
            return decode_text(data)[0]
        except ExtractionError:  # e.g. UTF-16 with a stray byte: the declared charset, leniently
            try:
                return data.decode(charset, errors="replace")
            except LookupError:
                return data.decode("utf-8", errors="replace")


def _attachment_text(part, name: str, notes: list[str], max_chars) -> str:
    """'Attachment: NAME' and the text of an attachment of a readable kind; others named only."""
    from .formats import BY_KIND, SUPPORTED_SUFFIXES

    label = f"Attachment: {name}"
    kind = SUPPORTED_SUFFIXES.get(PurePath(name).suffix.lower())
    if kind is None and part.get_content_type() == "text/plain":
        kind = "text"
    if kind is None or kind in _NOT_ATTACHMENT_KINDS:
        return label
    encoded = part.get_payload()
    if max_chars is not None and isinstance(encoded, str) and len(encoded) * 3 // 4 > max_chars:
        notes.append(f"attachment {name}: larger than {max_chars / 2**20:.1f} MiB (the --max-size limit); "
                     "not read")
        return label
    try:
        current().add_part()  # an attachment is a part of the message's budget
        doc = BY_KIND[kind].read(_payload(part), max_chars=max_chars)
        notes.extend(f"attachment {name}: {note}" for note in doc.notes)
    except ExtractionError as e:
        notes.append(f"attachment {name}: {e.message}")
        return label
    except Exception as e:  # noqa: BLE001 - one bad attachment must not lose the message
        notes.append(f"attachment {name}: could not be read ({describe(e)})")
        return label
    return f"{label}\n\n{doc.text}"


def member_key(message_id: str, raw: bytes, seen: dict[str, int]) -> str:
    """The name of a message inside its container, stable across runs: its Message-ID (else a
    hash of its bytes), made a single path segment that is safe to show; a repeated one gets
    ``~2``, ``~3``."""
    import hashlib

    # every control, separator and bidi character (not C0 alone: a C1 CSI or U+202E in a
    # Message-ID reached the terminal through the key), and slashes
    key = name_segment(message_id).strip()[:_KEY_CHARS] if message_id else ""
    if not key or key in (".", ".."):
        key = "sha-" + hashlib.sha256(raw).hexdigest()[:16]
    n = seen.get(key, 0) + 1
    seen[key] = n
    return key if n == 1 else f"{key}~{n}"


def split_mbox(stream: BinaryIO, max_bytes: int | None) -> Iterator[tuple[int, bytes | None, str | None]]:
    """(number from 1, the message's bytes or None, why it was refused or None) of each message
    of an mbox, read line by line: a message over ``max_bytes`` is refused without being held.
    A line opens a message only when it reads as a real "From " separator (sender, then a date
    with a time); any other line starting "From " is body text. ">From " lines are unquoted
    (mboxrd). A file whose first line is not a separator is not an mbox: ExtractionError."""
    first = stream.readline(1024)
    if not _FROM_LINE.match(first):
        raise ExtractionError("not an mbox: its first line is not a 'From sender date' separator",
                              hint="mbox files start with a line like 'From alice@example.org Mon Jan  1 "
                                   "10:00:00 2024'")
    number, buf, size, too_big = 1, [], 0, False
    while True:
        line = stream.readline(1 << 20)
        if not line or (line[:5] == b"From " and _FROM_LINE.match(line)):
            if too_big:
                yield number, None, (f"message {number} is larger than {max_bytes / 2**20:.1f} MiB (the --max-size "
                                     "limit); not indexed")
            else:
                yield number, b"".join(buf), None
            if not line:
                return
            number, buf, size, too_big = number + 1, [], 0, False
            continue
        if too_big:
            continue
        if line.startswith(b">") and line.lstrip(b">").startswith(b"From "):
            line = line[1:]
        size += len(line)
        if max_bytes is not None and size > max_bytes:
            too_big, buf = True, []
            continue
        buf.append(line)


def open_regular(path) -> BinaryIO:
    """A regular file opened for reading without blocking on a FIFO swapped in since the crawl."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise ExtractionError(f"cannot open: {e.strerror or e}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ExtractionError("not a regular file (FIFO, socket or device); not read")
    return os.fdopen(fd, "rb")

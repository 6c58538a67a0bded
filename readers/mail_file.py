"""A mail file read as a stream of raw messages: opened without blocking (a ``.mbox.gz``
decompressed in memory under the --max-size cap), hashed in the same pass, and split into its
messages (an mbox by its From lines, an .eml is one). What becomes of each message (a document
of its own, stored below its file) is the library's: :mod:`hefsearch.index.containers`."""

from __future__ import annotations

import hashlib
import io
from typing import Iterator

from .extract_base import ExtractionError, too_much_text
from .extract_mail import open_regular, split_mbox
from .filetypes import CompressionBomb, CorruptCompressed, compression_of, decompress


def read_messages(stream, kind: str, max_bytes: int | None, digest) -> Iterator[tuple[int, bytes | None, str | None]]:
    """(number, raw bytes or None, why not read) of each message of an opened mail file of
    ``kind`` (``mbox`` or ``eml``), its bytes added to ``digest`` as they are read."""
    if kind == "mbox":
        return split_mbox(_HashingReader(stream, digest), max_bytes)
    raw = stream.read(max_bytes + 1 if max_bytes is not None else -1)
    digest.update(raw)
    return iter([(1, raw, None)])


def open_mail_file(path: str, max_bytes: int | None):
    """The mail file as a stream: the file itself, or, for ``inbox.mbox.gz``, its bytes
    decompressed in memory under the --max-size cap (a gzip bomb stops there)."""
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
    digest = hashlib.sha256()
    with open_regular(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _HashingReader:
    """A stream that hashes what is read from it (the file's sha256, in the same pass)."""

    def __init__(self, stream, digest):
        self.stream, self.digest = stream, digest

    def readline(self, limit: int = -1) -> bytes:
        line = self.stream.readline(limit)
        self.digest.update(line)
        return line

"""Which files are documents: by suffix, by content for names without a file-type suffix, and
through a compression suffix (``.gz``, ``.bz2``, ``.xz``).

- A known suffix (the table of formats, :mod:`hefsearch.readers.formats`, plus the library's
  ``extra_suffixes`` setting and ``index --ext``) gives the kind.
- A name without a file-type suffix (``NEWS``, ``copyright``, ``README.Debian``, ``ls.1``,
  ``changelog.Debian.amd64``) is looked at: its first :data:`SNIFF_BYTES` bytes (decompressed
  for ``NEWS.gz``) are text -> kind ``text``, else it is unsupported ("not text"). A suffix is a
  file-type suffix when it reads like one: a lowercase letter then at most four letters or
  digits (``.py``, ``.conf``, ``.png``); ``.Debian``, ``.1``, ``.source`` or ``.abs-guide`` are
  not, and neither is anything after a well-known document name (``README.emacs``). A file with
  a real suffix hefsearch does not read (``.py``, ``.log``) stays unsupported until its suffix is
  added, so a folder of code is not indexed by accident.
- A Maildir message (``cur/1700000000.M1P2.host:2,S``) is mail (kind ``eml``) by its place.
- ``NAME.gz`` is classified by ``NAME`` and read through: the decompressed bytes are extracted
  as the kind of ``NAME``. Decompression is streamed and stops once the output passes the
  ``--max-size`` cap, so a gzip bomb costs at most that much memory and is reported, not
  indexed.
"""

from __future__ import annotations

import bz2
import lzma
import re
import zlib
from pathlib import PurePath
from typing import Callable, Mapping

from hefsearch.base.errors import HefsearchError

#: how much of a file the content check reads (and decompresses)
SNIFF_BYTES = 8192
#: decompressed bytes produced per step (bounds the memory of one step)
_STEP = 1 << 20
#: ".py", ".conf", ".html": what a file-type suffix looks like
_TYPE_SUFFIX = re.compile(r"\.[a-z][a-z0-9]{0,4}")
#: names that are documents whatever follows them (README.emacs, changelog.Debian.amd64)
DOC_NAMES = frozenset("""readme news changelog changes copyright copying license licence authors
install todo thanks history bugs faq notice contributors credits intro compat posix hacking
maintainers release-notes releasenotes""".split())


class CompressionBomb(HefsearchError):
    """The decompressed data passed the cap."""


class CorruptCompressed(HefsearchError):
    """The compressed data cannot be decompressed (truncated, not that format)."""


def _gunzip() -> "zlib._Decompress":
    return zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip header and trailer


#: compression suffix -> a new decompressor with ``decompress(data, max_length)``
COMPRESSED: dict[str, Callable] = {".gz": _gunzip, ".bz2": bz2.BZ2Decompressor, ".xz": lzma.LZMADecompressor}


def compression_of(path) -> str | None:
    """'.gz' for 'NEWS.gz' (any case), else None."""
    suffix = PurePath(path).suffix.lower()
    return suffix if suffix in COMPRESSED else None


def inner_name(path) -> str:
    """The name a compressed file holds: 'NEWS' for 'NEWS.gz'; the name itself otherwise."""
    name = PurePath(path).name
    return name[: -len(compression_of(name))] if compression_of(name) else name


def normalise_suffix(text: str) -> str:
    """'log', '.LOG', ' .log ' -> '.log'; refuses what cannot be a suffix."""
    s = text.strip().lower()
    s = s if s.startswith(".") else "." + s
    if len(s) < 2 or "/" in s or s.count(".") != 1 or any(c.isspace() for c in s):
        raise ValueError(f"{text!r} is not a file suffix (e.g. .log or log)")
    return s


def has_type_suffix(name: str) -> bool:
    """Whether ``name`` ends in something that reads like a file-type suffix (see module doc)."""
    first, dot, _ = name.partition(".")
    if not dot or first.lower() in DOC_NAMES:
        return False
    return bool(_TYPE_SUFFIX.fullmatch(PurePath(name).suffix))


def kind_by_name(path, supported: Mapping[str, str]) -> tuple[str | None, bool]:
    """(kind, whether the content decides): the kind of a known suffix (the inner name's for a
    compressed file); (None, True) for a name to look into; (None, False) when unsupported."""
    name = inner_name(path)
    kind = supported.get(PurePath(name).suffix.lower())
    if kind is not None:
        return kind, False
    if is_maildir_message(path):
        return "eml", False
    return None, bool(name) and not has_type_suffix(name)


def indexed_suffixes(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """suffix -> kind of every suffix ``index`` reads: the formats table plus ``extra`` (the
    library's ``extra_suffixes`` setting and ``index --ext``)."""
    from .formats import SUPPORTED_SUFFIXES

    return {**SUPPORTED_SUFFIXES, **(extra or {})}


def may_be_indexed(path, suffixes: Mapping[str, str]) -> bool:
    """Whether a file of this name can be a document under ``suffixes``
    (:func:`indexed_suffixes`): a known suffix, a compressed file of one (``x.log.gz``), or a
    name without a file-type suffix, whose content decides (``NEWS``, ``NEWS.gz``). The
    name stage of ``crawl.document_kind`` (the whole decision), and the watcher's test of a
    changed path."""
    kind, look = kind_by_name(path, suffixes)
    return kind is not None or look


#: a Maildir message's name: "1700000000.M1P2.host:2,S" (the delivery time first)
_MAILDIR_NAME = re.compile(r"\d{9,}\.[^/]+")


def is_maildir_message(path) -> bool:
    """A file in a Maildir's ``cur`` or ``new`` folder named as deliveries name it: a message."""
    p = PurePath(path)
    return p.parent.name in ("cur", "new") and bool(_MAILDIR_NAME.fullmatch(p.name))


#: the first line of an mbox: "From sender day mon dd hh:mm:ss yyyy"
_MBOX_START = re.compile(rb"From \S+ +\S.*\d\d?:\d\d")


def kind_of_text(sample: bytes, compressed: bool = False) -> str:
    """The kind of a text file found by its content: ``mbox`` for a mailbox without a
    suffix (Thunderbird's ``Inbox``, Apple Mail's ``Inbox.mbox/mbox``), else ``text``."""
    first = sample.split(b"\n", 1)[0]
    return "mbox" if not compressed and _MBOX_START.match(first) else "text"


def decompress(data: bytes, suffix: str, max_bytes: int | None) -> bytes:
    """All of ``data`` decompressed (members of a multi-member gzip joined); raises
    :class:`CompressionBomb` as soon as the output passes ``max_bytes`` (memory stays bounded
    by it) and :class:`CorruptCompressed` for corrupt data."""
    out = bytearray()
    pending = data
    while pending:
        d = COMPRESSED[suffix]()
        step = pending
        while True:
            room = _STEP if max_bytes is None else max(1, min(_STEP, max_bytes + 1 - len(out)))
            try:
                chunk = d.decompress(step, room)
            except (zlib.error, OSError, lzma.LZMAError, EOFError) as e:
                raise CorruptCompressed(f"corrupt {suffix[1:]} data: {e}") from None
            out += chunk
            if max_bytes is not None and len(out) > max_bytes:
                raise CompressionBomb(f"unpacks to more than {max_bytes} bytes")
            step = b""
            if d.eof:
                break
            if not chunk and _needs_input(d):
                raise CorruptCompressed(f"corrupt {suffix[1:]} data: truncated")
        pending = d.unused_data
    return bytes(out)


def _needs_input(d) -> bool:
    """True when a decompressor has consumed its input and wants more (a truncated stream)."""
    needs = getattr(d, "needs_input", None)
    if needs is not None:
        return bool(needs)
    return not d.unconsumed_tail  # zlib: nothing left to feed


def head(data: bytes, suffix: str | None, n: int = SNIFF_BYTES) -> bytes:
    """The first ``n`` bytes of the content (decompressed when ``suffix`` names a compression);
    b'' when the data cannot be decompressed."""
    if suffix is None:
        return data[:n]
    try:
        d = COMPRESSED[suffix]()
        return d.decompress(data, n)
    except (zlib.error, OSError, lzma.LZMAError, EOFError):
        return b""

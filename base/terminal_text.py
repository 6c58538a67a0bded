"""Text that is safe to store and to show: the one home of :func:`printable` (file names whose
bytes are not UTF-8 as ``\\xNN``) and :func:`for_terminal` (no control, separator or bidi
character reaches a terminal). Every front end and the crawler use these."""

from __future__ import annotations

import os
import re


def printable(name: str | os.PathLike) -> str:
    """A path or text as storable, showable text: bytes that are not UTF-8 (they arrive as lone
    surrogates) become ``\\xNN`` escapes, so nothing downstream (SQLite, JSON, the terminal)
    meets a surrogate."""
    text = os.fspath(name)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError:  # a surrogate that did not come from a file name
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


#: characters that drive a terminal rather than show: C0 and C1 controls (ESC starts colour,
#: title and cursor sequences; BEL ends an OSC title), DEL, line/paragraph separators, and the
#: bidi controls that reorder what follows them (U+202E shows "txt.exe" as "exe.txt")
TERMINAL_UNSAFE_CHARS = "\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_TERMINAL_UNSAFE = re.compile(f"[{TERMINAL_UNSAFE_CHARS}]")
#: the characters of :data:`TERMINAL_UNSAFE_CHARS` that ``json.dumps`` leaves raw: all but C0
_JSON_LEAVES_RAW = re.compile(f"[{TERMINAL_UNSAFE_CHARS[TERMINAL_UNSAFE_CHARS.index(chr(0x7f)):]}]")
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def for_terminal(text: str | os.PathLike, *, multiline: bool = False) -> str:
    """``text`` (a path, a document's text, or a message holding them) as it may be shown in a
    terminal: :func:`printable` first (bytes that are not UTF-8 as ``\\xNN``), then every
    control, separator and bidi character escaped the same way (``\\x1b``, ``\\u202e``;
    ``\\n``, ``\\t``, ``\\r``), so a file name or a document cannot set colours or the window
    title, move the cursor, split a table row or reverse what follows. ``multiline`` keeps
    newlines and tabs (previews, messages). Every place that prints such text calls this; JSON
    output keeps the text exact."""
    text = printable(text)
    if not _TERMINAL_UNSAFE.search(text):
        return text
    keep = "\n\t" if multiline else ""

    def escaped(m: re.Match) -> str:
        c = m.group()
        if c in keep:
            return c
        return _NAMED_ESCAPES.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")

    return _TERMINAL_UNSAFE.sub(escaped, text)


def name_segment(text: str, replacement: str = "_", *, also: str = "/\\") -> str:
    """``text`` as a name that is safe to show and to store as one path segment: every
    character :func:`for_terminal` would escape (C0/C1 controls, separators, bidi controls),
    and ``also`` (slashes), replaced by ``replacement``. For names a program derives from a
    document (a mail message's key from its Message-ID), so the stored name itself is clean."""
    return re.sub(f"[{TERMINAL_UNSAFE_CHARS}{re.escape(also)}]", replacement, text)


def json_for_terminal(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) as it may be shown in a terminal:
    the controls JSON leaves raw (DEL, C1 such as U+009B, a CSI, line separators and bidi
    controls) written as ``\\uXXXX`` escapes. They can only stand inside strings, so the JSON
    stays valid and reads back exactly. C0 controls are JSON's own escapes already (and a
    newline outside a string is layout)."""
    return _JSON_LEAVES_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)

"""Plain text files: bytes -> text with the encoding detected (byte-order marks, BOM-less
UTF-16, UTF-8, else a legacy code page picked by charset-normalizer), binary data refused.
All work is linear in the size of the file: byte statistics and decoding run in C, and charset
detection samples the data."""

from __future__ import annotations

import codecs

from .extract_base import ExtractedText, ExtractionError, clean_text

# Share of control bytes (other than tab, newlines, form feed, escape) above which a file is
# binary. Random or compressed data has about 10%; real text, even legacy text, has ~0%.
BINARY_CONTROL_SHARE = 0.05
# Charset detection and the mess check look at this much text, so they cost O(1) per file.
_SAMPLE_CHARS = 64 * 1024

_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27))
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Legacy code pages in rough order of how common they are in old documents.
_COMMON_LEGACY = (
    "cp1252", "cp1251", "cp1250", "cp1253", "cp1254", "cp1257", "cp1255", "cp1256",
    "cp932", "shift_jis", "gb18030", "gb2312", "big5", "cp949", "euc_kr", "euc_jp", "koi8_r",
    "iso8859_2", "iso8859_5", "iso8859_7", "iso8859_9", "iso8859_15",
)
_WIDE_ENCODINGS = ["utf_16", "utf_16_be", "utf_16_le", "utf_32", "utf_32_be", "utf_32_le"]


def extract_plain(data: bytes, max_chars: int | None = None) -> ExtractedText:
    """The extractor of the ``text`` and ``markdown`` kinds (see :mod:`hefsearch.readers.formats`)."""
    text, encoding = decode_text(data)
    return ExtractedText(text=text, encoding=encoding)


def decode_text(data: bytes) -> tuple[str, str | None]:
    """Bytes of a text file -> (text, encoding name). Raises ExtractionError for binary data or
    bytes that are neither UTF-8/16/32 nor a recognisable legacy encoding."""
    if not data:
        return "", None
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom):].decode(encoding)
            except UnicodeDecodeError as e:
                raise ExtractionError(f"starts with a {encoding} byte order mark but is not valid {encoding}: {e.reason} at byte {e.start + len(bom)}") from None
            return clean_text(text), encoding + "-bom"
    wide = _guess_bomless_utf16(data)
    if wide is not None:
        return clean_text(wide[0]), wide[1]
    data = reject_binary(data)
    try:
        return clean_text(data.decode("utf-8")), "utf-8"
    except UnicodeDecodeError:
        pass
    mostly_utf8 = _mostly_utf8(data)
    if mostly_utf8 is not None:
        return clean_text(mostly_utf8), "utf-8 (some invalid bytes replaced)"
    text, encoding = _decode_legacy(data)
    return clean_text(text), encoding


def looks_like_text(sample: bytes) -> bool:
    """Whether the first bytes of a file without a known suffix are text: a byte-order mark or
    BOM-less UTF-16, else no NUL and few control bytes (UTF-8 or a legacy code page; binary and
    compressed data have NULs or about 10% control bytes)."""
    if not sample.strip():
        return False
    if any(sample.startswith(bom) for bom, _ in _BOMS):
        return True
    if len(sample) % 2:  # a cut sample: BOM-less UTF-16 is judged on whole code units
        sample = sample[:-1] or sample
    if _guess_bomless_utf16(sample) is not None:
        return True
    return b"\x00" not in sample and _control_share(sample) <= BINARY_CONTROL_SHARE


def _guess_bomless_utf16(data: bytes) -> tuple[str, str] | None:
    """UTF-16 without a byte order mark: NULs in every other byte of mostly-ASCII text."""
    n = len(data)
    if n < 4 or n % 2:
        return None
    sample = data[: 2 * _SAMPLE_CHARS]
    half = len(sample) // 2
    even_nuls = sample[0::2].count(0)
    odd_nuls = sample[1::2].count(0)
    for nuls, other, encoding in ((odd_nuls, even_nuls, "utf-16-le"), (even_nuls, odd_nuls, "utf-16-be")):
        if nuls >= 0.4 * half and other <= 0.02 * half:
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError:
                return None
            if _control_share(text[:_SAMPLE_CHARS].encode("utf-8", "replace")) <= BINARY_CONTROL_SHARE:
                return text, encoding
    return None


def _control_share(data: bytes) -> float:
    if not data:
        return 0.0
    return (len(data) - len(data.translate(None, _CONTROL_BYTES))) / len(data)


def reject_binary(data: bytes) -> bytes:
    """Return ``data`` without stray NULs, or raise if it looks like binary data."""
    nuls = data.count(0)
    stripped = data.replace(b"\x00", b"") if nuls else data
    if nuls and not stripped.strip():
        raise ExtractionError(f"binary data: {nuls} NUL bytes and no text")
    share = _control_share(stripped)
    if share > BINARY_CONTROL_SHARE:
        raise ExtractionError(
            f"binary data, not text ({share:.0%} control bytes)",
            hint="if this is a document in another format, convert it to .txt, .pdf or .docx",
        )
    return stripped


def _mostly_utf8(data: bytes) -> str | None:
    """UTF-8 with a few broken bytes (a truncated or patched file) stays UTF-8, with U+FFFD for
    the broken bytes. Pure ASCII plus a few high bytes is a legacy file instead ("café" in cp1252)."""
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - data.count(b"\xef\xbf\xbd")
    multibyte = len(data) - len(text)  # extra bytes of valid multi-byte sequences
    if bad <= max(1, len(data) // 1000) and multibyte > 4 * bad:
        return text
    return None


def _decode_legacy(data: bytes) -> tuple[str, str]:
    """Pick a legacy code page with charset-normalizer, preferring cp1252 when it reads as well."""
    from charset_normalizer import from_bytes
    from charset_normalizer.md import mess_ratio

    results = from_bytes(_detection_sample(data), cp_exclusion=_WIDE_ENCODINGS)
    best = results.best()
    try:
        western = data.decode("cp1252")
    except UnicodeDecodeError:
        western = None
    if western is not None:
        # charset-normalizer often ranks cp1250/cp1257 first for short German or French text
        # (they decode the common letters identically); cp1252 is the likely truth in the West.
        mess = mess_ratio(western[:_SAMPLE_CHARS], maximum_threshold=1.0)
        if (best is None and mess <= 0.1) or (best is not None and mess <= best.chaos + 0.02):
            return western, "cp1252"
    if best is None:
        raise ExtractionError(
            "not valid UTF-8 nor a known legacy encoding",
            hint="re-save the file as UTF-8",
        )
    encoding = _prefer_common(results, best)
    return data.decode(encoding, errors="replace"), encoding


def _prefer_common(results, best) -> str:
    """Among candidates that read about as well as the best one (short texts often tie), take
    the code page people actually used (cp1251 over mac_cyrillic, say)."""
    top_coherence = max(r.coherence for r in results)
    near = [r for r in results if r.chaos <= best.chaos + 0.02 and r.coherence >= top_coherence - 0.05]
    for preferred in _COMMON_LEGACY:
        for r in near:
            if preferred in r.could_be_from_charset:
                return preferred
    return best.encoding


def _detection_sample(data: bytes, limit: int = 1024 * 1024) -> bytes:
    """Head and tail of a large file for charset detection (which decodes its input once per
    candidate encoding). Cut at newlines: 0x0A is never part of a multi-byte character in the
    legacy CJK encodings, so the sample stays decodable."""
    if len(data) <= limit:
        return data
    head = data[: limit // 2]
    tail = data[-limit // 2:]
    cut = head.rfind(b"\n")
    head = head[: cut + 1] if cut > 0 else head
    cut = tail.find(b"\n")
    tail = tail[cut + 1:] if 0 <= cut < len(tail) - 1 else tail
    return head + tail

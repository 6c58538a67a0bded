"""An image decoded for OCR within the document's memory budget: grey, its long side at most
``max_side``, never holding more pixels than that budget allows.

- A JPEG is reduced as it is decoded (Pillow's ``draft``: the decoder scales by 1/2, 1/4 or
  1/8 and gives grey directly), so a 100-megapixel photo costs a few megabytes.
- A PNG (8 bits a sample, not interlaced: what scanners and screenshots write) is decoded a
  band of rows at a time: its zlib stream is inflated as it goes, each band handed to Pillow as
  a small PNG of its own (opening with the row above it, unfiltered, so the filters read the
  same), turned grey (transparent as white) and reduced, so a 10,000 x 10,000 RGBA image
  (400 MB of pixels) peaks at a few copies of one band (4 MB) plus the reduced result.
- Anything else is decoded whole when its pixels fit the memory budget
  (:meth:`hefsearch.readers.budget.Budget.hold`) and refused with the reason otherwise.

Pillow's warnings (``DecompressionBombWarning`` and the like) never reach the terminal: the
pixel limit is checked from the header by :mod:`hefsearch.readers.ocr`, and any other warning
becomes one line of the document's notes, without a library path."""

from __future__ import annotations

import io
import math
import struct
import warnings
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image as PILImage

    from .budget import Budget

#: raw bytes of one band of a PNG decoded a band at a time (held about four times: inflated,
#: repacked, decoded, cropped)
BAND_BYTES = 4 << 20
#: below this many bytes of pixels an image is simply decoded whole
WHOLE_BYTES = 32 << 20
_PNG = b"\x89PNG\r\n\x1a\n"
#: PNG colour type -> samples a pixel
_SAMPLES = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def decoded_grey(img: "PILImage.Image", data: bytes, max_side: int, budget: "Budget",
                 notes: list[str]) -> "PILImage.Image":
    """``img`` (opened from ``data``, not loaded) as a grey image whose long side is at most
    ``max_side``, decoded within ``budget``'s memory; OverBudget when it cannot be."""
    factor = max(1, math.ceil(max(img.size) / max_side))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if img.format == "JPEG":  # the decoder scales by 1/2, 1/4, 1/8: what is left, below
            img.draft("L", (math.ceil(img.size[0] / factor), math.ceil(img.size[1] / factor)))
            factor = max(1, math.ceil(max(img.size) / max_side))
        if img.format == "PNG" and _pixel_bytes(img) > WHOLE_BYTES and _banded(data):
            out = _png_in_bands(data, factor, budget)
        else:
            out = _whole(img, factor, budget)
    for w in caught:
        if not issubclass(w.category, _bomb_warning()):  # the pixel limit is ours, checked before
            note = f"{' '.join(str(w.message).split())}"[:150]
            if note not in notes:
                notes.append(note)
    if max(out.size) > max_side:
        out.thumbnail((max_side, max_side))
    return out


def _bomb_warning() -> type:
    from PIL import Image

    return Image.DecompressionBombWarning


def _pixel_bytes(img) -> int:
    """What Pillow holds for ``img`` decoded whole: 1 byte a pixel for grey and palette
    images, 4 for colour (Pillow keeps RGB in 4 bytes too), 2 or 4 for 16/32-bit grey."""
    per = 1 if img.mode in ("1", "L", "P") else 2 if img.mode.startswith("I;16") else 4
    return img.size[0] * img.size[1] * per


def _whole(img, factor: int, budget: "Budget"):
    """Decoded whole, its pixels (and the grey copy) held against the budget first."""
    cost = _pixel_bytes(img) + (img.size[0] * img.size[1] if img.mode != "L" else 0)  # and its grey copy
    budget.hold(cost, f"({img.size[0]}x{img.size[1]} {img.mode} pixels, decoded)")
    try:
        img.load()
        grey = _grey(img)
        del img
        return grey.reduce(factor) if factor > 1 and grey.mode in ("L", "1") else grey
    finally:
        budget.release(cost)


def _grey(img):
    """Grey, a transparent background read as white (as a viewer shows it)."""
    from PIL import Image

    if img.mode == "P":
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    if img.mode in ("RGBA", "LA"):
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        white.alpha_composite(rgba)
        return white.convert("L")
    return img if img.mode == "L" else img.convert("L")


def _chunks(data: bytes):
    """(type, payload) of each PNG chunk; stops at IEND or at the end of the data."""
    at = len(_PNG)
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        yield kind, data[at + 8:at + 8 + length]
        if kind == b"IEND":
            return
        at += 12 + length


def _banded(data: bytes) -> bool:
    """Whether the PNG can be decoded in bands: 8 bits a sample, not interlaced."""
    if not data.startswith(_PNG):
        return False
    kind, ihdr = next(_chunks(data), (b"", b""))
    if kind != b"IHDR" or len(ihdr) != 13:
        return False
    _, _, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", ihdr)
    return depth == 8 and colour in _SAMPLES and interlace == 0


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def _png_in_bands(data: bytes, factor: int, budget: "Budget"):
    """The PNG grey and reduced by ``factor``, decoded ``BAND_BYTES`` of rows at a time."""
    from PIL import Image

    chunks = list((k, p) for k, p in _chunks(data) if k != b"IDAT")  # IDAT is streamed below
    ihdr = dict(chunks)[b"IHDR"]
    width, height, _, colour, _, _, _ = struct.unpack(">IIBBBBB", ihdr)
    keep = b"".join(_chunk(k, p) for k, p in chunks if k in (b"PLTE", b"tRNS"))
    stride = width * _SAMPLES[colour]
    rows_per_band = max(factor, (BAND_BYTES // (stride + 1)) // factor * factor)
    out = Image.new("L", (math.ceil(width / factor), math.ceil(height / factor)), 255)
    budget.hold(out.size[0] * out.size[1] + 4 * rows_per_band * (stride + 1), "(decoded in bands)")
    inflate = zlib.decompressobj()
    idat = (p for k, p in _chunks(data) if k == b"IDAT")
    pending = b""
    above: bytes | None = None  # the last row of the band before, unfiltered
    y = 0
    while y < height:
        rows = min(rows_per_band, height - y)
        need = rows * (stride + 1)
        while len(pending) < need:  # never inflate more than the band asks for
            source = inflate.unconsumed_tail or next(idat, None)
            if source is None:
                break
            pending += inflate.decompress(source, need - len(pending))
        band_raw, pending = pending[:need], pending[need:]
        if len(band_raw) < need:
            raise _truncated()
        raw = (b"\x00" + above + band_raw) if above is not None else band_raw
        head = struct.pack(">IIBBBBB", width, rows + (above is not None), 8, colour, 0, 0, 0)
        band = Image.open(io.BytesIO(_PNG + _chunk(b"IHDR", head) + keep + _chunk(b"IDAT", zlib.compress(raw, 0))
                                     + _chunk(b"IEND", b"")))
        band.load()
        if above is not None:
            band = band.crop((0, 1, width, rows + 1))
        above = _row_bytes(band, rows - 1)
        grey = _grey(band)
        out.paste(grey.reduce(factor) if factor > 1 else grey, (0, y // factor))
        y += rows
        budget.check_time()
    return out


def _row_bytes(band, row: int) -> bytes:
    """One row of a decoded band as the PNG's unfiltered bytes (8 bits a sample)."""
    line = band.crop((0, row, band.size[0], row + 1))
    return line.tobytes()


def _truncated():
    from .extract_base import ExtractionError

    return ExtractionError("image is truncated: its pixel data ends early")

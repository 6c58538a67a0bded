"""OCR on the CPU: the text of an image (a photo of a page, a scanned PDF page) through
Tesseract, the engine Debian packages with its trained models (``tesseract-ocr`` and one
``tesseract-ocr-LANG`` per language): nothing is downloaded at index time.

Why Tesseract (measured in ``bench/ocr.py``, numbers in docs/indexing.md): on rendered pages in
German, French, Spanish, Russian, Chinese and Japanese it reads the Latin and Cyrillic pages
almost exactly and the CJK ones well with their language packs; its models are OS packages a
Pi gets from apt (about 45 MB for the seven languages); and it runs as a separate process, so
each page gets a hard time budget (:data:`PAGE_TIMEOUT_S`, the process is killed past it) and a
memory budget (:data:`PAGE_MEMORY_BYTES`, an address-space limit on that process) without any
risk to the indexer. The ``tesseract`` program is driven directly (pytesseract does the same
with a temporary file and no memory limit).

Languages: a page's language is unknown, so every installed one of :data:`LANGUAGES` goes into
a first run (``-l eng+deu+...``); that run favours English and drops accents ("fievre" for
"fièvre"). When the text it read is in another installed language, the page is read again with
that language first (``-l fra+eng``), and every accent is kept (:func:`page_language`; figures
in docs/indexing.md). The next page of the same document is read in that language at once (one
run, faster than the first), and again with all of them only when its text is in another.

Images are bounded before they are decoded: more than :data:`MAX_PIXELS` pixels (a
"decompression bomb", huge dimensions in a tiny file) is refused from the header alone; a large
photo is scaled down to :data:`MAX_SIDE` pixels on its long side, enough for print, as it is
decoded and within the document's memory budget (:mod:`hefsearch.readers.image_decode`). Each
page read is a page of the document's OCR budget (:mod:`hefsearch.readers.budget`)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from functools import lru_cache

from .extract_base import ExtractionError

#: Tesseract language packs used when installed (Debian: tesseract-ocr-<name with '-'>)
LANGUAGES = ("eng", "deu", "fra", "spa", "rus", "chi_sim", "jpn")
#: seconds one page may take before it is given up (a Pi 5 takes ~4x this machine)
PAGE_TIMEOUT_S = 120.0
#: address space of the OCR process for one page
PAGE_MEMORY_BYTES = 1536 * 2**20
#: pixels an image may have (a 600 dpi A3 scan is 70 MP); more is refused unread
MAX_PIXELS = 100_000_000
#: long side an image is scaled to before OCR (300 dpi A4 is 3508)
MAX_SIDE = 4000
#: what to do when OCR is not installed
INSTALL_HINT = ("install Tesseract to read scanned pages and images: sudo apt install tesseract-ocr "
                "tesseract-ocr-deu tesseract-ocr-fra (one package per language), then index again")


class OcrMissing(ExtractionError):
    """Tesseract is not installed; the page is reported once per run with how to install it."""


@lru_cache(maxsize=1)
def _tesseract() -> tuple[str | None, tuple[str, ...]]:
    exe = shutil.which("tesseract")
    if exe is None:
        return None, ()
    try:
        out = subprocess.run([exe, "--list-langs"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None, ()
    have = {line.strip() for line in out.splitlines()[1:]}
    return exe, tuple(lang for lang in LANGUAGES if lang in have)


def available() -> bool:
    exe, langs = _tesseract()
    return exe is not None and bool(langs)


def missing_error() -> OcrMissing:
    return OcrMissing("needs OCR, and Tesseract is not installed; not indexed", hint=INSTALL_HINT)


def checked_image(data: bytes, what: str = "image"):
    """The image opened and checked: its pixel count read from the header before decoding
    (Pillow's own warning about it is not shown: this check is the product's)."""
    import warnings

    from PIL import Image

    try:
        with _pillow_limit(), warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
            width, height = img.size
    except ExtractionError:
        raise
    except Image.DecompressionBombError:
        raise ExtractionError(f"{what} is a decompression bomb (more pixels than Pillow allows); refusing") from None
    except Exception as e:  # noqa: BLE001 - hostile input
        raise ExtractionError(f"{what} cannot be read: {type(e).__name__}: {e}"[:200]) from None
    if width * height > MAX_PIXELS:
        raise ExtractionError(f"{what} is {width}x{height} pixels (a decompression bomb or a poster); refusing "
                              f"(limit {MAX_PIXELS // 1_000_000} MP)")
    return img


class _pillow_limit:
    """Pillow's own bomb check at our limit while we open an image."""

    def __enter__(self):
        from PIL import Image

        self.old = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = MAX_PIXELS // 2  # Pillow errors at twice this

    def __exit__(self, *exc):
        from PIL import Image

        Image.MAX_IMAGE_PIXELS = self.old


def ocr_image(data: bytes, what: str = "image", *, timeout_s: float | None = None,
              memory_bytes: int | None = None) -> str:
    """The text OCR reads in an image's bytes (PNG, JPEG, TIFF, WebP: first frame), within
    the page's budget (:data:`PAGE_TIMEOUT_S`, :data:`PAGE_MEMORY_BYTES` unless given) and,
    decoding it, the document's (:mod:`hefsearch.readers.budget`: its memory, its notes)."""
    from .budget import OverBudget, reading
    from .image_decode import decoded_grey

    img = checked_image(data, what)  # a bomb is refused whether OCR is installed or not
    exe, langs = _tesseract()
    if exe is None or not langs:
        raise missing_error()
    with reading(what, ocr=True) as budget:
        try:
            with _pillow_limit():
                img.seek(0)
                grey = decoded_grey(img, data, MAX_SIDE, budget, budget.notes)
                if img.size[0] * img.size[1] > MAX_PIXELS // 2:  # where Pillow would warn: said our way
                    budget.notes.append(f"{what} is {img.size[0]:,}x{img.size[1]:,} pixels, near the "
                                        f"{MAX_PIXELS // 1_000_000} MP limit for images; read reduced to "
                                        f"{grey.size[0]:,}x{grey.size[1]:,}")
                png = io.BytesIO()
                grey.save(png, format="PNG")
                del img, grey
        except (OverBudget, ExtractionError):
            raise
        except Exception as e:  # noqa: BLE001 - truncated or corrupt pixel data
            raise ExtractionError(f"{what} cannot be decoded: {type(e).__name__}: {e}"[:200]) from None

    def read(packs: tuple[str, ...]) -> str:
        return run_tesseract(exe, packs, png.getvalue(), what, timeout_s or PAGE_TIMEOUT_S,
                             memory_bytes or PAGE_MEMORY_BYTES)

    def own_first(pack: str) -> tuple[str, ...]:
        return (pack, *(x for x in langs[:1] if x != pack))

    known = budget.ocr_language  # the document's previous page: most likely this one's language too
    if known is not None:
        text = read(own_first(known))
        if page_language(text, langs) in (known, None):
            return text
    text = read(langs)
    budget.ocr_language = own = page_language(text, langs)
    return text if own is None or own == langs[0] else read(own_first(own))


#: ISO 639-1 code (what :func:`hefsearch.embed.language.identify` says) -> Tesseract language pack
_PACKS = {"en": "eng", "de": "deu", "fr": "fra", "es": "spa", "ru": "rus", "zh": "chi_sim", "ja": "jpn"}


def page_language(text: str, installed: tuple[str, ...]) -> str | None:
    """The installed language pack of the text a run read, when its language is known."""
    from hefsearch.embed.language import identify

    pack = _PACKS.get(identify(text) or "")
    return pack if pack in installed else None


def run_tesseract(exe: str, langs: tuple[str, ...], png: bytes, what: str, timeout_s: float,
                  memory_bytes: int) -> str:
    """One ``tesseract stdin stdout`` run under the page's time and memory budget."""
    def limits() -> None:  # pragma: no cover - runs in the child
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}  # one core per page: the encoder has the others
    try:
        done = subprocess.run([exe, "stdin", "stdout", "-l", "+".join(langs), "--psm", "3"], input=png,
                              capture_output=True, timeout=timeout_s, env=env,
                              preexec_fn=limits if os.name == "posix" else None)
    except subprocess.TimeoutExpired:
        raise ExtractionError(f"OCR of {what} took more than {timeout_s:.0f} s; given up") from None
    except OSError as e:
        raise ExtractionError(f"OCR could not start: {e}") from None
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ExtractionError(f"OCR of {what} failed (out of its {memory_bytes // 2**20} MB budget or a bad "
                              f"image): {err[-1][:150] if err else done.returncode}")
    return _clean(done.stdout.decode("utf-8", "replace"))


def _clean(text: str) -> str:
    """Tesseract's text: form feeds dropped, runs of blank lines made one, CJK glyphs rejoined
    (it puts a space between every two Han/kana characters)."""
    import re

    text = text.replace("\f", "").strip()
    text = re.sub(r"(?<=[\u3040-\u30ff\u3400-\u9fff\uff00-\uffef]) (?=[\u3040-\u30ff\u3400-\u9fff\uff00-\uffef])",
                  "", text)
    return re.sub(r"\n\s*\n\s*", "\n\n", text)

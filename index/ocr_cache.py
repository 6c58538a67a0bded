"""OCR work kept as it goes: the text Tesseract read in each page image, stored under the
library (``ocr-pages/<sha256 of the image>.txt``, written atomically) the moment the page is
read. OCR takes seconds a page, so a long scan is hours of it; a run stopped in the middle
(Ctrl+C, SIGTERM, kill -9, a power cut) keeps the pages read, and the next run reads them from
here and goes on with the first page not read. The folder is emptied when a run over the
library's folders completes (every document OCR'd by then is committed).

The key is the image's bytes, so a page met again (the same scan copied, or resent) is read
once; a page read before a language pack was installed keeps that reading until the cache is
emptied (the next completed run)."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from pathlib import Path
from typing import Callable

from hefsearch.base.atomic_write import write_bytes_atomic

#: the cache's folder inside the library
FOLDER = "ocr-pages"


class OcrPageCache:
    """Page texts by image hash, in ``library_path / FOLDER``."""

    def __init__(self, library_path: Path):
        self.folder = Path(library_path) / FOLDER

    def reading(self, ocr: Callable[[bytes, str], str]) -> Callable[[bytes, str], str]:
        """``ocr`` (image bytes, what -> text) with each page's text looked up first and kept
        once read; a page that fails is not kept (tried again next time)."""

        def read(image: bytes, what: str) -> str:
            key = self.folder / f"{hashlib.sha256(image).hexdigest()}.txt"
            with contextlib.suppress(OSError):
                return key.read_text(encoding="utf-8")
            text = ocr(image, what)
            with contextlib.suppress(OSError):  # a cache that cannot be written costs only time
                self.folder.mkdir(exist_ok=True)
                write_bytes_atomic(key, text.encode("utf-8"))
            return text

        return read

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

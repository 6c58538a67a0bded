"""``hefsearch doctor``'s OCR line: is Tesseract there (its version), which of the languages
hefsearch reads scans in are installed, and what that means for scanned pages and images.

Reads what the indexer reads (``tesseract --version`` and ``--list-langs``, the languages of
:data:`hefsearch.readers.ocr.LANGUAGES`), so the line says what the next ``index`` run will do.
"""

from __future__ import annotations

import shutil
import subprocess

from .doctor import OK, WARN, Check

def _package(lang: str) -> str:
    """Debian's package of a Tesseract language (``chi_sim``: ``tesseract-ocr-chi-sim``)."""
    return "tesseract-ocr-" + lang.replace("_", "-")


def _run(exe: str, *args: str) -> str:
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (done.stdout or "") + (done.stderr or "")  # older Tesseracts print --version on stderr


def check_ocr() -> Check:
    from hefsearch.readers.ocr import LANGUAGES

    exe = shutil.which("tesseract")
    every = " ".join(_package(lang) for lang in LANGUAGES)
    if exe is None:
        return Check("OCR", WARN, "Tesseract is not installed: scanned PDF pages and images are not read "
                     "(each run lists them as needing OCR); the rest is indexed",
                     f"sudo apt install tesseract-ocr tesseract-ocr-eng (and one package per language you scan: "
                     f"{every}), then run 'hefsearch index' again")
    version_lines = _run(exe, "--version").split("\n")
    version = next((ln.strip() for ln in version_lines if ln.strip().lower().startswith("tesseract")), "Tesseract")
    listed = {ln.strip() for ln in _run(exe, "--list-langs").splitlines()[1:] if ln.strip()}
    used = [lang for lang in LANGUAGES if lang in listed]
    missing = [lang for lang in LANGUAGES if lang not in listed]
    if not used:
        return Check("OCR", WARN, f"{version} at {exe}, but none of the languages hefsearch reads scans in is "
                     f"installed ({', '.join(LANGUAGES)}; installed: {', '.join(sorted(listed)) or 'none'}): "
                     "scanned pages and images are not read",
                     f"sudo apt install tesseract-ocr-eng (and the languages you scan: {every})")
    detail = (f"{version}; scanned pages and images are read in {'+'.join(used)} (all in one pass); "
              + (f"not installed: {', '.join(missing)} (pages in those languages are read with the wrong "
                 f"alphabet or spelling: sudo apt install {' '.join(_package(m) for m in missing)})"
                 if missing else "every language hefsearch uses is installed"))
    return Check("OCR", OK, detail)

"""doctor's OCR line against a stand-in ``tesseract`` program on PATH (a shell script printing
what Debian's Tesseract 5 prints for --version and --list-langs), and with none at all."""

from __future__ import annotations

import stat

import pytest

from hefsearch.diagnose.doctor import OK, WARN, run_doctor
from hefsearch.diagnose.ocr_check import check_ocr


def fake_tesseract(folder, langs: list[str]) -> None:
    script = folder / "tesseract"
    listing = "\\n".join(langs)
    script.write_text("#!/bin/sh\n"
                      'if [ "$1" = "--version" ]; then echo "tesseract 5.5.0"; echo " leptonica-1.84.1"; exit 0; fi\n'
                      f'if [ "$1" = "--list-langs" ]; then printf "List of available languages in \\"/usr/share/tesseract-ocr/5/tessdata/\\" ({len(langs)}):\\n{listing}\\n"; exit 0; fi\n'
                      "exit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def only(tmp_path, monkeypatch):
    """PATH holding only tmp_path (the script's shell is named by its absolute #! line; echo and
    printf are shell builtins)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    return tmp_path


def test_tesseract_with_some_languages_names_the_version_and_what_is_missing(only):
    fake_tesseract(only, ["eng", "deu", "osd"])
    c = check_ocr()
    assert c.status == OK and "tesseract 5.5.0" in c.detail
    assert "read in eng+deu" in c.detail
    assert "not installed: fra, spa, rus, chi_sim, jpn" in c.detail
    assert "sudo apt install tesseract-ocr-fra tesseract-ocr-spa tesseract-ocr-rus tesseract-ocr-chi-sim" in c.detail


def test_no_tesseract_warns_that_scans_are_not_read_and_how_to_install(only):
    c = check_ocr()
    assert c.status == WARN and "not installed" in c.detail and "scanned" in c.detail
    assert c.fix.startswith("sudo apt install tesseract-ocr tesseract-ocr-eng")


def test_tesseract_without_a_language_hefsearch_uses_warns(only):
    fake_tesseract(only, ["ita", "osd"])
    c = check_ocr()
    assert c.status == WARN and "ita" in c.detail and "not read" in c.detail
    assert "tesseract-ocr-eng" in c.fix


def test_doctor_reports_the_ocr_line(only, tmp_path):
    fake_tesseract(only, ["eng"])
    names = [c.name for c in run_doctor(library=tmp_path / "nolib").checks]
    assert "OCR" in names

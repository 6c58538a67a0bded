"""OCR: accuracy on rendered multilingual pages, seconds per page and peak memory of the OCR
engines hefsearch could use, and OCR pages per second beside the text-layer rate.

    python bench/ocr.py [--repeats 3] [--rapidocr-path DIR] [--pages 6]

Pages are rendered with Pillow in fonts from Debian's packages (fonts-dejavu-core,
fonts-noto-cjk), 34 px letters on a 1700 px wide page (print at 200 dpi), one page per
language: English, German, French, Spanish, Russian, Chinese, Japanese.

- **Accuracy**: characters right, as ``difflib``'s ratio between the page's text and what OCR
  read, whitespace removed (1.00: every character).
- **Engines**: Tesseract (Debian's ``tesseract-ocr`` and its language packs, all seven
  languages in one run, as :mod:`hefsearch.readers.ocr` runs it; peak memory: the child's max
  RSS) and, when ``--rapidocr-path`` names a folder where ``rapidocr-onnxruntime`` is installed
  (``pip install --target DIR rapidocr-onnxruntime``), RapidOCR with the models in its wheel
  (peak memory: this process's growth; measured in a child).
- **Rates**: ``hefsearch``'s own extraction of ``--pages`` scanned PDF pages (image only, read
  by OCR) against the same pages as a text-layer PDF, medians of ``--repeats`` runs, with the
  machine's load average printed beside them.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hefsearch.bench.harness import tests_importable


PAGES = {
    "en": ["The invoice lists the amount due and the payment", "deadline of the fourteenth of March.",
           "Please transfer the money to the account below."],
    "de": ["Sehr geehrte Frau Müller, die Rechnung über", "268,50 EUR für die Wartung Ihrer Heizung ist",
           "noch offen. Bitte überweisen Sie den Betrag."],
    "fr": ["Madame, nous vous remercions de votre lettre du", "douze février concernant la facture de l'été.",
           "Veuillez agréer nos salutations distinguées."],
    "es": ["Estimado señor, le enviamos el recibo del año", "pasado con la información de su pensión.",
           "¿Podría confirmar la dirección de envío?"],
    "ru": ["Уважаемый клиент, счёт за электроэнергию", "за прошлый месяц составляет тысячу рублей.",
           "Пожалуйста, оплатите его до конца недели."],
    "zh": ["尊敬的客户，您上个月的电费账单", "金额为一千二百元，请在本周末之前", "通过银行转账完成付款。谢谢合作。"],
    "ja": ["お客様各位、先月の電気料金の請求書を", "お送りします。今週末までに銀行振込で", "お支払いください。よろしくお願いします。"],
}
CJK = {"zh", "ja"}


def accuracy(truth: str, read: str) -> float:
    a, b = "".join(truth.split()), "".join(read.split())
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def rendered() -> dict[str, bytes]:
    tests_importable()
    from tests.support.container_builders import render_page

    return {lang: render_page(lines, cjk=lang in CJK) for lang, lines in PAGES.items()}


def tesseract_run(png: bytes) -> tuple[str, float, int]:
    """(text, seconds, peak KB of the tesseract child) through hefsearch's OCR path."""
    from hefsearch.readers import ocr

    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    text = ocr.ocr_image(png)
    seconds = time.perf_counter() - t
    return text, seconds, max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def rapid_child(folder: str, pngs: str) -> None:
    """In a fresh process: RapidOCR on each page; prints JSON (text, seconds) and the peak RSS."""
    sys.path.append(folder)
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR()
    out = {}
    for path in sorted(Path(pngs).glob("*.png")):
        t = time.perf_counter()
        result, _ = engine(str(path))
        out[path.stem] = ["\n".join(r[1] for r in result or []), time.perf_counter() - t]
    out["_peak_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(out))


def engines_table(pages: dict[str, bytes], repeats: int, rapid: str | None) -> None:
    from hefsearch.readers import ocr

    rows: dict[str, dict[str, tuple[float, float]]] = {}
    peaks: dict[str, int] = {}
    if ocr.available():
        rows["tesseract"] = {}
        for lang, png in pages.items():
            runs = [tesseract_run(png) for _ in range(repeats)]
            truth = "\n".join(PAGES[lang])
            rows["tesseract"][lang] = (accuracy(truth, runs[-1][0]), statistics.median(r[1] for r in runs))
            peaks["tesseract"] = max(peaks.get("tesseract", 0), max(r[2] for r in runs))
    else:
        print("tesseract: not installed (" + ocr.INSTALL_HINT + ")")
    if rapid:
        with tempfile.TemporaryDirectory() as tmp:
            for lang, png in pages.items():
                Path(tmp, f"{lang}.png").write_bytes(png)
            runs = []
            for _ in range(repeats):
                done = subprocess.run([sys.executable, __file__, "--rapid-child", rapid, tmp], capture_output=True,
                                      text=True, timeout=600)
                if done.returncode != 0:
                    print("rapidocr failed:", done.stderr.strip().splitlines()[-1:])
                    break
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            if runs:
                rows["rapidocr"] = {lang: (accuracy("\n".join(PAGES[lang]), runs[-1][lang][0]),
                                           statistics.median(r[lang][1] for r in runs)) for lang in pages}
                peaks["rapidocr"] = max(r["_peak_kb"] for r in runs)
    langs = list(pages)
    print(f"\n{'engine':<10} " + " ".join(f"{lang:>11}" for lang in langs) + f" {'peak MB':>8}")
    print(f"{'':<10} " + " ".join(f"{'acc   s/pg':>11}" for _ in langs))
    for name, by_lang in rows.items():
        cells = " ".join(f"{by_lang[lang][0]:5.2f} {by_lang[lang][1]:5.2f}" for lang in langs)
        print(f"{name:<10} {cells} {peaks[name] / 1024:8.0f}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


def rates(pages_n: int, repeats: int) -> None:
    """hefsearch's extraction: scanned pages through OCR vs the same text as a text layer."""
    from hefsearch.readers import ocr
    from hefsearch.readers.extract_pdf import extract_pdf, extract_pdf_ocr
    tests_importable()
    from tests.support.container_builders import make_image_pdf
    from tests.support.document_builders import make_pdf

    lines = PAGES["en"] + PAGES["de"]
    text_pdf = make_pdf(["\n".join(lines)] * pages_n)
    scans = [make_image_pdf(lines) for _ in range(pages_n)]
    t_text, t_ocr, peak = [], [], 0
    for _ in range(repeats):
        t = time.perf_counter()
        extract_pdf(text_pdf)
        t_text.append(time.perf_counter() - t)
        if ocr.available():
            t = time.perf_counter()
            for scan in scans:
                extract_pdf_ocr(scan, None, ocr.ocr_image, [])
            t_ocr.append(time.perf_counter() - t)
            peak = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores; "
          f"{pages_n} pages, median of {repeats}")
    text_rate = pages_n / statistics.median(t_text)
    print(f"text layer (pypdf):          {text_rate:10.1f} pages/s")
    if t_ocr:
        ocr_rate = pages_n / statistics.median(t_ocr)
        print(f"OCR (Tesseract, 7 languages): {ocr_rate:9.2f} pages/s   peak {peak / 1024:.0f} MB (OCR process)   "
              f"text layer / OCR: {text_rate / ocr_rate:.0f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pages", type=int, default=6)
    ap.add_argument("--rapidocr-path", help="a folder where rapidocr-onnxruntime is installed (pip --target)")
    args = ap.parse_args()
    rates(args.pages, args.repeats)  # first: the peak of the OCR children is Tesseract's alone
    engines_table(rendered(), args.repeats, args.rapidocr_path)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rapid-child":
        rapid_child(sys.argv[2], sys.argv[3])
    else:
        main()

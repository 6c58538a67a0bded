"""OCR and accents: every installed language in one run, against the page read again with its
own language first (what :func:`hefsearch.readers.ocr.ocr_image` does), in one run.

    python bench/ocr_languages.py [--repeats 3]

Pages of accented text in German, French, Spanish and Russian (and Chinese and Japanese when
Debian's fonts-noto-cjk is installed), rendered at 150 and 200 dpi (letters of 21 and 28 px) in
DejaVu Sans and DejaVu Serif. Printed per language: characters right (``difflib`` ratio,
whitespace removed, 1.00 = all), the accented words read exactly, and seconds per page
(medians of ``--repeats``) for "one run" (``-l eng+deu+fra+...``, the peer) and "own language"
(that run, then ``-l LANG+eng`` when the text is in another installed language).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from hefsearch.bench.harness import tests_importable
from hefsearch.bench.ocr import accuracy

PAGES = {
    "de": ["Die Größe der Übergänge wird gemäß Anhang geprüft.", "Für Schäden übernehmen wir keine Haftung.",
           "Bitte überweisen Sie den Betrag bis zum Fälligkeitsdatum."],
    "fr": ["La fièvre a duré trois jours; le médecin est venu.", "Valable à vie, garantie incluse, même à l'étranger.",
           "Veuillez agréer nos salutations distinguées."],
    "es": ["El niño comió piña en el año pasado.", "La información de su pensión está en el anexo.",
           "¿Podría confirmar la dirección de envío?"],
    "ru": ["Уважаемый клиент, счёт за электроэнергию", "за прошлый месяц составляет тысячу рублей.",
           "Пожалуйста, оплатите его до конца недели."],
    "zh": ["尊敬的客户，您上个月的电费账单", "金额为一千二百元，请在本周末之前"],
    "ja": ["お客様各位、先月の電気料金の請求書を", "お送りします。今週末までに銀行振込で"],
}
FONTS = {"sans": "DejaVuSans.ttf", "serif": "DejaVuSerif.ttf"}


def accented(lines: list[str]) -> list[str]:
    return [w.strip(".,;:?¿!") for line in lines for w in line.split() if any(ord(c) > 127 for c in w)]


def render(lines: list[str], size: int, font: str | None, cjk: bool) -> bytes:
    from tests.support.container_builders import render_page

    if font is None:
        return render_page(lines, cjk=cjk, size=size)
    import io

    from PIL import Image, ImageDraw, ImageFont

    face = ImageFont.truetype(f"/usr/share/fonts/truetype/dejavu/{font}", size)
    img = Image.new("L", (60 * size, 160 + len(lines) * int(size * 1.7)), 255)
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        draw.text((100, 80 + i * int(size * 1.7)), line, fill=0, font=face)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tests_importable()
    from hefsearch.readers import ocr
    from tests.support.container_builders import font_path

    exe, langs = ocr._tesseract()
    if exe is None:
        raise SystemExit("tesseract is not installed: " + ocr.INSTALL_HINT)
    print(f"installed: {'+'.join(langs)}")
    print(f"{'page':<18} {'one run: acc words s':>22} {'own language: acc words s':>27}")
    totals = {"one": [0, 0], "own": [0, 0]}
    for lang, lines in PAGES.items():
        cjk = lang in ("zh", "ja")
        if cjk and not font_path(True):
            print(f"{lang:<18} skipped: no CJK font (apt install fonts-noto-cjk)")
            continue
        for size in (21, 28):
            for style, font in ({"cjk": None} if cjk else FONTS).items():
                png = render(lines, size, font, cjk)
                truth, words = "\n".join(lines), accented(lines)
                cells = []
                for key, read in (("one", lambda: ocr.run_tesseract(exe, langs, png, "page", 120, 1536 << 20)),
                                  ("own", lambda: ocr.ocr_image(png))):
                    runs = []
                    for _ in range(args.repeats):
                        t = time.perf_counter()
                        text = read()
                        runs.append(time.perf_counter() - t)
                    kept = sum(w in text for w in words)
                    totals[key][0] += kept
                    totals[key][1] += len(words)
                    cells.append(f"{accuracy(truth, text):5.3f} {kept:2d}/{len(words):<2d} {statistics.median(runs):5.2f}")
                print(f"{lang} {size}px {style:<9} {cells[0]:>22} {cells[1]:>27}")
    for key, (kept, n) in totals.items():
        print(f"accented words read exactly, {key}: {kept}/{n}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

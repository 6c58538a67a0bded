"""Write the PDF and DOCX documents of the sample corpus (data/sample-corpus/).

The .txt, .md and .html documents are committed as they are; the binary formats are generated
here from the texts below so that they can be reviewed and regenerated. PDF text stays in
Latin-script languages (the PDF core fonts cover Latin-1 only).

    pip install fpdf2            # only for this script; hefsearch itself does not need it
    python scripts/make_sample_corpus.py [--out data/sample-corpus]
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

FIXED_DATE = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)  # reproducible metadata

# Each PDF: title and a list of pages, each page a list of paragraphs.
PDFS: dict[str, tuple[str, list[list[str]]]] = {
    "photosynthesis.pdf": (
        "Photosynthesis: how plants make sugar from light",
        [
            [
                "Photosynthesis is the process by which green plants, algae and some bacteria "
                "turn light energy into chemical energy. It takes place mainly in the leaves, "
                "inside small structures called chloroplasts. Chloroplasts contain chlorophyll, "
                "a green pigment that absorbs red and blue light and reflects green light.",
                "The overall reaction is: 6 CO2 + 6 H2O + light -> C6H12O6 + 6 O2. Carbon "
                "dioxide enters the leaf through tiny pores called stomata, water comes up from "
                "the roots, and the oxygen produced leaves the plant as a by-product.",
            ],
            [
                "The light-dependent reactions happen in the thylakoid membranes. Light splits "
                "water molecules, releasing oxygen, and the energy is stored in ATP and NADPH.",
                "The Calvin cycle happens in the stroma and does not need light directly. The "
                "enzyme RuBisCO fixes carbon dioxide, and ATP and NADPH from the first stage are "
                "used to build glucose. The rate of photosynthesis depends on light intensity, "
                "temperature and the concentration of carbon dioxide.",
            ],
        ],
    ),
    "zahlungserinnerung-re-7731.pdf": (
        "Zahlungserinnerung zur Rechnung RE-7731",
        [
            [
                "Sehr geehrte Frau Becker,",
                "bei der Durchsicht unserer Buchhaltung haben wir festgestellt, dass die Rechnung "
                "RE-7731 vom 3. März über 268,50 EUR für die Wartung Ihrer Heizungsanlage noch "
                "nicht beglichen ist. Sicher handelt es sich um ein Versehen.",
                "Bitte überweisen Sie den offenen Betrag innerhalb von 14 Tagen auf das unten "
                "genannte Konto und geben Sie als Verwendungszweck die Rechnungsnummer RE-7731 "
                "an. Sollte die Zahlung bereits unterwegs sein, betrachten Sie dieses Schreiben "
                "bitte als gegenstandslos.",
                "Erfolgt bis zum Ablauf der Frist kein Zahlungseingang, müssen wir Ihnen mit der "
                "ersten Mahnung eine Mahngebühr von 5,00 EUR berechnen.",
                "Mit freundlichen Grüßen, Haustechnik Schulze GmbH, Buchhaltung",
            ],
        ],
    ),
    "tax-deadlines-form-w4711.pdf": (
        "Estimated tax payments and Form W-4711",
        [
            [
                "Self-employed people and landlords usually pay income tax in advance, in four "
                "estimated instalments per year. The due dates are 15 April, 15 June, "
                "15 September and 15 January of the following year. If a due date falls on a "
                "weekend or a public holiday, the payment is due on the next working day.",
                "Each instalment is reported on Form W-4711, the quarterly voucher. Enter your "
                "taxpayer number, the quarter and the amount paid. Keep a copy of every Form "
                "W-4711 with your records for at least six years.",
            ],
            [
                "If you pay an instalment late or pay too little, interest is charged from the "
                "due date until the day the payment arrives. You can avoid the charge if this "
                "year's instalments add up to at least as much as last year's total tax.",
                "The annual return is due on 30 April. An extension of up to six months can be "
                "requested before the deadline, but it only extends the time to file, not the "
                "time to pay: any tax still owed must be paid by 30 April.",
            ],
        ],
    ),
}

# Each DOCX: title, paragraphs, optional table (first row = header).
DOCXS: dict[str, tuple[str, list[str], list[list[str]] | None]] = {
    "mietvertrag-kaution.docx": (
        "Mietvertrag: Kaution, Kündigung und Nebenkosten",
        [
            "Zwischen Vermieterin Helga Vogt und Mieter Jonas Krüger wird ein unbefristeter "
            "Mietvertrag über die Dreizimmerwohnung im zweiten Obergeschoss der Lindenstraße 7 "
            "in Leipzig geschlossen.",
            "Die Mietkaution beträgt drei Nettokaltmieten. Sie darf in drei gleichen monatlichen "
            "Raten gezahlt werden und wird getrennt vom Vermögen der Vermieterin auf einem "
            "Kautionskonto angelegt. Nach dem Auszug wird sie mit Zinsen zurückgezahlt, sobald "
            "keine Ansprüche mehr offen sind.",
            "Der Mieter kann mit einer Frist von drei Monaten zum Monatsende kündigen. Die "
            "Kündigung muss schriftlich erfolgen und von allen Mietern unterschrieben sein.",
            "Über die Nebenkosten wird einmal im Jahr abgerechnet. Die Abrechnung muss dem "
            "Mieter spätestens zwölf Monate nach Ende des Abrechnungszeitraums zugehen.",
        ],
        [
            ["Posten", "Betrag pro Monat"],
            ["Nettokaltmiete", "780 EUR"],
            ["Vorauszahlung Nebenkosten", "190 EUR"],
            ["Stellplatz", "40 EUR"],
        ],
    ),
    "doctor-appointment.docx": (
        "Your appointment with Dr. Patel",
        [
            "Your appointment at Riverside Medical Practice is on Tuesday at 8:30 in the morning "
            "with Dr. Anika Patel. Please arrive ten minutes early to update your details at the "
            "reception desk.",
            "The doctor has asked for a fasting blood test. Do not eat anything for 10 to 12 "
            "hours before the appointment; you may drink water and take your usual medicines "
            "unless you were told otherwise.",
            "Please bring your health insurance card, a list of the medicines you take, and any "
            "letters from the hospital since your last visit.",
            "If you cannot come, cancel or move the appointment at least 24 hours in advance by "
            "phone or in the patient app, so that another patient can have the slot.",
        ],
        None,
    ),
}


def write_pdf(path: Path, title: str, pages: list[list[str]]) -> None:
    try:
        from fpdf import FPDF
    except ImportError:
        sys.exit("this script needs fpdf2 to write PDFs: pip install fpdf2")
    pdf = FPDF()
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_title(title)
    pdf.set_auto_page_break(True, margin=20)
    for number, paragraphs in enumerate(pages):
        pdf.add_page()
        if number == 0:
            pdf.set_font("Helvetica", style="B", size=15)
            pdf.multi_cell(0, 8, title)
            pdf.ln(4)
        pdf.set_font("Helvetica", size=11)
        for paragraph in paragraphs:
            pdf.multi_cell(0, 6, paragraph)
            pdf.ln(3)
    pdf.output(str(path))


def write_docx(path: Path, title: str, paragraphs: list[str], table: list[list[str]] | None) -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.core_properties.created = FIXED_DATE
    document.core_properties.modified = FIXED_DATE
    document.add_heading(title, level=1)
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    document.save(str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parent.parent / "data" / "sample-corpus"
    parser.add_argument("--out", type=Path, default=default, help="corpus folder (default: %(default)s)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (title, pages) in PDFS.items():
        write_pdf(args.out / name, title, pages)
        print(f"wrote {args.out / name}")
    for name, (title, paragraphs, table) in DOCXS.items():
        write_docx(args.out / name, title, paragraphs, table)
        print(f"wrote {args.out / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Write the PDF and DOCX documents of the sample corpus (data/sample-corpus/), and one of
each kind read since: mail (.eml, .mbox), an EPUB, ODT/ODS/ODP, PPTX, XLSX, a scanned PDF (an
image, no text layer) and a photo of a printed page (PNG), the last two read by OCR.

The .txt, .md and .html documents are committed as they are; the binary formats are generated
here from the texts below so that they can be reviewed and regenerated. PDF text stays in
Latin-script languages (the PDF core fonts cover Latin-1 only). The scanned pages are rendered
in DejaVu Sans (Debian's fonts-dejavu-core).

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


PARAGRAPHS = {
    "mail-de": "Liebe Anna, anbei die Abrechnung der Nebenkosten für das Jahr 2023. Die Heizkosten sind "
               "um zwölf Prozent gestiegen, weil der Gaspreis im Winter höher war. Die Wasserkosten sind "
               "fast gleich geblieben. Bitte überweise die Nachzahlung von 143,20 Euro bis Ende März auf das "
               "bekannte Konto. Wenn du Fragen zur Abrechnung hast, ruf mich gern an. Viele Grüße, Jörg",
    "mail-en": "Hi team, the quarterly newsletter is out. Our community garden harvested two hundred kilos "
               "of tomatoes this summer, and the new rainwater tank saved about four thousand litres of "
               "tap water. Volunteers are needed for the autumn planting day on the twelfth of October.",
    "mail-fr": "Bonjour à tous, la réunion du conseil de quartier aura lieu jeudi prochain à la mairie. "
               "Nous parlerons du nouveau marché de producteurs, de la piste cyclable de la rue principale "
               "et du budget participatif. Merci de confirmer votre présence avant mardi soir.",
    "book-1": "Composting turns kitchen scraps and garden waste into dark, crumbly soil. Mix green material, "
              "such as vegetable peelings and grass clippings, with brown material, such as dry leaves and "
              "cardboard, in roughly equal parts.",
    "book-2": "Keep the heap as damp as a wrung-out sponge and turn it every two weeks so that air reaches "
              "the middle. A well-managed heap gets warm within days and is ready in three to six months. "
              "Never add meat, dairy or diseased plants.",
    "odt": "Protokoll der Hausversammlung vom 14. Februar. Anwesend waren zwölf von sechzehn Parteien. "
           "Beschlossen wurde die Erneuerung der Fahrradständer im Hof und ein neuer Reinigungsplan für "
           "das Treppenhaus. Die Kosten von 1.800 Euro werden nach Wohnfläche verteilt. Der Antrag auf "
           "eine Photovoltaikanlage auf dem Dach wird bei der nächsten Versammlung mit drei Angeboten "
           "erneut besprochen. Nächster Termin: 9. Mai um 19 Uhr im Gemeinschaftsraum.",
}
SCAN_LINES = ["CITY OF SPRINGFIELD - WATER DEPARTMENT", "", "NOTICE OF SCHEDULED MAINTENANCE",
              "The water supply on Maple Street will be", "interrupted on Tuesday from 8 am to 2 pm",
              "while the main pipe is replaced. Please", "store drinking water in advance and keep",
              "taps closed during the work. After the", "supply returns, let the water run for two",
              "minutes until it is clear. Questions:", "call the service line 555-0142 on weekdays."]
PHOTO_LINES = ["KASSENBON - BÄCKEREI SONNENSCHEIN", "", "2 Roggenbrot            je 3,80   7,60",
               "6 Brötchen               je 0,45   2,70", "1 Apfelkuchen, Stück          2,90",
               "1 Kaffee, groß                   3,20", "", "SUMME EUR                       16,40",
               "Bar gegeben                    20,00", "Rückgeld                           3,60",
               "Vielen Dank für Ihren Einkauf und einen", "schönen Tag! Öffnungszeiten: Mo-Sa 6-18 Uhr"]


def write_kept_formats(out: Path) -> None:
    """Mail, ebook, OpenDocument and Office files, and two scanned pages (tests/container_builders)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.container_builders import (make_eml, make_epub, make_image_pdf, make_mbox, make_odp, make_ods,
                                          make_odt, make_pptx, make_xlsx, render_page)

    files = {
        "nebenkosten-abrechnung.eml": make_eml(
            "Nebenkostenabrechnung 2023", PARAGRAPHS["mail-de"], sender="Jörg Weber <joerg@example.org>",
            charset="iso-8859-1", cte="quoted-printable", date=FIXED_DATE, message_id="<nk-2023@example.org>"),
        "newsletters.mbox": make_mbox([
            make_eml("Community garden newsletter", PARAGRAPHS["mail-en"], date=FIXED_DATE,
                     message_id="<garden-q3@example.org>",
                     attachments=[("planting-day.txt", b"Autumn planting day: bring gloves, spades and "
                                   b"bulbs. Tulips and daffodils will be planted along the north fence.",
                                   "text/plain")]),
            make_eml("Réunion du conseil de quartier", PARAGRAPHS["mail-fr"], date=FIXED_DATE,
                     html=f"<p>{PARAGRAPHS['mail-fr']}</p>", message_id="<conseil-mars@example.org>")]),
        "composting-guide.epub": make_epub([("Why compost", PARAGRAPHS["book-1"]),
                                            ("Looking after the heap", PARAGRAPHS["book-2"])]),
        "protokoll-hausversammlung.odt": make_odt(["Protokoll der Hausversammlung", PARAGRAPHS["odt"]]),
        "haushaltsbuch.ods": make_ods({"Januar": [["Posten", "Betrag"], ["Miete", "950"], ["Strom", "64.50"],
                                                  ["Lebensmittel", "412.30"], ["Versicherungen", "88"]],
                                       "Februar": [["Posten", "Betrag"], ["Miete", "950"], ["Strom", "61.20"],
                                                   ["Lebensmittel", "398.75"], ["Fahrrad Reparatur", "45"]]}),
        "solar-panels-talk.odp": make_odp([["Solar panels on a terraced house", "Costs, savings and permits"],
                                           ["A 4 kWp system costs about 7,000 euros and produces around "
                                            "3,800 kWh a year; with a battery, half of it is used at home."]]),
        "bike-commute-survey.pptx": make_pptx([["Bike commute survey 2024", "Results from 312 employees"],
                                               ["41 percent cycle at least twice a week; the main wish is "
                                                "covered parking and showers at the office."]]),
        "reading-list.xlsx": make_xlsx({"Books": [["Title", "Author", "Year"],
                                                  ["The Overstory", "Richard Powers", "2018"],
                                                  ["Braiding Sweetgrass", "Robin Wall Kimmerer", "2013"],
                                                  ["The Hidden Life of Trees", "Peter Wohlleben", "2015"]],
                                        "Wishlist": [["Title", "Author"], ["Entangled Life", "Merlin Sheldrake"]]}),
        "water-maintenance-notice-scan.pdf": make_image_pdf(SCAN_LINES, mode="1", size=30, width=1300),
        "kassenbon-baeckerei.png": render_page(PHOTO_LINES, size=30, width=1300),
    }
    for name, data in files.items():
        (out / name).write_bytes(data)
        print(f"wrote {out / name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parent.parent / "data" / "sample-corpus"
    parser.add_argument("--out", type=Path, default=default, help="corpus folder (default: %(default)s)")
    parser.add_argument("--only-kept-formats", action="store_true",
                        help="write only the mail, ebook, office and scanned files (no fpdf2 needed)")
    args = parser.parse_args(argv)
    if args.only_kept_formats:
        args.out.mkdir(parents=True, exist_ok=True)
        write_kept_formats(args.out)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (title, pages) in PDFS.items():
        write_pdf(args.out / name, title, pages)
        print(f"wrote {args.out / name}")
    for name, (title, paragraphs, table) in DOCXS.items():
        write_docx(args.out / name, title, paragraphs, table)
        print(f"wrote {args.out / name}")
    write_kept_formats(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

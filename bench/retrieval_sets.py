"""Small labelled retrieval sets written for hefsearch (shared by bench/hybrid.py and
tests/search/test_search_quality.py).

- ``ENGLISH``: 25 short English documents and 18 queries, each with one
  relevant document. Queries paraphrase their document (few shared words); some name an exact
  rare term (a model number, a form code) the way people search for them, next to documents
  that differ only in that code (where embeddings blur and keywords decide).
- ``CROSS_LINGUAL``: English queries whose relevant document is written in German, French or
  Spanish, in a corpus that also holds English *distractors* sharing some of the query's words
  while being about something else — the case where keyword evidence can push the right
  foreign-language document down.
- ``NUMBERS``: queries holding bare numbers ("after 90 days") or a two-letter acronym, next to
  tables and lists full of the same numbers; and exact codes (0x80070005, 4.2.1, order 48213)
  that must still pick one of two near-identical documents.
"""

from __future__ import annotations

ENGLISH_DOCS = {
    "invoice": "Invoice 2024-117: the amount due is 840 euros, payable within thirty days of receipt. "
               "Late payments incur a fee of two percent per month.",
    "router": "The XR-2000 router restarts by itself when the firmware update finishes. Do not unplug "
              "it during the update or the device may not boot again.",
    "train": "Trains to the airport leave from platform four every twenty minutes between five in the "
             "morning and midnight.",
    "sauce": "Simmer the tomatoes with garlic and olive oil for forty minutes until the sauce is thick, "
             "then season with basil and salt.",
    "garden": "Young seedlings need watering early in the morning; keep the soil loose and remove weeds "
              "by hand so the roots are not damaged.",
    "sleep": "Adults who sleep less than six hours a night are more likely to have trouble concentrating "
             "and to catch colds.",
    "concert": "The orchestra rehearsed Beethoven's ninth symphony twice before the sold-out evening "
               "concert at the city hall.",
    "taxform": "Use form K-44 to declare income earned abroad; it must reach the tax office before the "
               "end of May.",
    "lease": "The apartment lease can be terminated with three months' notice, in writing, by either the "
             "tenant or the landlord.",
    "bike": "To fix a flat bicycle tyre, remove the wheel, find the puncture with soapy water and patch "
            "the inner tube.",
    "passport": "Passport renewals take about six weeks; bring two recent photos and your old passport to "
                "the town hall.",
    "battery": "Lithium batteries last longer when they are kept between twenty and eighty percent charge "
               "and away from heat.",
    "dog": "Puppies should be taken outside after every meal and praised when they relieve themselves "
           "in the right place.",
    "backup": "Run the nightly backup with rsync to the external drive and check the log for errors "
              "every Monday.",
    "insurance": "The car insurance covers hail damage and theft, but not wear and tear of the tyres or "
                 "the brakes.",
    "coffee": "Grind the beans just before brewing; a medium grind works best for filter coffee.",
    "meeting": "The quarterly budget meeting moved to Thursday at ten in the small conference room.",
    "vaccine": "The clinic offers flu vaccinations on weekdays from October; no appointment is needed.",
    "printer": "If the printer shows error E-52, open the rear cover and remove the jammed paper.",
    "printer-e17": "If the printer shows error E-17, the toner cartridge is empty; replace it with a new "
                   "one.",
    "printer-e31": "If the printer shows error E-31, the fuser is too hot; switch it off and let it cool "
                   "for an hour.",
    "printer-e88": "If the printer shows error E-88, the network card failed; contact the service desk.",
    "router-xr3000": "The XR-3000 router restarts by itself when the fan is blocked; clean the vents and "
                     "keep it away from the wall.",
    "taxform-k45": "Use form K-45 to claim child care costs; it must reach the tax office before the end of "
                   "July.",
    "moving": "Book the moving van at least a month ahead and label every box with the room it "
              "belongs in.",
}

ENGLISH_QUERIES = [
    ("how much do I owe and when is the bill due", "invoice"),
    ("XR-2000 keeps rebooting after an upgrade", "router"),
    ("how often is there a rail connection to the airport", "train"),
    ("recipe for a tomato pasta sauce", "sauce"),
    ("when should I water the plants", "garden"),
    ("effects of not getting enough rest at night", "sleep"),
    ("classical music performance in the town hall", "concert"),
    ("K-44 deadline", "taxform"),
    ("how do I end my rental contract", "lease"),
    ("repairing a punctured tire", "bike"),
    ("what do I need to get a new travel document", "passport"),
    ("make my phone battery age slower", "battery"),
    ("house training a young dog", "dog"),
    ("printer error E-52", "printer"),
    ("printer error E-31", "printer-e31"),
    ("printer says E-88", "printer-e88"),
    ("XR-3000 reboots on its own", "router-xr3000"),
    ("form K-45 child care", "taxform-k45"),
]

# English queries, relevant documents in other languages, English distractors sharing words.
CROSS_DOCS = {
    "de-invoice": "Rechnung Nr. 2024-117: Der offene Betrag von 840 Euro ist innerhalb von dreißig Tagen "
                  "zu zahlen. Bei Verzug fallen Mahngebühren an.",
    "fr-train": "Les trains pour l'aéroport partent du quai quatre toutes les vingt minutes, de cinq heures "
                "du matin à minuit.",
    "es-sauce": "Cocine los tomates con ajo y aceite de oliva durante cuarenta minutos hasta que la salsa "
                "espese; sazone con albahaca.",
    "de-lease": "Der Mietvertrag der Wohnung kann von Mieter oder Vermieter mit einer Frist von drei "
                "Monaten schriftlich gekündigt werden.",
    "fr-passport": "Le renouvellement du passeport prend environ six semaines ; apportez deux photos "
                   "récentes et votre ancien passeport à la mairie.",
    "es-battery": "Las baterías de litio duran más si se mantienen entre el veinte y el ochenta por ciento "
                  "de carga y lejos del calor.",
    "de-printer": "Zeigt der Drucker den Fehler E-52, öffnen Sie die hintere Abdeckung und entfernen Sie "
                  "das gestaute Papier.",
    "fr-vaccine": "La clinique propose la vaccination contre la grippe en semaine à partir d'octobre, sans "
                  "rendez-vous.",
    # distractors: English, sharing query words, about something else
    "en-bill-due": "The library bill for the new roof is due when the council meets; nobody knows how much "
                   "it will be.",
    "en-train-model": "My model train set runs on a loop around the airport diorama in the attic.",
    "en-pasta-shop": "The pasta shop on the corner sells sauce jars and tomato cans at a discount.",
    "en-contract-job": "My job contract ends in March; I will ask my boss how to renew it.",
    "en-document-scan": "Scan every document you need for the travel blog and upload it to the cloud.",
    "en-phone-case": "A new phone case will make my old phone look younger but the battery is still weak.",
    "en-printer-ink": "The printer ink is cheaper online; error messages about third-party cartridges can "
                      "be ignored.",
    "en-flu-story": "The story of the flu in the village clinic was told at the weekday market.",
}

CROSS_QUERIES = [
    ("how much is the bill and when is it due", "de-invoice"),
    ("how often does the train go to the airport", "fr-train"),
    ("tomato sauce with garlic and olive oil", "es-sauce"),
    ("how to terminate the rental contract for the apartment", "de-lease"),
    ("what do I need to renew my passport", "fr-passport"),
    ("how to keep a lithium battery healthy", "es-battery"),
    ("printer shows error E-52 paper jam", "de-printer"),
    ("flu vaccination at the clinic without appointment", "fr-vaccine"),
]

# Queries holding bare numbers and other low-information tokens (quantities, a two-letter
# acronym that FTS5 reads as a common word), next to documents full of the same numbers (tables,
# lists) about something else; and exact codes (hex error codes, versions, model numbers) that
# must still decide between near-identical documents.
NUMBER_DOCS = {
    "password-ageing": "Account passwords can be set to lapse: chage -M sets how many days a password "
                       "stays valid before its owner has to choose a new one at the next login.",
    "screen-blank": "The display switches itself off when nobody has touched the keyboard or the mouse for "
                    "a while; the idle delay is set in the power settings.",
    "log-rotation": "logrotate keeps older log files for as many days as the rotate line says and "
                    "compresses every file but the newest one.",
    "tech-budget": "The information technology department's spending plan for next year was approved "
                   "by the board on Monday.",
    "disk-quota": "A quota limits how much disk space each user may fill; the soft limit may be passed for "
                  "a grace period.",
    "update-error-5": "Windows Update fails with 0x80070005 when the account lacks the right to write the "
                      "update folder: run it as an administrator.",
    "update-error-2": "Windows Update fails with 0x80070002 when downloaded update files are missing: "
                      "clear the SoftwareDistribution folder and try again.",
    "firmware-421": "Firmware 4.2.1 fixes the Wi-Fi dropouts of the access point after a reboot.",
    "firmware-420": "Firmware 4.2.0 adds a guest network with its own password to the access point.",
    "order-48213": "Order 48213 shipped on Tuesday: two chairs and a table, delivery expected next week.",
    "order-48219": "Order 48219 was cancelled at the customer's request and the payment refunded.",
    # distractors: the same numbers, about something else
    "font-coverage": "Glyph coverage: Latin 90 92 98 100, Greek 90 60 30 10, Cyrillic 90 88 30 10, "
                     "Arabic 10 30 60 90 days of work per script.",
    "speed-table": "Speed limits: 30 in town, 50 on main roads, 90 on country roads, 10 in play streets, "
                   "130 on motorways.",
    "football": "The match lasts 90 minutes plus stoppage time; each half is 45 minutes and the break 15.",
    "calendar": "Months have 30 or 31 days, February 28 or 29; a year has 365 days and 52 weeks.",
    "shop-hours": "The shop is open 10 to 6 on weekdays and 10 to 4 on Saturday; it is closed on Sunday "
                  "and it opens late when it snows.",
    "it-story": "It was late, and it was raining; it seemed nobody would come, but it all went well in "
                "the end.",
}

NUMBER_QUERIES = [
    ("make a user's password expire after 90 days", "password-ageing"),
    ("turn the screen off after 10 minutes idle", "screen-blank"),
    ("keep 30 days of old logs", "log-rotation"),
    ("IT department budget for next year", "tech-budget"),
    ("limit each user to 10 GB of disk", "disk-quota"),
    ("update error 0x80070005", "update-error-5"),
    ("0x80070002 update fails", "update-error-2"),
    ("what does firmware 4.2.1 fix", "firmware-421"),
    ("4.2.0 release notes", "firmware-420"),
    ("where is order 48213", "order-48213"),
    ("order 48219 status", "order-48219"),
]

SETS = {
    "same-language (English)": (ENGLISH_DOCS, ENGLISH_QUERIES),
    "cross-lingual (English queries, de/fr/es documents)": (CROSS_DOCS, CROSS_QUERIES),
    "numbers and codes (English)": (NUMBER_DOCS, NUMBER_QUERIES),
}


def write_docs(folder, docs: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / f"{name}.txt").write_text(text + "\n", encoding="utf-8")


def evaluate(searcher, queries, mode: str, k: int = 5) -> dict[str, float]:
    """recall@k and MRR@10 of one mode; a hit counts when its file is the relevant document."""
    found, rr = 0, 0.0
    for query, relevant in queries:
        res = searcher.search(query, mode=mode, k=10)
        names = [h.path.rsplit("/", 1)[-1][:-4] for h in res.hits]
        if relevant in names[:k]:
            found += 1
        if relevant in names:
            rr += 1.0 / (names.index(relevant) + 1)
    return {f"recall@{k}": found / len(queries), "mrr@10": rr / len(queries)}

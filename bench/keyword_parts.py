"""Keyword search on compounds, hyphen variants and codes: before and after, in one run.

    python bench/keyword_parts.py [--bundle BUNDLE]

A labelled set of our own (German, Dutch, Swedish, Danish documents with compounds and hyphen
variants; an invoice whose code shares only its year with four messages; a firmware note): each
query names the one file that answers it. Keyword mode, k 10, one hit per file. "before" is the
search without word parts (``Searcher.keyword_parts = False``) and with a code's parts as
separate words (what keyword search did before codes were phrases); "after" is the default.
Printed: found@1 and MRR@10 over the queries, and for the code queries the files listed that do
not answer them (noise). Hybrid mode is shown beside it (keyword evidence found for the
expected file).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

DOCS = {
    "de_fahrrad.txt": "Die Fahrradversicherung läuft im März ab; der Beitrag beträgt 48 Euro im Jahr.",
    "de_rad.txt": "Das Rad am Auto wurde in der Werkstatt gewechselt.",
    "de_login.md": "Melden Sie sich an der Anmelde-Shell mit Ihrem Benutzernamen und Passwort an.",
    "de_kasse.txt": "Die Krankenkassenkarte liegt in der obersten Schublade im Flur.",
    "de_steuer.txt": "Die Einkommensteuererklärung für das Jahr ist bis Ende Juli fällig.",
    "de_muell.txt": "Die Müllabfuhr kommt dienstags; der Biomüll wird jeden zweiten Freitag geholt.",
    "de_wasch.txt": "Die Wasch-Maschine im Keller ist seit Montag defekt.",
    "nl_zorg.txt": "De zorgverzekering dekt tandartskosten tot tweehonderdvijftig euro per jaar.",
    "nl_fiets.txt": "Het fietsenrek staat achter het gemeentehuis naast de bibliotheek.",
    "sv_bil.txt": "Bilförsäkringen förnyas i januari och betalas via autogiro.",
    "sv_hyra.txt": "Hyreskontraktet sägs upp med tre månaders varsel.",
    "da_syge.txt": "Sundhedskortet skal altid medbringes til lægen.",
    "invoice.txt": "Rechnung HZ-2026-118 über die Reparatur der Heizung im Februar.",
    "msg1.txt": "Besprechung am 3. März 2026: der Gartenplan und die Hecke.",
    "msg2.txt": "Newsletter Frühjahr 2026 mit den Terminen des Vereins.",
    "msg3.txt": "Urlaub 2026: Flüge nach Lissabon sind gebucht.",
    "msg4.txt": "Die Ferienwohnung für Sommer 2026 ist reserviert, Nummer 118.",
    "fw.txt": "Router firmware 4.2.1 fixes the VPN disconnect bug.",
    "fw_old.txt": "Version 4.2 of the app was released in 2021 with dark mode.",
}
#: query -> the file that answers it; kind: "part" (compound or hyphen variant) or "code"
QUERIES = [
    ("Fahrrad", "de_fahrrad.txt", "part"),
    ("Versicherung Fahrrad", "de_fahrrad.txt", "part"),
    ("Anmeldeshell", "de_login.md", "part"),
    ("Krankenkasse", "de_kasse.txt", "part"),
    ("Steuererklärung", "de_steuer.txt", "part"),
    ("Abfuhr", "de_muell.txt", "part"),
    ("Waschmaschine", "de_wasch.txt", "part"),
    ("verzekering", "nl_zorg.txt", "part"),
    ("tandarts", "nl_zorg.txt", "part"),
    ("fiets", "nl_fiets.txt", "part"),
    ("försäkring", "sv_bil.txt", "part"),
    ("kontrakt", "sv_hyra.txt", "part"),
    ("Sundhedskort", "da_syge.txt", "part"),
    ("HZ-2026-118", "invoice.txt", "code"),
    ("firmware 4.2.1", "fw.txt", "code"),
    ("4.2.1", "fw.txt", "code"),
]


def default_bundle(tmp: Path) -> Path:
    from hefsearch.bench.harness import export_temp_bundle

    return export_temp_bundle(tmp=tmp)


@contextlib.contextmanager
def before_codes_were_phrases():
    from hefsearch.search import keyword

    real = keyword._codes_as_phrases
    keyword._codes_as_phrases = lambda text: text
    try:
        yield
    finally:
        keyword._codes_as_phrases = real


def score(searcher, mode: str) -> dict:
    from hefsearch.search.request import SearchRequest

    ranks, noise = [], 0
    for query, expected, kind in QUERIES:
        hits = searcher.search(SearchRequest(query, mode=mode, k=10)).hits
        names = [h.path.rsplit("/", 1)[1] for h in hits
                 if mode == "keyword" or "keyword" in (h.sources or {})]
        ranks.append(names.index(expected) + 1 if expected in names else None)
        if kind == "code":
            noise += sum(1 for n in names if n != expected)
    n = len(QUERIES)
    return {"found@1": sum(r == 1 for r in ranks) / n, "mrr@10": sum(1 / r for r in ranks if r) / n,
            "noise": noise, "missed": [q for (q, _, _), r in zip(QUERIES, ranks) if r is None]}


def run(bundle: Path, tmp: Path) -> dict:
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync
    from hefsearch.search import Searcher

    docs = tmp / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text + "\n", encoding="utf-8")
    out = {}
    with Encoder.open(bundle, backend="cpu") as enc, Library.open(tmp / "lib") as lib:
        sync(lib, [docs], [enc])
        searcher = Searcher(lib, encoders={"cpu-fp32": enc})
        for mode in ("keyword", "hybrid"):
            searcher.keyword_parts = False
            with before_codes_were_phrases():
                out[(mode, "before")] = score(searcher, mode)
            searcher.keyword_parts = True
            out[(mode, "after")] = score(searcher, mode)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        results = run(args.bundle or default_bundle(tmp), tmp)
    print(f"{len(QUERIES)} queries, {len(DOCS)} files")
    print(f"  {'mode':8s} {'':7s} {'found@1':>8s} {'MRR@10':>7s} {'code noise':>10s}  missed")
    for (mode, when), r in results.items():
        print(f"  {mode:8s} {when:7s} {r['found@1']:8.3f} {r['mrr@10']:7.3f} {r['noise']:10d}  "
              + ", ".join(r["missed"]))


if __name__ == "__main__":
    main()

"""Manual pages: roff rendered to text (headings kept, fonts and macros gone, accents and
special characters as letters, ``.gz`` read), found by content (``ls.1``, ``chsh.1.gz``). Indexed
and searched: tests/index/test_man_pages_indexed.py; in the TUI: tests/tui/test_tui_man_pages.py."""

from __future__ import annotations

import gzip

from hefsearch.index.crawl import FoundFile, crawl
from hefsearch.readers.extract import extract
from hefsearch.readers.extract_man import looks_like_roff, render

GERMAN_CHSH = r""".\"     Title: chsh
.\"  Language: German
.TH "CHSH" "1" "07.04.2025" "shadow\-utils 4\&.13" "Dienstprogramme f\(:ur Benutzer"
.ie \n(.g .ds Aq \(aq
.el       .ds Aq '
.de SAMPLE
.B never shown
..
.nh
.ad l
.SH "NAME"
chsh \- \(:andert die Anmelde\-Shell
.SH "\(:UBERSICHT"
.HP \w'\fBchsh\fR\ 'u
\fBchsh\fR [\fIOptionen\fR] [\fIANMELDENAME\fR]
.SH "BESCHREIBUNG"
.PP
Der Befehl
.B chsh
\(:andert die Anmelde\-Shell des Benutzers\*(Aqs Kontos\&.
Eine Zeile mit \[u00DF] und \('e und \[em] Strich.  \" a comment
.TP
\fB\-s\fR, \fB\-\-shell\fR\ \&\fISHELL\fR
Der Name der neuen Shell\&.
.IP \(bu 2
.BR passwd (5),
.IR shells (5)
.TS
tab(:);
l l.
Datei:Zweck
/etc/shells:Liste der Shells
.TE
"""


def test_roff_becomes_words_with_headings_on_their_own_lines():
    text = render(GERMAN_CHSH)
    lines = text.splitlines()
    assert lines[0] == "CHSH(1)"
    for heading in ("NAME", "ÜBERSICHT", "BESCHREIBUNG"):
        assert heading in lines
    assert "chsh - ändert die Anmelde-Shell" in lines
    assert "Der Befehl chsh ändert die Anmelde-Shell des Benutzers's Kontos. Eine Zeile mit ß und é und — " \
           "Strich." in lines
    assert "-s, --shell SHELL" in lines and "Der Name der neuen Shell." in lines
    assert "passwd(5), shells(5)" in lines
    assert "/etc/shells  Liste der Shells" in lines
    for raw in ("\\f", ".SH", "\\(", ".TH", "never shown", "a comment", "tab(:)", "Aq"):
        assert raw not in text, raw


def test_mdoc_pages_and_pointer_pages():
    mdoc = ".Dd March 1, 2024\n.Dt LS 1\n.Os\n.Sh NAME\n.Nm ls\n.Nd list directory contents\n.Sh SYNOPSIS\n" \
           ".Nm\n.Op Fl al\n.Op Ar file ...\n.Sh SEE ALSO\n.Xr chmod 1 ,\n.Ux\nsystems.\n"
    text = render(mdoc)
    assert text.splitlines()[0] == "LS(1)"
    assert "ls - list directory contents" in text and "ls [-al] [file ...]" in text
    assert "chmod(1), UNIX systems." in text
    assert render(".so /etc/passwd\n") == "See /etc/passwd.\n"  # a pointer: named, never read


def test_man_pages_are_found_by_content_and_other_numbered_files_stay_text(tmp_path):
    de = tmp_path / "man" / "de" / "man1"
    de.mkdir(parents=True)
    (de / "chsh.1.gz").write_bytes(gzip.compress(GERMAN_CHSH.encode()))
    (tmp_path / "ls.1").write_text(".TH LS 1\n.SH NAME\nls \\- list directory contents\n")
    (tmp_path / "syslog.1").write_text("Dec  6 01:00:00 host kernel: eth0 link up\n")
    kinds = {f.path.name: f.kind for f in crawl([tmp_path]) if isinstance(f, FoundFile)}
    assert kinds == {"chsh.1.gz": "man", "ls.1": "man", "syslog.1": "text"}
    doc = extract(de / "chsh.1.gz", kind="man")
    assert "ändert die Anmelde-Shell" in doc.text and "\\(:a" not in doc.text
    assert looks_like_roff(b'.\\" comment\n.TH X 1\n') and not looks_like_roff(b"Just a README.\n")

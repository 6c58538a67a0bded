"""A long-passage parallel set: whole manual pages in five languages and scripts, English queries.

    python bench/long_parallel.py --out DIR [--debs DIR]

Writes ``DIR/docs/<command>.<lang>.txt`` (one manual page per file, rendered as text: German,
French, Spanish, simplified Chinese, Japanese) and ``DIR/queries.tsv`` (``query``, ``expected``:
the five files of the page, ``|``-separated; ``queries-detail.tsv``: one option of a page
each, as a verse of a chapter). Every query paraphrases, in plain English, what one page
says, without the command's name, so every query is cross-lingual and every
language's copy of its page is relevant, as on a library of translated chapters. The pages come
from Debian's packages manpages-de, manpages-fr, manpages-es (manpages-l10n, GPL-3+), manpages-zh
(GFDL) and manpages-ja (GPL-2+ / GFDL): fetched with ``apt-get download`` (or taken from
``--debs``), never committed here. The sections after the description (author, bug reports,
copyright, see also: the same boilerplate in every page) are cut, and a page is cut at
:data:`MAX_CHARS` characters (CJK: a third of it), so a page is one to three 512-token chunks.

The peer of this set: the short-document labelled sets of docs/searching.md. Used by
``bench/hubness.py``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import re
import subprocess
import tempfile
from pathlib import Path

PACKAGES = {"de": "manpages-de", "fr": "manpages-fr", "es": "manpages-es", "zh": "manpages-zh",
            "ja": "manpages-ja"}
#: folder of each language under usr/share/man
MAN_DIRS = {"de": "de", "fr": "fr", "es": "es", "zh": "zh_CN", "ja": "ja"}
MAX_CHARS = 4500
#: the section headings where a page's own text ends (author, bugs, copyright, see also)
END_HEADINGS = {
    "AUTOR", "AUTOREN", "FEHLER MELDEN", "COPYRIGHT", "SIEHE AUCH", "ÜBERSETZUNG",
    "AUTEUR", "AUTEURS", "SIGNALER DES BOGUES", "VOIR AUSSI", "TRADUCTION",
    "INFORMAR DE ERRORES", "DERECHOS DE AUTOR", "VÉASE TAMBIÉN", "VEA TAMBIÉN", "TRADUCCIÓN",
    "作者", "报告错误", "报告BUG", "版权", "参见", "另见", "参阅", "[中文版维护人]", "[中文版最新更新]",
    "著者", "バグ報告", "著作権", "関連項目", "バグの報告",
}

#: command -> an English paraphrase of something its page says (never the command's name)
QUERIES = {
    "cat": "join files together and print them, numbering only the lines that are not blank",
    "chmod": "change who may read, write or execute a file, also for everything inside a directory",
    "chown": "give a file to another user and group as its new owner",
    "cp": "duplicate files, keeping their timestamps and ownership, and ask before replacing one",
    "cut": "print only selected fields of each line, split at a delimiter character you choose",
    "date": "print the current time in a format you choose, or set the system clock",
    "dd": "copy a disk image block by block with a given block size, converting as it goes",
    "df": "how much free space is left on each mounted file system",
    "du": "estimate how much disk space a directory and its subdirectories take up",
    "echo": "print a line of text, with backslash escapes such as newline and tab understood",
    "env": "run a program with a modified set of environment variables, or with an empty one",
    "expand": "convert tab characters into spaces",
    "factor": "write a number as a product of its prime factors",
    "fmt": "reflow the paragraphs of a text so that lines are at most a given width",
    "fold": "wrap each input line so that it fits into a given width",
    "head": "show only the first part of a file, the first ten lines unless told otherwise",
    "id": "print the numeric identity of the current user and of the groups it belongs to",
    "ln": "create a hard link or a symbolic link pointing to a file",
    "ls": "list the contents of a directory, sorted by modification time, hidden entries included",
    "mkdir": "create a new directory, and its parents when they do not exist yet",
    "mktemp": "create a temporary file or directory with a unique name from a template",
    "mv": "rename a file or move it to another directory, without overwriting existing ones",
    "nice": "start a program with a lower scheduling priority so it does not slow others",
    "nl": "add line numbers to the lines of a file",
    "nohup": "keep a command running after the terminal hangs up, its output going to a file",
    "od": "dump the bytes of a file in octal, hexadecimal or other formats",
    "paste": "merge the lines of several files side by side, separated by tabs",
    "readlink": "print where a symbolic link points to, resolved to a full canonical path",
    "rm": "delete files, and directories with all their contents recursively",
    "seq": "print a sequence of numbers from a first value to a last one with a given increment",
    "shuf": "write the input lines in a random permutation",
    "sleep": "pause for a given number of seconds, minutes, hours or days",
    "sort": "put the lines of text files in order, numerically or in reverse",
    "split": "break a large file into pieces of a fixed size or number of lines",
    "stat": "show a file's size, permissions, inode and access and modification times",
    "tac": "print a file with its lines in reverse order, the last line first",
    "tail": "show the end of a file and keep printing new lines as the file grows",
    "tee": "read the input and copy it both to the standard output and to files",
    "timeout": "run a command and kill it if it is still running after a time limit",
    "truncate": "shrink or extend a file to exactly the size you give",
    "uniq": "report or drop repeated adjacent lines, optionally counting them",
    "wc": "count the newlines, words and bytes of each file",
    "base64": "encode binary data as printable text, or decode it back",
    "uname": "print the kernel's name, release and the machine's hardware name",
    "who": "show who is currently logged in to the system",
}

#: command -> a paraphrase of one option its page describes (a detail of the page, as a verse is
#: of a chapter; never the command's or the option's name); written to queries-detail.tsv
DETAIL_QUERIES = {
    "cat": "show a dollar sign at the end of every line",
    "cp": "make hard links to the files instead of copying their contents",
    "cut": "leave out lines that contain no delimiter character at all",
    "date": "show the time in Coordinated Universal Time",
    "df": "report inode usage instead of block usage",
    "du": "print totals only down to a given depth below the starting directory",
    "env": "change to another working directory before running the program",
    "expand": "convert only the tabs at the start of a line, not those after other characters",
    "fmt": "keep the indentation of the first two lines of each paragraph",
    "fold": "break lines at blanks instead of in the middle of a word",
    "head": "never print headers with the file names",
    "id": "print names instead of numbers",
    "ln": "make the links relative to the place where the link is created",
    "ls": "append a character to each entry that shows its kind, such as a slash for directories",
    "mkdir": "set the permission bits of the new directory, as with chmod",
    "mktemp": "create nothing, only print a name (unsafe)",
    "mv": "move only when the source is newer than the destination or the destination is missing",
    "nice": "add a number to the niceness, ten by default",
    "nl": "choose the string placed between the line number and the text",
    "od": "skip some bytes at the start of the input before dumping",
    "paste": "join all lines of each file into a single line instead of putting files side by side",
    "readlink": "every component of the path must exist",
    "rm": "remove empty directories",
    "seq": "pad the numbers with leading zeros so that all have the same width",
    "shuf": "treat each command-line argument as an input line",
    "split": "write a given number of lines into each output file",
    "tail": "while following, check for new data every given number of seconds",
    "tee": "add to the end of the files instead of overwriting them",
    "timeout": "also send a KILL signal if the command still runs a while after the first signal",
    "truncate": "do not create files that do not exist",
    "uniq": "ignore differences between upper and lower case when comparing",
    "wc": "print the length of the longest line",
    "base64": "when decoding, ignore characters that are not in the alphabet",
    "uname": "print the network node host name",
    "who": "print the time of the last system boot",
}


def fetch_debs(target: Path) -> None:
    """Debian's packages of :data:`PACKAGES` into ``target`` (apt-get download; no root needed
    beyond a readable package list: run 'apt-get update' first on a fresh machine)."""
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", *PACKAGES.values()], cwd=target, check=True)


def extract(debs: Path, root: Path) -> None:
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)


def render(page: Path) -> str:
    """A manual page as plain text (groff, 100 columns, no overstrike; runs of spaces that
    justification put inside a line made single)."""
    with gzip.open(page, "rb") as fh:
        source = fh.read()
    out = subprocess.run(["groff", "-k", "-mandoc", "-Tutf8", "-rLL=97n", "-P-cbou"], input=source,
                         capture_output=True, check=True, timeout=60).stdout.decode("utf-8", "replace")
    lines = [re.sub(r"(?<=\S) {2,}(?=\S)", " ", ln) for ln in out.splitlines()]
    return trim("\n".join(lines))


def trim(text: str) -> str:
    lines = text.splitlines()[1:]  # the running header
    kept = []
    for line in lines:
        if line and not line[0].isspace() and line.strip().upper() in END_HEADINGS:
            break
        kept.append(line.rstrip())
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    cjk = len(re.findall(r"[\u3040-\u30ff\u4e00-\u9fff]", body)) > len(body) // 5
    limit = MAX_CHARS // 3 if cjk else MAX_CHARS
    return body[:limit].rsplit("\n", 1)[0] if len(body) > limit else body


def build(out: Path, debs: Path | None = None) -> list[tuple[str, set[str]]]:
    with tempfile.TemporaryDirectory() as tmp:
        if debs is None:
            debs = Path(tmp) / "debs"
            fetch_debs(debs)
        root = Path(tmp) / "root"
        extract(debs, root)
        docs = out / "docs"
        docs.mkdir(parents=True, exist_ok=True)
        rows, found = [], {}
        for cmd, query in QUERIES.items():
            names = set()
            for lang, folder in MAN_DIRS.items():
                page = root / "usr/share/man" / folder / "man1" / f"{cmd}.1.gz"
                if not page.exists():
                    continue
                name = f"{cmd}.{lang}.txt"
                (docs / name).write_text(render(page) + "\n", encoding="utf-8")
                names.add(name)
            if names:
                rows.append((query, names))
                found[cmd] = names
    write_queries(out / "queries.tsv", rows)
    write_queries(out / "queries-detail.tsv",
                  [(q, found[cmd]) for cmd, q in DETAIL_QUERIES.items() if cmd in found])
    return rows


def write_queries(path: Path, rows) -> None:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(["query", "expected"])
        for query, names in rows:
            w.writerow([query, "|".join(sorted(names))])


def read_set(folder: Path, queries: str = "queries.tsv") -> list[tuple[str, set[str]]]:
    with open(folder / queries, encoding="utf-8") as fh:
        return [(r["query"], set(r["expected"].split("|"))) for r in csv.DictReader(fh, delimiter="\t")]


def main(build_set=None, doc: str | None = None) -> None:
    """Build a set (``build_set(out, debs)``: this module's :func:`build` unless given) and say its size."""
    ap = argparse.ArgumentParser(description=(doc or __doc__).split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--debs", type=Path, help="a folder holding the .deb files already (else apt-get download)")
    args = ap.parse_args()
    rows = (build_set or build)(args.out, args.debs)
    files = sorted((args.out / "docs").iterdir())
    sizes = [len(f.read_text(encoding="utf-8")) for f in files]
    print(f"{len(rows)} queries, {len(files)} files, {sum(sizes) // max(len(files), 1)} characters a file on average")


if __name__ == "__main__":
    main()

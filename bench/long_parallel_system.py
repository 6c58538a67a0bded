"""A second long-passage parallel set: system-call, library and file-format pages, with Russian.

    python bench/long_parallel_system.py --out DIR [--debs DIR]

Like ``bench/long_parallel.py`` (which it reuses), but other pages and other scripts: 34 manual
pages of sections 2, 3, 5 and 7 (sockets, files, processes, stdio, character sets, the
file-system layout, signals), each whole in German, French, Russian and simplified Chinese, and
in Spanish where Debian has it (``DIR/docs/<page>.<lang>.txt``: about 150 files, most of them
one to three 512-token chunks). ``DIR/queries-detail.tsv``: one English query per page that
paraphrases a single sentence inside it (an error code's cause, a flag, a field, a default), never
the page's name: a verse of a chapter, as in the issue's held-out set. Every language's copy of
the page is relevant. The pages come from manpages-de/-fr/-es/-ru and their ``-dev`` packages
(manpages-l10n, GPL-3+) and manpages-zh (GFDL), fetched with ``apt-get download`` or taken from
``--debs``; nothing of them is committed here.

Used by ``bench/hubness.py``; peer: the short-document labelled sets of docs/searching.md.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from hefsearch.bench import long_parallel as lp

PACKAGES = ["manpages-de", "manpages-fr", "manpages-es", "manpages-ru", "manpages-zh",
            "manpages-de-dev", "manpages-fr-dev", "manpages-es-dev", "manpages-ru-dev"]
MAN_DIRS = {"de": "de", "fr": "fr", "es": "es", "ru": "ru", "zh": "zh_CN"}
#: where a Russian page's own text ends (the other languages' headings: long_parallel)
RU_END_HEADINGS = {"АВТОР", "АВТОРЫ", "СМОТРИТЕ ТАКЖЕ", "ПЕРЕВОД", "СООБЩЕНИЕ ОБ ОШИБКАХ",
                   "АВТОРСКИЕ ПРАВА"}

#: page -> a paraphrase of one sentence inside it (inside the kept part of the German, French and
#: Russian copies; the Chinese copy is shorter and may lack it, as a verse may be missing in a
#: looser translation)
DETAIL_QUERIES = {
    "accept.2": "what happens when no connection is waiting and the socket was not made non-blocking",
    "bind.2": "a socket has no address when it is created and must be given a name before it can receive",
    "close.2": "a signal interrupted the call that releases a descriptor",
    "execve.2": "a script can be run if its first line names an interpreter after a hash and an exclamation mark",
    "listen.2": "a client gets a connection refused error when the queue of pending connections is full",
    "open.2": "the call should fail if the file already exists when asked to create it",
    "read.2": "a return value of zero means the end of the file was reached",
    "socket.2": "choose between a reliable two-way byte stream and connectionless messages of fixed size",
    "write.2": "fewer bytes than requested may be written, for example when the disk has too little room",
    "exec.3": "the variants whose name has a p look for the program in the directories of the search path",
    "exit.3": "functions registered to run at termination are called in the reverse order of registration",
    "fclose.3": "buffered output is flushed before the underlying descriptor is closed",
    "fcloseall.3": "close every open stream of the process at once, the standard ones included",
    "fflush.3": "on an input stream that can seek, throw away data that was read ahead but not consumed",
    "fopen.3": "open for reading and appending, writes always going to the end",
    "stdio.3": "three streams are already open when a program starts: input, output and errors",
    "strcoll.3": "compare two strings using the collating order of the current locale",
    "acct.5": "the record keeps the elapsed real time and the command name of each finished process",
    "group.5": "each line holds the name of a set of users, its password, the numeric id and the members separated by commas",
    "protocols.5": "a plain text file listing the internet transport standards with their official numbers and aliases",
    "rpc.5": "a database of names that can be read instead of the numbers of remote procedure call programs",
    "services.5": "ports below 1024 may only be bound by privileged processes",
    "shells.5": "the programs a user may choose as his command interpreter at login, checked when he changes it",
    "ttytype.5": "associate a terminal type name with each terminal device line",
    "utmp.5": "the record keeps the host name of a remote login",
    "ascii.7": "the character with decimal code 127 is delete",
    "charsets.7": "the Cyrillic encoding widely used for Russian text on Unix",
    "fifo.7": "a process that writes to a named pipe nobody reads from receives a broken pipe signal",
    "hier.7": "files copied into the home folder of every newly created user account",
    "locale.7": "the category that controls how amounts of money are formatted",
    "signal.7": "a child created by fork inherits how its parent handles each kind of asynchronous notification",
    "unicode.7": "characters above the basic multilingual plane go up to hexadecimal 10FFFF",
    "utf-8.7": "bytes of ASCII characters never appear inside a multibyte sequence",
    "man.7": "the title line macro gives the page's name, section and date",
    "iconv.1": "leave out characters that cannot be converted instead of stopping with an error",
}


def fetch_debs(target: Path) -> None:
    """Debian's packages of :data:`PACKAGES` into ``target`` (apt-get download)."""
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", *PACKAGES], cwd=target, check=True)


def build(out: Path, debs: Path | None = None) -> list[tuple[str, set[str]]]:
    lp.END_HEADINGS |= RU_END_HEADINGS
    with tempfile.TemporaryDirectory() as tmp:
        if debs is None:
            debs = Path(tmp) / "debs"
            fetch_debs(debs)
        root = Path(tmp) / "root"
        lp.extract(debs, root)
        docs = out / "docs"
        docs.mkdir(parents=True, exist_ok=True)
        rows = []
        for page, query in DETAIL_QUERIES.items():
            section = page.rsplit(".", 1)[1]
            names = set()
            for lang, folder in MAN_DIRS.items():
                source = root / "usr/share/man" / folder / f"man{section}" / f"{page}.gz"
                if source.exists():
                    name = f"{page}.{lang}.txt"
                    (docs / name).write_text(lp.render(source) + "\n", encoding="utf-8")
                    names.add(name)
            if names:
                rows.append((query, names))
    lp.write_queries(out / "queries-detail.tsv", rows)
    return rows


def main() -> None:
    lp.main(build, __doc__)


if __name__ == "__main__":
    main()

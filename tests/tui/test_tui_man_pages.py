"""Manual pages in the TUI: shown with their language folder, opened as the text that was
indexed (a ``.gz`` page or file decompressed for the editor)."""

from __future__ import annotations

import gzip

from tests.readers.test_man_pages import GERMAN_CHSH


def test_the_tui_shows_the_language_folder_and_opens_the_indexed_text(tmp_path):
    from hefsearch.tui.launch import plan_open
    from hefsearch.tui.present import short_path

    shown = {short_path(f"/usr/share/man/{lang}man1/chsh.1.gz") for lang in ("", "de/", "fr/")}
    assert shown == {"man1/chsh.1.gz", "de/man1/chsh.1.gz", "fr/man1/chsh.1.gz"}
    assert short_path("/usr/share/man/de/man1/chsh.1.gz", 1) == "de/man1/chsh.1.gz"
    assert short_path("/home/me/notes/todo.txt") == "notes/todo.txt"

    page = tmp_path / "chsh.1.gz"
    page.write_bytes(gzip.compress(GERMAN_CHSH.encode()))
    notes = tmp_path / "NEWS.gz"
    notes.write_bytes(gzip.compress(b"Version 2\nFixed the search.\n"))
    for path, kind, expected in ((page, "man", "ändert die Anmelde-Shell"), (notes, "text", "Fixed the search.")):
        argv = plan_open(str(path), line=4, kind=kind, env={"EDITOR": "nano"}, platform="linux").argv
        assert argv[:2] == ["nano", "+4"] and argv[2] != str(path)
        opened = argv[2]
        assert opened.endswith(path.name[:-3] + ".txt")
        with open(opened, encoding="utf-8") as f:
            assert expected in f.read()

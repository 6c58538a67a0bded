"""Issue 21, the first hour of a new user: from ``make demo`` to indexing and searching their
own folder in one line, and the rough edges met on the way (CLI and library side; the TUI's
are in tests/tui/test_tui_app.py, one hit per file in tests/search/test_grouping.py)."""

from __future__ import annotations

import bz2
import gzip
import importlib.util
import json
import lzma
import os
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from hefsearch.cli.main import main
from hefsearch.embed import Encoder
from hefsearch.index.library import Library
from hefsearch.index.sync import SyncOptions, sync
from hefsearch.index.crawl_options import CrawlOptions
from hefsearch.search.request import SearchRequest
from tests.support.library_helpers import ctrl_c_on_batch, write_corpus
from tests.support.tui_support import noisy_encoder

REPO = Path(__file__).resolve().parents[2]


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def home() -> Path:
    return Path(os.environ["HEFSEARCH_HOME"])


# -- 1. from the demo's bundle to your own folder ---------------------------------------------
def test_a_new_library_uses_the_bundle_index_was_last_given(tmp_path, tiny_bert_bundle):
    demo_docs, mine = tmp_path / "sample", tmp_path / "my-folder"
    write_corpus(demo_docs, n_files=2)
    write_corpus(mine, n_files=3)
    # what make demo runs: its own library, the bundle named
    r = run("index", demo_docs, "--library", tmp_path / "demo-lib", "--bundle", tiny_bert_bundle, "--backend", "cpu")
    assert r.exit_code == 0, r.output
    # the newcomer's next line: no --bundle, the default library
    r = run("index", mine, "--backend", "cpu")
    assert r.exit_code == 0, r.output
    assert f"bundle: {Path(tiny_bert_bundle).resolve()}" in " ".join(r.output.split())
    with Library.open(None, create=False) as lib:
        assert lib.document_count() == 3 and lib.settings()["bundle"] == str(Path(tiny_bert_bundle).resolve())
    r = run("search", "tomatoes garlic", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["hits"]


def test_a_throwaway_library_does_not_change_the_default_bundle(tmp_path, tiny_bert_bundle):
    """The first bundle ever given is the default; a later run on another --library with another
    bundle leaves it; a new library says which default it took and where it was remembered."""
    import shutil

    docs = tmp_path / "docs"
    write_corpus(docs, n_files=1)
    other_bundle = tmp_path / "other-bundle"
    shutil.copytree(tiny_bert_bundle, other_bundle)
    assert run("index", docs, "--library", tmp_path / "first", "--bundle", tiny_bert_bundle,
               "--backend", "cpu").exit_code == 0
    assert run("index", docs, "--library", tmp_path / "throwaway", "--bundle", other_bundle,
               "--backend", "cpu").exit_code == 0
    r = run("index", docs, "--library", tmp_path / "new", "--backend", "cpu")
    said = " ".join(r.output.split())
    assert r.exit_code == 0, r.output
    assert f"bundle: {Path(tiny_bert_bundle).resolve()} (the default bundle, remembered from the index run on" in said
    assert str(tmp_path / "first") in said and str(other_bundle) not in said
    # a run on the default library with --bundle makes that one the default
    assert run("index", docs, "--bundle", other_bundle, "--backend", "cpu").exit_code == 0
    r = run("index", docs, "--library", tmp_path / "newer", "--backend", "cpu")
    assert f"bundle: {other_bundle.resolve()} (the default bundle" in " ".join(r.output.split())


def test_the_demo_prints_the_line_that_indexes_your_folder_with_its_bundle():
    spec = importlib.util.spec_from_file_location("demo", REPO / "scripts" / "demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    text = demo.next_steps(demo.WORK / "bundle-all-minilm-l6", demo.WORK / "library-all-minilm-l6",
                           remembered=True)
    assert ".venv/bin/hefsearch index ~/Documents " in text and "demo-work/bundle-all-minilm-l6" in text
    assert ".venv/bin/hefsearch tui" in text and "source .venv/bin/activate" in text
    assert ".venv/bin/hefsearch serve" in text and "--bundle" not in text
    # another bundle is the user's default: the line names the demo's bundle itself
    other = demo.next_steps(demo.WORK / "bundle-all-minilm-l6", demo.WORK / "library-all-minilm-l6",
                            remembered=False)
    assert "index ~/Documents --bundle demo-work/bundle-all-minilm-l6" in other
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first_screen = readme[readme.index("## Quick start"):][:1400]
    assert "make demo" in first_screen and ".venv/bin/hefsearch index ~/Documents" in first_screen


# -- 2. a failed run leaves no library ------------------------------------------------------
def test_a_failed_first_run_creates_no_library(tmp_path, tiny_bert_bundle):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=1)
    r = run("index", docs)  # no bundle anywhere
    assert r.exit_code == 2 and "No model bundle given" in r.output
    assert not (home() / "library").exists()
    r = run("status")
    assert r.exit_code == 2 and "No library" in r.output
    r = run("index", tmp_path / "no-such", "--bundle", tiny_bert_bundle, "--library", "newlib")
    assert r.exit_code == 2 and "does not exist" in r.output and "nothing was changed" in r.output
    assert not (home() / "newlib").exists()
    # a library folder named by path that already held something keeps it, and only it
    keep = tmp_path / "mine"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    r = run("index", docs, "--library", keep, "--bundle", tmp_path / "not-a-bundle")
    assert r.exit_code == 2
    assert sorted(p.name for p in keep.iterdir()) == ["notes.txt"]


# -- 3. embed without a bundle --------------------------------------------------------------
def test_embed_without_a_bundle_says_what_to_pass(tiny_bert_bundle):
    r = CliRunner().invoke(main, ["embed"], input="hi\n")
    assert r.exit_code == 2 and "No model bundle given" in r.output and "--bundle" in r.output
    assert not isinstance(r.exception, TypeError)
    r = CliRunner().invoke(main, ["embed", "--bundle", str(tiny_bert_bundle), "--backend", "cpu"], input="hi\n")
    assert r.exit_code == 0 and len(json.loads(r.stdout.splitlines()[0])) == 32


# -- 4. re-index without PATHS --------------------------------------------------------------
def test_index_without_paths_updates_every_recorded_folder(tmp_path, tiny_bert_bundle):
    a, b = tmp_path / "a", tmp_path / "b"
    write_corpus(a, n_files=2)
    write_corpus(b, n_files=2, seed=1)
    assert run("index", a, "--bundle", tiny_bert_bundle, "--backend", "cpu").exit_code == 0
    assert run("index", b, "--backend", "cpu").exit_code == 0
    assert run("index", a / "000-invoices.txt", "--backend", "cpu").exit_code == 0  # inside a: no new folder
    st = json.loads(run("status", "--json").stdout)
    assert st["roots"] == [str(a), str(b)]
    assert str(a) in run("status").output and str(b) in run("status").output
    (a / "new.txt").write_text("A new note about trains.")
    (b / "000-invoices.txt").unlink()
    r = run("index", "--json")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert (summary["added"], summary["removed"], summary["unchanged"]) == (1, 1, 3)
    # a folder gone for now (an unplugged disk) is skipped, and what came from it stays
    b.rename(tmp_path / "b-away")
    r = run("index")
    assert r.exit_code == 0 and "is not there now" in " ".join(r.output.split())
    with Library.open(None, create=False) as lib:
        assert lib.document_count() == 4


# -- 5. what gets indexed -------------------------------------------------------------------
def test_text_without_a_suffix_and_gz_are_indexed(tmp_path, bert_encoder):
    docs = tmp_path / "doc" / "bash"
    docs.mkdir(parents=True)
    (docs / "NEWS").write_text("This is bash 5.2: the history builtin learned a new option.\n")
    (docs / "README.Debian").write_text("The Debian package of bash installs a system-wide bashrc.\n")
    (docs / "copyright").write_text("Copyright (C) Free Software Foundation; GPL version 3.\n")
    (docs / "CHANGES.gz").write_bytes(gzip.compress(b"Fixed a crash in the readline vi mode.\n"))
    (docs / "ls.1.gz").write_bytes(gzip.compress(b".TH LS 1\n.SH NAME\nls \\- list directory contents\n"))
    (docs / "notes.md.gz").write_bytes(gzip.compress("# Notes\n\nCafé opens at eight.\n".encode()))
    (docs / "program").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)  # binary, no suffix
    (docs / "script.py").write_text("print('a real file type hefsearch does not read')\n")
    (docs / "archive.tar.gz").write_bytes(gzip.compress(b"x" * 100))
    (docs / "THANKS.xz").write_bytes(lzma.compress(b"Thanks to everyone who sent patches.\n"))
    (docs / "TODO.bz2").write_bytes(bz2.compress(b"Finish the manual page for the wait builtin.\n"))
    (docs / "AUTHORS.gz").write_bytes(gzip.compress(b"Chet Ramey maintains bash.\n" * 400)[:-40])  # cut short
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [bert_encoder])
    kinds = dict(lib.query("SELECT path, kind FROM documents WHERE status = 'ok'"))
    names = {Path(p).name: k for p, k in kinds.items()}
    assert names == {"NEWS": "text", "README.Debian": "text", "copyright": "text", "CHANGES.gz": "text",
                     "ls.1.gz": "man", "notes.md.gz": "markdown", "THANKS.xz": "text", "TODO.bz2": "text"}
    assert r.unsupported == {"(none)": 1, ".py": 1, ".gz": 1}
    assert [(Path(p).name, "corrupt gz data" in why) for p, why in r.failed] == [("AUTHORS.gz", True)]
    text = " ".join(t for (t,) in lib.query("SELECT text FROM chunks"))
    assert "readline vi mode" in text and "Café opens at eight" in text
    lib.close()


def test_a_gzip_bomb_is_reported_with_bounded_memory(tmp_path, bert_encoder):
    from hefsearch.readers.filetypes import CompressionBomb, decompress

    bomb = gzip.compress(b"A" * (64 << 20), compresslevel=9)  # 64 MiB of text in ~64 KB
    tracemalloc.start()
    with pytest.raises(CompressionBomb):
        decompress(bomb, ".gz", max_bytes=1 << 20)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 << 20  # the cap (1 MiB) and one step, not the 64 MiB it unpacks to
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "NEWS.gz").write_bytes(bomb)
    (docs / "ok.txt").write_text("A normal note.")
    lib = Library.open(tmp_path / "lib")
    r = sync(lib, [docs], [bert_encoder], SyncOptions(crawl=CrawlOptions(max_bytes=1 << 20)))
    assert r.added == 1 and [Path(p).name for p, _ in r.failed] == ["NEWS.gz"]
    assert "unpacks to more than 1.0 MiB" in r.failed[0][1] and "--max-size" in r.failed[0][1]
    lib.close()


def test_ext_adds_a_suffix_the_library_keeps(tmp_path, tiny_bert_bundle):
    docs = tmp_path / "logs"
    docs.mkdir()
    (docs / "boot.log").write_text("The network came up after the router restarted.\n")
    (docs / "a.py").write_text("x = 1\n")
    r = run("index", docs, "--bundle", tiny_bert_bundle, "--backend", "cpu")
    assert r.exit_code == 0
    said = " ".join(r.output.split())
    assert "0 files supported: 2 unsupported (.log 1, .py 1), e.g. a.py, boot.log." in said
    assert "--ext" in said
    r = run("index", docs, "--ext", ".log", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["added"] == 1
    r = run("index", "--json")  # a later run without --ext keeps the file
    assert json.loads(r.stdout)["unchanged"] == 1 and json.loads(r.stdout)["removed"] == 0
    st = json.loads(run("settings", "--json").stdout)
    assert {s["key"]: s["value"] for s in st["settings"]}["extra_suffixes"] == {".log": "text"}
    assert run("settings", "extra_suffixes", "py,.log,.xhtml=html").exit_code == 0
    r = run("index", "--json")
    assert json.loads(r.stdout)["added"] == 1  # a.py now
    assert run("index", docs, "--ext", "a/b").exit_code == 2


# -- 8. the ETA counts text, not files ------------------------------------------------------
def test_eta_comes_from_the_text_still_to_embed():
    from hefsearch.index.sync import SyncReport
    from hefsearch.index.sync_types import Job as _Job
    from hefsearch.index.sync_progress import Progress as _Progress

    class Chunk:
        def __init__(self, n):
            self.text = "x" * n

    now = [0.0]
    events = []
    small = _Job("/d/a.txt", 1_000, 0, "text", None, None)
    big = _Job("/d/all.html", 800_000, 0, "html", None, None)
    html2 = _Job("/d/b.html", 200_000, 0, "html", None, None)
    state = _Progress(events.append, 3, [small, big, html2], SyncReport(), clock=lambda: now[0])
    small.chunks = [(Chunk(1_000), 1)]
    state.read(small)
    now[0] = 1.0  # 1,000 characters embedded in one second
    state.embedded([small])
    state.tick(force=True)
    # 1,000,000 bytes of html left, none read yet: estimated at the text file's 1 char per byte
    assert events[-1].eta_s == pytest.approx(1000.0)
    big.chunks = [(Chunk(200_000), 1)]  # the page read: 1 char per 4 bytes of html
    state.read(big)
    state.tick(force=True)
    assert events[-1].text_left == 200_000 + 50_000
    assert events[-1].eta_s == pytest.approx(250.0)  # by file count it would say 2 s


# -- 10. smaller things -----------------------------------------------------------------------
def test_index_json_prints_a_summary_when_interrupted(tmp_path, tiny_bert_bundle, monkeypatch):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=6, paragraphs=6)
    restore = ctrl_c_on_batch(monkeypatch, 2)
    r = run("index", docs, "--bundle", tiny_bert_bundle, "--backend", "cpu", "--batch", "8", "--json")
    assert r.exit_code == 130
    summary = json.loads(r.stdout)
    assert summary["interrupted"] is True and summary["added"] >= 1 and summary["chunks_embedded"] >= 8
    assert "Interrupted after" in r.stderr
    # the library says the run did not finish, instead of "last sync: never"
    st = run("status")
    assert "interrupted" in st.output and "last sync: never" not in st.output
    assert json.loads(run("status", "--json").stdout)["interrupted"]
    restore()
    assert run("index").exit_code == 0
    assert "interrupted" not in run("status").output


def test_status_tells_symlinks_not_followed_from_failures(tmp_path, bert_encoder):
    docs, outside = tmp_path / "docs", tmp_path / "elsewhere"
    write_corpus(docs, n_files=1)
    outside.mkdir()
    for name in ("a", "b", "c"):
        (outside / f"{name}.txt").write_text("outside")
        (docs / f"link-{name}.txt").symlink_to(outside / f"{name}.txt")
    lib = Library.open(tmp_path / "lib")
    sync(lib, [docs], [bert_encoder])
    st = lib.status()
    assert st.failures == [] and len(st.notes) == 3 and "not followed" in st.notes[0][1]
    from hefsearch.index.crawl import skipped_text

    assert skipped_text(st.skipped) == "3 symlinks not followed (outside the folders)"
    lib.close()


def test_a_simulation_next_to_fp32_is_not_the_default_space(tmp_path, tiny_bert_bundle):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=2)
    lib = Library.open(tmp_path / "lib")
    with noisy_encoder(tiny_bert_bundle) as sim, Encoder.open(tiny_bert_bundle, backend="cpu") as cpu:
        assert sim.space_name == "npu-sim"
        sync(lib, [docs], [sim, cpu])  # as make demo indexes: --backend npu-sim --also-fp32
    assert lib.settings()["default_space"] == "cpu-fp32"
    from hefsearch.search import Searcher

    with Searcher(lib, bundle=str(tiny_bert_bundle)) as s:
        assert s.search(SearchRequest("invoice", mode="vector")).space == "cpu-fp32"
    lib.close()
    lib = Library.open(tmp_path / "lib-sim-only")
    with noisy_encoder(tiny_bert_bundle) as sim:
        sync(lib, [docs], [sim])
    assert lib.settings()["default_space"] == "npu-sim"  # nothing else to search
    lib.close()

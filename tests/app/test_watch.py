"""``hefsearch watch``: changed paths only, under the crawl's rules; a real watcher process sees
a created, changed, renamed and deleted file reach search results, catches up after
``kill -9``, waits for another writer's lock, polls when asked, and shows in ``status``."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from hefsearch.embed import Encoder
from hefsearch.index.crawl import FoundFile, crawl, crawl_paths
from hefsearch.index.crawl_options import CrawlOptions
from hefsearch.index.library import Library
from hefsearch.index.sync import sync
from hefsearch.search.request import SearchRequest
from tests.support.process_helpers import HEFSEARCH, Proc, wait_until
from tests.support.serve_fixtures import build_library, write_docs


def keyword_names(library: Path, word: str) -> list[str]:
    """File names of the keyword hits for ``word``, read as a separate reader would."""
    from hefsearch.search import Searcher

    with Library.open(library, create=False, read_only=True) as lib:
        result = Searcher(lib).search(SearchRequest(word, k=20, mode="keyword"))
    return sorted(Path(h.path).name for h in result.hits)


@contextlib.contextmanager
def running_watcher(lib: Path, open_encoders, events: list, **options):
    """A :class:`Watcher` of ``lib`` running in a thread (debounce 200 ms, no rescans, plus
    ``options``), its events appended to ``events``, stopped and joined on the way out; yields
    the thread."""
    import threading

    from hefsearch.app.watch import WatchOptions, Watcher

    watcher = Watcher(lib, options=WatchOptions(debounce_ms=200, step_ms=50, rescan_s=0, **options),
                      open_encoders=open_encoders, on_event=events.append)
    thread = threading.Thread(target=watcher.run, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        watcher.stop()
        thread.join(timeout=10)


def cpu_encoders(bundle: Path):
    """``open_encoders`` for a watcher: the bundle's CPU encoder, one thread."""
    from hefsearch.index.encoders import EncoderChoice

    return lambda: EncoderChoice([Encoder.open(bundle, backend="cpu", threads=1)])


# -- changed paths, same rules ----------------------------------------------------------------
def _tree(root: Path) -> Path:
    files = {
        "a.md": "alpha", "sub/b.txt": "bravo", "sub/drafts/c.md": "charlie", "sub/keep.md": "delta",
        "sub/.hefsearchignore": "drafts/\n*.log.md\n", "sub/x.log.md": "echo", ".hidden/d.md": "foxtrot",
        "sub/credentials.txt": "secret", "big.txt": "x" * 5000, "sub/deep/e.txt": "golf", "f.bin": "no",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "sub/link.md").symlink_to("/etc/hostname")
    return root


def test_crawl_paths_yields_what_a_full_crawl_yields_for_those_paths(tmp_path):
    root = _tree(tmp_path / "root")
    options = CrawlOptions(max_bytes=1000)
    full = {str(i.path): type(i).__name__ + getattr(i, "counted_as", "") for i in crawl([root], options)}
    targets = ["a.md", "sub", "sub/b.txt", "sub/drafts/c.md", "sub/x.log.md", ".hidden/d.md",
               "sub/credentials.txt", "big.txt", "sub/deep", "sub/link.md", "f.bin", "gone.md"]
    for rel in targets:
        target = str(root / rel)
        got = {str(i.path): type(i).__name__ + getattr(i, "counted_as", "")
               for i in crawl_paths([root], [root / rel], options)}
        expected = {p: k for p, k in full.items() if p == target or p.startswith(target + os.sep)}
        assert got == expected, rel
    found = {Path(i.path).name for i in crawl_paths([root], [root / "sub"], options) if isinstance(i, FoundFile)}
    assert found == {"b.txt", "keep.md", "e.txt"}  # ignored, secret and linked-out files stay out
    assert list(crawl_paths([root], [tmp_path / "elsewhere.md", Path("/etc/hostname")])) == []
    single = root / "a.md"  # a file given as a root (hefsearch index a.md)
    assert [i.path for i in crawl_paths([single], [single])] == [single]


def test_a_sync_of_some_paths_leaves_the_rest_as_it_is(tiny_bert_bundle, tmp_path):
    docs = write_docs(tmp_path / "docs")
    lib = build_library(tmp_path / "lib", docs, tiny_bert_bundle)
    (docs / "notes/alpha.md").write_text("The alpha report now mentions quokka habitats.\n")
    (docs / "web/report.html").write_text("<p>The report now mentions quokka sightings.</p>")
    (docs / "old/archive.txt").unlink()
    with Library.open(lib) as library, Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        report = sync(library, [docs], [enc], paths=[docs / "notes/alpha.md"])
        assert (report.changed, report.removed, report.added) == (1, 0, 0)
        assert library.settings()["last_sync"]["partial"] is True
    assert keyword_names(lib, "quokka") == ["alpha.md"]  # report.html not looked at
    assert keyword_names(lib, "archived") == ["archive.txt"]  # not named: not removed
    with Library.open(lib) as library, Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        report = sync(library, [docs], [enc], paths=[docs / "old", docs / "web"])
        assert (report.changed, report.removed) == (1, 1)
    assert keyword_names(lib, "quokka") == ["alpha.md", "report.html"]
    assert keyword_names(lib, "archived") == []


# -- a real watcher ----------------------------------------------------------------------------
@pytest.fixture
def watched(tiny_bert_bundle, tmp_path):
    docs = write_docs(tmp_path / "docs")
    lib = build_library(tmp_path / "lib", docs, tiny_bert_bundle)
    env = {"HEFSEARCH_HOME": str(tmp_path / "home")}
    procs: list[Proc] = []

    def start(*extra: str) -> Proc:
        proc = Proc(["watch", "--library", str(lib), "--debounce", "300", "--rescan", "0", *extra], env)
        procs.append(proc)
        proc.wait_for(r"caught up all folders", timeout=90)
        return proc

    yield docs, lib, env, start
    for proc in procs:
        proc.stop()


def test_created_changed_renamed_and_deleted_files_reach_search(watched):
    docs, lib, env, start = watched
    proc = start()
    caught_up = next(line for line in proc.lines if "caught up" in line)  # nothing changed: only stat-ed
    assert "0 added, 0 changed, 0 removed, 0 failed, 0 chunks embedded" in caught_up
    try:
        _lifecycle(docs, lib)
    except AssertionError as e:
        raise AssertionError(f"{e}\nwatcher said:\n" + "\n".join(proc.lines[-20:])) from None


def _lifecycle(docs: Path, lib: Path) -> None:
    (docs / "notes/new.md").write_text("A new note about the wombat migration.\n")
    wait_until(lambda: keyword_names(lib, "wombat") == ["new.md"], what="a created file")
    (docs / "notes/new.md").write_text("The note now talks about the platypus instead.\n")
    wait_until(lambda: keyword_names(lib, "platypus") == ["new.md"] and not keyword_names(lib, "wombat"),
               what="a changed file")
    os.rename(docs / "notes/new.md", docs / "notes/renamed.md")
    wait_until(lambda: keyword_names(lib, "platypus") == ["renamed.md"], what="a renamed file")
    os.rename(docs / "notes", docs / "moved-notes")  # a whole folder moves
    wait_until(lambda: _paths(lib, "platypus") == [str(docs / "moved-notes/renamed.md")], what="a moved folder")
    (docs / "moved-notes/renamed.md").unlink()
    wait_until(lambda: keyword_names(lib, "platypus") == [], what="a deleted file")
    (docs / "moved-notes/.secret.md").write_text("hidden platypus\n")  # hidden: never indexed
    (docs / "moved-notes/credentials.md").write_text("platypus password\n")  # secret-file rule
    (docs / "moved-notes/visible.md").write_text("a visible platypus\n")
    wait_until(lambda: keyword_names(lib, "platypus") == ["visible.md"], what="the crawl's rules")


def _paths(lib: Path, word: str) -> list[str]:
    from hefsearch.search import Searcher

    with Library.open(lib, create=False, read_only=True) as library:
        return [h.path for h in Searcher(library).search(SearchRequest(word, mode="keyword")).hits]


def test_catches_up_after_kill_9(watched):
    docs, lib, env, start = watched
    proc = start()
    (docs / "notes/first.md").write_text("Seen live: the narwhal.\n")
    wait_until(lambda: keyword_names(lib, "narwhal") == ["first.md"], what="a live change")
    proc.kill9()
    status = json.loads(subprocess.run([*HEFSEARCH, "status", "--json", "--library", str(lib)], env={**os.environ, **env},
                                       capture_output=True, text=True, check=True).stdout)
    assert status["freshness"]["watched"] is False  # the lock died with the process
    # while no watcher runs
    (docs / "notes/later.md").write_text("Written while nobody watched: the axolotl.\n")
    (docs / "notes/first.md").write_text("Changed while nobody watched: the axolotl again.\n")
    (docs / "web/report.html").unlink()
    assert keyword_names(lib, "axolotl") == []
    start()
    assert keyword_names(lib, "axolotl") == ["first.md", "later.md"]
    assert keyword_names(lib, "narwhal") == [] and "report.html" not in keyword_names(lib, "zephyr")


def test_waits_for_another_writer_and_then_indexes(watched):
    docs, lib, env, start = watched
    proc = start()
    with Library.open(lib) as other, other.write_lock():  # e.g. hefsearch index running
        (docs / "notes/busy.md").write_text("Saved while another writer held the lock: the pangolin.\n")
        proc.wait_for(r"is writing to the library .* Trying again", timeout=60)
        assert keyword_names(lib, "pangolin") == []
    wait_until(lambda: keyword_names(lib, "pangolin") == ["busy.md"], timeout=60, what="the retried change")


def test_status_shows_a_running_watcher_and_polling_works(watched):
    docs, lib, env, start = watched
    proc = start("--poll", "--poll-interval", "0.5")
    assert any("polling every 0.5 s" in line for line in proc.lines)
    (docs / "notes/polled.md").write_text("Found by polling: the okapi.\n")
    wait_until(lambda: keyword_names(lib, "okapi") == ["polled.md"], what="a polled change")
    out = subprocess.run([*HEFSEARCH, "status", "--json", "--library", str(lib)], env={**os.environ, **env},
                         capture_output=True, text=True, check=True).stdout
    fresh = json.loads(out)["freshness"]
    assert fresh["watched"] is True and fresh["watcher"]["pid"] == proc.popen.pid
    assert fresh["watcher"]["mode"].startswith("polling") and fresh["age_s"] < 60
    text = subprocess.run([*HEFSEARCH, "status", "--library", str(lib)], env={**os.environ, **env},
                          capture_output=True, text=True, check=True).stdout
    assert f"watched (polling every 0.5 s, pid {proc.popen.pid})" in text
    second = Proc(["watch", "--library", str(lib)], env)
    second.wait_for(r"Another watcher \(pid \d+\) already follows", timeout=60)
    assert second.popen.wait(timeout=30) == 2


def test_network_mounts_are_polled_and_the_unit_runs_this_watch(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from hefsearch.app import watch
    from hefsearch.cli.main import main

    monkeypatch.setattr(watch, "filesystem_type", lambda p: "nfs4" if "nas" in str(p) else "ext4")
    assert watch.choose_mode([Path("/home/me/docs")], None) == (False, "local filesystems")
    poll, why = watch.choose_mode([Path("/mnt/nas/docs")], None)
    assert poll and "nfs4" in why
    assert watch.choose_mode([Path("/mnt/nas/docs")], False)[0] is False
    out = CliRunner().invoke(main, ["watch", "--print-systemd-unit", "--library", str(tmp_path / "lib"),
                                    "--poll", str(tmp_path)])
    assert out.exit_code == 0, out.output
    exec_start = next(line for line in out.output.splitlines() if line.startswith("ExecStart="))
    assert exec_start.split()[1:3] == ["watch", "--library"] or exec_start.split()[3:5] == ["watch", "--library"]
    assert str(tmp_path / "lib") in exec_start and exec_start.endswith(f"{tmp_path} --poll")
    assert "[Install]" in out.output and "WantedBy=default.target" in out.output
    assert watch.filesystem_type("/") is not None  # read from /proc/self/mountinfo
    # the shell's hefsearch settings go with it (not the server's token); a user unit cannot
    # wait for network-online.target; the folder the unit goes into may not exist yet
    out = CliRunner(env={"HEFSEARCH_THREADS": "2", "HEFSEARCH_SIM": "a8", "HEFSEARCH_TOKEN": "s3cret"}).invoke(
        main, ["watch", "--print-systemd-unit", "--library", str(tmp_path / "lib"), str(tmp_path)])
    env_lines = [line for line in out.output.splitlines() if line.startswith("Environment=")]
    assert "Environment=HEFSEARCH_THREADS=2" in env_lines and "Environment=HEFSEARCH_SIM=a8" in env_lines
    assert "s3cret" not in out.output and "network-online" not in out.output
    assert "mkdir -p ~/.config/systemd/user" in out.output and "hefsearch doctor" in out.output
    # both driver generations' device nodes, and no udev rule file that hailort-drivers 5.3 does not ship
    assert "/dev/hailo0" in out.output and "/dev/h1x-0" in out.output and "51-hailo-udev" not in out.output



def test_changed_paths_follow_the_crawl_options_of_the_last_index_run(tiny_bert_bundle, tmp_path):
    """hefsearch index --exclude/--max-size are remembered: a watcher's run skips the same files."""
    from hefsearch.app.reindex import reindex
    from hefsearch.index.encoders import EncoderChoice
    from hefsearch.index.sync import SyncOptions

    docs = write_docs(tmp_path / "docs")
    with Library.open(tmp_path / "lib") as library, Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        reindex(library, [docs], EncoderChoice([enc]),
                options=SyncOptions(crawl=CrawlOptions(excludes=("drafts/",), max_bytes=200)))
        assert library.settings()["crawl_options"]["excludes"] == ["drafts/"]
        (docs / "drafts").mkdir()
        (docs / "drafts/plan.md").write_text("A draft about the capybara.\n")
        (docs / "notes/long.md").write_text("capybara " * 100)
        (docs / "notes/short.md").write_text("A short capybara note.\n")
        run = reindex(library, [docs], EncoderChoice([enc]),
                      paths=[docs / "drafts/plan.md", docs / "notes/long.md", docs / "notes/short.md"])
        assert run.report.added == 1 and [p for p, _ in run.report.failed] == [str(docs / "notes/long.md")]
    assert keyword_names(tmp_path / "lib", "capybara") == ["short.md"]


def test_a_quiet_watcher_lets_the_encoders_go(tiny_bert_bundle, tmp_path):
    """The NPU (here the CPU encoder) is opened for a run and closed after idle_close_s."""
    from hefsearch.index.encoders import EncoderChoice

    docs = write_docs(tmp_path / "docs")
    lib = build_library(tmp_path / "lib", docs, tiny_bert_bundle)
    opened, closed = [], []

    def open_encoders():
        enc = Encoder.open(tiny_bert_bundle, backend="cpu", threads=1)
        opened.append(enc)
        choice = EncoderChoice([enc])
        real_close = choice.close
        choice.close = lambda: (closed.append(enc), real_close())
        return choice

    events = []
    with running_watcher(lib, open_encoders, events, idle_close_s=0.5) as thread:
        wait_until(lambda: any(e.kind == "run" for e in events), what="the catch-up")
        wait_until(lambda: len(closed) == 1, what="the encoders closed after the catch-up")
        (docs / "notes/idle.md").write_text("A note about the tapir.\n")
        wait_until(lambda: keyword_names(lib, "tapir") == ["idle.md"], what="the change")
        assert len(opened) == 2  # opened again for the change
        wait_until(lambda: len(closed) == 2, what="the encoders closed again")
    assert not thread.is_alive() and events[-1].kind == "stop"


def test_watch_reads_what_index_reads_and_escapes_the_names_it_prints(tiny_bert_bundle, tmp_path, capsys):
    """After ``index --ext .log`` the watcher indexes new .log files, names without a suffix and
    .gz files (as index does), and a hostile file name cannot drive the terminal or forge a line."""
    import gzip

    from hefsearch.app.reindex import reindex
    from hefsearch.cli.cmd_watch import print_watch_event
    from hefsearch.index.encoders import EncoderChoice
    from hefsearch.index.sync import SyncOptions

    docs = write_docs(tmp_path / "docs")
    lib = tmp_path / "lib"
    with Library.open(lib) as library, Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        reindex(library, [docs], EncoderChoice([enc]),
                options=SyncOptions(crawl=CrawlOptions(extra_suffixes={".log": "text"})))
    events = []
    evil = docs / "notes" / "evil\n12:00:00 indexed 0 path(s)\x1b]0;pwned\x07.txt"
    with running_watcher(lib, cpu_encoders(tiny_bert_bundle), events):
        wait_until(lambda: any(e.kind == "run" for e in events), what="the catch-up")
        (docs / "notes/app.log").write_text("The okapi log line.\n")
        (docs / "notes/NOTES").write_text("Notes on the okapi.\n")
        (docs / "notes/old.txt.gz").write_bytes(gzip.compress(b"An okapi archived long ago.\n"))
        evil.write_bytes(bytes(range(256)) * 40)  # binary: not indexed, and said so
        wait_until(lambda: keyword_names(lib, "okapi") == ["NOTES", "app.log", "old.txt.gz"], timeout=20,
                   what="the .log, suffix-less and .gz files")
        failed = wait_until(lambda: next((e for e in events if e.run and e.run.report.failed), None), timeout=20,
                            what="the binary file reported")
    capsys.readouterr()
    print_watch_event(failed)
    printed = capsys.readouterr().err
    assert "\x1b" not in printed and "\x07" not in printed
    lines = printed.splitlines()
    assert len(lines) == 2 and lines[1].startswith("  not indexed: ") and "evil" in lines[1]


def test_a_watcher_follows_the_remembered_include_hidden(tiny_bert_bundle, tmp_path):
    """After ``index --include-hidden``, a new file under a dot-folder is searchable within
    seconds: the watcher reads the options the library remembers, not defaults of its own."""
    from hefsearch.app.indexing import run_index
    from hefsearch.app.requests import IndexRequest

    docs = write_docs(tmp_path / "docs")
    (docs / ".notes").mkdir()
    (docs / ".notes/old.md").write_text("An old hidden note about the heron.\n")
    lib = tmp_path / "lib"
    run_index(IndexRequest(paths=[str(docs)], library_path=str(lib), bundle=str(tiny_bert_bundle), backend="cpu",
                           crawl={"include_hidden": True}))
    assert keyword_names(lib, "heron") == ["old.md"]
    events = []
    with running_watcher(lib, cpu_encoders(tiny_bert_bundle), events):
        wait_until(lambda: any(e.kind == "run" for e in events), what="the catch-up")
        (docs / ".notes/new.md").write_text("A hidden note about the ibex.\n")
        wait_until(lambda: keyword_names(lib, "ibex") == ["new.md"], timeout=15, what="the file under .notes/")
    assert [e for e in events if e.kind == "run"][-1].run.report.added == 1  # a path run, not a rescan

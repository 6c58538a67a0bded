"""A one-shot ``hefsearch search`` (issue 22, cold start): the library opened without loading
its spaces, the query's encoder opened on a background thread while the searched space's index
loads, and the process ending without Python's teardown once all is printed. Each test checks
that the shortcut gives what the long way gives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from hefsearch.app.session import LibrarySession
from hefsearch.cli.main import main
from hefsearch.embed.encoder import Encoder
from hefsearch.index.faiss_index import INDEX_FILE, index_ids
from hefsearch.index.library import Library
from hefsearch.index.spaces import Space
from hefsearch.search.request import SearchRequest

from tests.support.library_helpers import small_indexed_library


@pytest.fixture
def library_with_docs(tmp_path, tiny_bert_bundle):
    return small_indexed_library(tmp_path, tiny_bert_bundle)


@pytest.fixture
def index_reads(monkeypatch):
    """The spaces whose FAISS index was read from disk, in order."""
    reads: list[str] = []
    original = Space._read_index

    def counting(self):
        reads.append(self.info.name)
        return original(self)

    monkeypatch.setattr(Space, "_read_index", counting)
    return reads


def _query_word(library: Path) -> str:
    with Library.open(library, read_only=True) as lib:
        text = lib.query("SELECT text FROM chunks ORDER BY id LIMIT 1")[0][0]
    return text.split()[0]


def test_a_lazy_open_reads_a_space_index_only_when_the_space_is_used(library_with_docs, index_reads):
    with Library.open(library_with_docs, load_spaces=False) as lib:
        assert lib.space_names() == ["cpu-fp32"]
        assert lib.space_info("cpu-fp32").count > 0
        assert index_reads == []  # nothing read yet: a keyword search never reads it
        sp = lib.space("cpu-fp32")
        assert index_reads == []  # a flat index is read only when more than a search needs it
        assert sp.index.ntotal == lib.space_info("cpu-fp32").count
        assert index_reads == ["cpu-fp32"]
        lib.space("cpu-fp32")
        assert index_reads == ["cpu-fp32"]  # once
    with Library.open(library_with_docs):
        assert index_reads == ["cpu-fp32", "cpu-fp32"]  # the default still loads every space at open


def _tamper(folder: Path) -> None:
    """Replace the space's FAISS index with one holding other vectors under the same ids."""
    import faiss

    old = faiss.read_index(str(folder / INDEX_FILE))
    ids = faiss.vector_to_array(old.id_map) if hasattr(old, "id_map") else None
    fake = faiss.IndexIDMap2(faiss.IndexFlatIP(old.d))
    fake.add_with_ids(np.random.default_rng(3).standard_normal((len(ids), old.d)).astype(np.float32), ids)
    faiss.write_index(fake, str(folder / INDEX_FILE))


def test_a_lazy_open_answers_from_a_damaged_index_as_the_eager_open_does_and_leaves_the_file_to_a_writer(
        library_with_docs):
    with Library.open(library_with_docs) as lib:
        folder = lib.space("cpu-fp32").folder
    _tamper(folder)
    damaged = (folder / INDEX_FILE).read_bytes()
    with Library.open(library_with_docs, load_spaces=False) as lib:
        sp = lib.space("cpu-fp32")
        ids = np.array(sorted(sp._members), np.int64)
        np.testing.assert_allclose(sp.index.reconstruct_batch(ids), sp.raw.get(ids), atol=1e-6)
    assert (folder / INDEX_FILE).read_bytes() == damaged  # a reader repairs nothing on disk
    with Library.open(library_with_docs) as lib:  # the next writer does
        assert lib.last_reconcile["cpu-fp32"]["rebuilt"]
    assert (folder / INDEX_FILE).read_bytes() != damaged


def _queries(dim: int, n: int = 4) -> np.ndarray:
    q = np.random.default_rng(7).standard_normal((n, dim)).astype(np.float32)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def test_a_lazy_flat_space_searches_its_raw_vectors_as_the_flat_index_does(library_with_docs, index_reads):
    """Without reading the flat index (nor importing FAISS): the same hits and scores, with and
    without a candidate filter, as the eagerly loaded index gives."""
    with Library.open(library_with_docs) as lib:
        sp = lib.space("cpu-fp32")
        q = _queries(sp.info.dim)
        some = sorted(sp._members)[::2]
        want = sp.search(q, 5), sp.search(q, 3, allowed=some + [10**9])
    index_reads.clear()
    with Library.open(library_with_docs, load_spaces=False) as lib:
        sp = lib.space("cpu-fp32")
        got = sp.search(q, 5), sp.search(q, 3, allowed=some + [10**9])
        assert index_reads == [] and sp._deferred
        too_many = sp.search(q[:1], sp.count + 5)  # more than it holds: the rest are empty slots
    for (ws, wi), (gs, gi) in zip(want, got):
        np.testing.assert_allclose(gs, ws, atol=1e-5)
        # chunks of equal text tie: within a tie either order is right
        assert [sorted(zip(np.round(s, 4), i)) for s, i in zip(gs, gi)] == \
            [sorted(zip(np.round(s, 4), i)) for s, i in zip(ws, wi)]
    assert (too_many[1][0, : sp.count] >= 0).all() and (too_many[1][0, sp.count :] == -1).all()


def test_a_lazy_flat_space_answers_from_its_raw_vectors_when_the_index_file_is_damaged(library_with_docs):
    with Library.open(library_with_docs) as lib:
        sp = lib.space("cpu-fp32")
        q = _queries(sp.info.dim)
        want = sp.search(q, 5)
        folder = sp.folder
    _tamper(folder)
    with Library.open(library_with_docs, load_spaces=False) as lib:
        got = lib.space("cpu-fp32").search(q, 5)
    np.testing.assert_allclose(got[0], want[0], atol=1e-5)  # the raw vectors' scores, not the damaged index's


def test_a_lazy_flat_space_reads_its_index_before_a_change(library_with_docs, index_reads):
    """A writer that opened lazily and then forgets vectors gets an index that follows."""
    with Library.open(library_with_docs, load_spaces=False) as lib:
        sp = lib.space("cpu-fp32")
        gone = sorted(sp._members)[:3]
        with lib.write_lock():
            sp.forget(gone)
        assert index_reads == ["cpu-fp32"] and not sp._deferred
        assert sp.index.ntotal == sp.count
        assert not set(gone) & set(index_ids(sp.index).tolist())


@pytest.fixture
def encoder_opens(monkeypatch):
    """(thread name, backend) of every Encoder.open, and every Encoder.close."""
    opened, closed = [], []
    original_open, original_close = Encoder.open.__func__, Encoder.close

    def recording_open(cls, *a, **k):
        enc = original_open(cls, *a, **k)
        opened.append(threading.current_thread().name)
        return enc

    def recording_close(self):
        closed.append(self)
        return original_close(self)

    monkeypatch.setattr(Encoder, "open", classmethod(recording_open))
    monkeypatch.setattr(Encoder, "close", recording_close)
    return opened, closed


def test_a_prefetched_encoder_is_opened_on_another_thread_and_gives_the_same_hits(library_with_docs,
                                                                                 encoder_opens):
    opened, _ = encoder_opens
    word = _query_word(library_with_docs)
    request = SearchRequest(query=word, mode="vector", k=5)
    with LibrarySession.open(library_with_docs) as session:
        plain = session.search(request)
    assert opened == [threading.current_thread().name]
    with LibrarySession.open(library_with_docs, load_spaces=False) as session:
        session.prefetch(request)
        fetched = session.search(request)
        session.search(request)  # the same encoder again
    assert opened[1:] == ["hefsearch-encoder-open"]
    assert [h.score for h in fetched.hits] == pytest.approx([h.score for h in plain.hits], abs=1e-6)
    assert _ranked(fetched.hits) == _ranked(plain.hits) and plain.hits


def _ranked(hits) -> list:
    """(score, file) in rank order, ties in path order (chunks of equal text tie: either is
    right; the eager open's FAISS index and the lazy open's raw vectors may pick another)."""
    return sorted((-round(h.score, 5), h.path) for h in hits)


def test_a_keyword_search_prefetches_no_encoder(library_with_docs, encoder_opens, index_reads):
    opened, _ = encoder_opens
    request = SearchRequest(query=_query_word(library_with_docs), mode="keyword", k=5)
    index_reads.clear()  # _query_word's own eager open
    with LibrarySession.open(library_with_docs, load_spaces=False) as session:
        session.prefetch(request)
        assert session.search(request).hits
    assert opened == [] and index_reads == []


def test_a_prefetch_that_fails_raises_the_searchs_own_error_in_the_callers_thread(library_with_docs, tmp_path):
    own = tmp_path / "own-bundle"  # the session's shared bundle stays where it is
    with Library.open(library_with_docs) as lib:
        shutil.copytree(lib.settings()["bundle"], own)
        lib.set_settings(bundle=str(own))
    own.rename(tmp_path / "moved-bundle")
    request = SearchRequest(query="anything", mode="vector", k=3)
    errors = []
    for prefetch in (False, True):
        with LibrarySession.open(library_with_docs, load_spaces=False) as session:
            if prefetch:
                session.prefetch(request)
            with pytest.raises(Exception) as e:
                session.search(request)
            errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]
    assert "bundle" in errors[0][1].lower()


def test_a_prefetched_encoder_the_search_never_used_is_closed_with_the_session(library_with_docs,
                                                                              encoder_opens):
    opened, closed = encoder_opens
    with LibrarySession.open(library_with_docs, load_spaces=False) as session:
        session.prefetch(SearchRequest(query="x", mode="hybrid"))
    assert opened == ["hefsearch-encoder-open"] and len(closed) == 1


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ""}
    return subprocess.run([sys.executable, "-m", "hefsearch", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_search_in_its_own_process_prints_all_its_output_and_exits_0(library_with_docs):
    """The quick exit (``os._exit`` after the flush) loses nothing: the JSON is whole, the table
    has every hit, and the timing line reaches stderr."""
    word = _query_word(library_with_docs)
    proc = _run_cli("search", word, "--library", str(library_with_docs), "--json", "-k", "20", "--all-chunks")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["query"] == word and len(doc["hits"]) >= 2
    table = _run_cli("search", word, "--library", str(library_with_docs), "-k", "20", "--all-chunks")
    assert table.returncode == 0, table.stderr
    # the file column read down the table (rich wraps a long path over several lines)
    files = "".join(line.split("│")[3].strip() for line in table.stdout.splitlines() if line.count("│") == 5)
    assert all(r["path"] in files for r in doc["hits"]), (files, [r["path"] for r in doc["hits"]])
    assert "hybrid · space cpu-fp32" in table.stderr


def test_a_search_that_fails_in_its_own_process_exits_2_the_usual_way(library_with_docs):
    proc = _run_cli("search", "word", "--library", str(library_with_docs), "--space", "nope")
    assert proc.returncode == 2 and "no vector space 'nope'" in proc.stderr


def test_search_invoked_in_process_returns_to_its_caller(library_with_docs):
    """``main`` (what tests and embedders call) never ends the process: only ``run`` does."""
    result = CliRunner().invoke(main, ["search", _query_word(library_with_docs), "--library",
                                       str(library_with_docs), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["hits"]


def test_a_search_loads_none_of_what_only_indexing_needs(library_with_docs):
    """Each of these cost a one-shot search milliseconds at start (measured with
    ``-X importtime``): the crawler's ignore rules (pathspec), a plugin scan
    (importlib.metadata), NumPy's random and masked-array packages, sqlite-utils (~70 ms, once
    the library's connection holder), FAISS (~50 ms; a flat space is searched from its raw
    vectors)."""
    code = ("import sys, json\nfrom hefsearch.cli.main import main\n"
            f"main(['search', 'word', '--library', {str(library_with_docs)!r}, '--json'], standalone_mode=False)\n"
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "hefsearch.search.searcher" in loaded  # it did search
    needless = {"pathspec", "importlib.metadata", "numpy.random", "numpy.ma", "sqlite_utils", "faiss"} & loaded
    assert not needless, f"a search loaded {sorted(needless)}"


def _blas_threads_seen(*args: str) -> str:
    """OPENBLAS_NUM_THREADS at the moment numpy is first imported by ``hefsearch ARGS --help``
    (OpenBLAS reads it as it loads; later changes do nothing), or ``never:`` and its value at
    the end when the command never loaded numpy."""
    code = ("import os, sys\nseen = []\n"
            "class Hook:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'numpy' and not seen:\n"
            "            seen.append(os.environ.get('OPENBLAS_NUM_THREADS', '-'))\n"
            "sys.meta_path.insert(0, Hook())\n"
            "from hefsearch.cli import entry\n"
            "assert not seen, 'the entry point loaded numpy'\n"
            "sys.argv = ['hefsearch', *sys.argv[1:], '--help']\n"
            "try:\n    entry.run()\nexcept SystemExit:\n    pass\n"
            "print('SEEN', seen[0] if seen else 'never:' + os.environ.get('OPENBLAS_NUM_THREADS', '-'))\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env.update(dict(a.split("=", 1) for a in args if "=" in a))
    argv = [a for a in args if "=" not in a]
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True,
                         env=env, timeout=120).stdout
    return out.rsplit("SEEN ", 1)[-1].strip()


def test_a_one_shot_search_starts_numpy_with_one_blas_thread_and_other_verbs_keep_the_default():
    """OpenBLAS's idle workers spin as numpy loads and took the core a search's encoder opens
    on; the entry point sets the variable before anything loads numpy."""
    assert _blas_threads_seen("search") == "1"
    assert _blas_threads_seen("-v", "search") == "1"
    assert _blas_threads_seen("search", "OPENBLAS_NUM_THREADS=2") == "2"  # the user's own wins
    assert _blas_threads_seen("index") in ("-", "never:-")
    assert _blas_threads_seen("serve") in ("-", "never:-")


class _Closed:
    """Stands for a closed session whose encoders are slow to free."""


def test_run_keeps_what_a_one_shot_command_leaves_until_its_quick_exit(monkeypatch):
    """Freeing multilingual-e5's 250k-piece tokenizer takes ~0.25 s with the GIL held: under
    ``run`` the closed session lives until ``os._exit``; in-process it is let go at once."""
    import gc
    import weakref

    import hefsearch.cli.main as cli_main

    monkeypatch.setattr(cli_main, "_quick_exit", False)
    monkeypatch.setattr(cli_main, "_left_to_exit", None)
    refs: list[weakref.ref] = []

    def one_shot(prog_name=None):
        obj = _Closed()
        refs.append(weakref.ref(obj))
        cli_main.may_exit_quickly(obj)
        raise SystemExit(0)

    with pytest.raises(SystemExit):  # in-process (no run): nothing is held
        one_shot()
    gc.collect()
    assert refs[-1]() is None

    class Exited(Exception):
        pass

    def fake_exit(code):
        assert refs[-1]() is not None, "freed before the exit"
        raise Exited(code)

    monkeypatch.setattr(cli_main, "main", one_shot)
    monkeypatch.setattr(cli_main.os, "_exit", fake_exit)
    with pytest.raises(Exited):
        cli_main.run()
    gc.collect()
    assert refs[-1]() is not None  # still held: the real os._exit would end the process here

"""Crash safety and concurrent readers, with real subprocesses.

A writer process indexes a corpus (tiny encoder, small batches, random sleeps inside each
batch — before the vectors are written, between writing them and the SQLite commit, after
the commit — so kills land everywhere). It is killed with SIGKILL at random moments; after
every kill the library opens consistent (SQLite and FAISS hold the same chunk ids in every
space), and a final run ends with exactly the chunks of a clean run.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time

import pytest

from hefsearch.embed import Encoder
from hefsearch.index.library import Library
from hefsearch.index.sync import sync
from hefsearch.search.request import SearchRequest
from tests.support.library_helpers import assert_consistent, chunk_rows, write_corpus

WRITER = r"""
import json, random, sys, time
from hefsearch.embed import Encoder
from hefsearch.index import spaces as S
from hefsearch.index import sync as syncmod
from hefsearch.index import sync_batches  # the batch stage's module: its commit
from hefsearch.index.library import Library

bundle, docs, libpath, delay, log, batch = sys.argv[1:7]
delay = float(delay)
rng = random.Random()
original_stage = S.Space.stage

def slow_stage(self, ids, vecs):
    time.sleep(delay * rng.random())
    seg = original_stage(self, ids, vecs)
    time.sleep(delay * rng.random())   # vectors on disk, SQLite transaction still open
    return seg

S.Space.stage = slow_stage
original_commit = sync_batches.commit

def logged_commit(*a, **kw):
    ids, removed = original_commit(*a, **kw)
    with open(log, "a") as f:
        f.write(json.dumps([int(i) for i in ids]) + "\n")
    time.sleep(delay * rng.random())
    return ids, removed

sync_batches.commit = logged_commit
lib = Library.open(libpath)
enc = Encoder.open(bundle, backend="cpu", threads=1)
alt = Encoder.open(bundle, backend="cpu", threads=1)
alt.backend.space_name = "alt"
print("ready", flush=True)
report = syncmod.sync(lib, [docs], [enc, alt], syncmod.SyncOptions(batch_chunks=int(batch)))
lib.close()
print("done", report.chunks_embedded, flush=True)
"""


def start_writer(tmp_path, bundle, docs, libpath, delay, batch=6):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    log = tmp_path / "commits.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(bundle), str(docs), str(libpath), str(delay), str(log), str(batch)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip() == "ready", proc.stderr.read()
    return proc, log


def complete_documents(library) -> None:
    """Every indexed document has all its chunks, and each chunk is in both spaces."""
    rows = library.query(
        "SELECT d.id, d.chunks, (SELECT COUNT(*) FROM chunks c WHERE c.doc_id = d.id) FROM documents d "
        "WHERE d.status = 'ok'")
    for doc, expected, have in rows:
        assert expected == have, f"document {doc} has {have} of {expected} chunks"
    chunk_ids = set(library.chunk_ids().tolist())
    for space in ("cpu-fp32", "alt"):
        if space in {s.name for s in library.spaces()}:
            assert set(library.member_ids(space).tolist()) == chunk_ids


@pytest.mark.timeout(240)
def test_sigkill_at_random_points_then_rerun_equals_clean_run(tmp_path, tiny_bert_bundle):
    docs = tmp_path / "docs"
    write_corpus(docs, n_files=40, paragraphs=4)
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        clean = Library.open(tmp_path / "clean")
        sync(clean, [docs], [enc])
        expected = chunk_rows(clean)
        clean.close()
    libpath = tmp_path / "lib"
    rng = random.Random(20240601)
    killed_mid_run = 0
    for _ in range(4):
        proc, _log = start_writer(tmp_path, tiny_bert_bundle, docs, libpath, delay=0.08)
        time.sleep(rng.uniform(0.2, 1.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        out = proc.stdout.read()
        if proc.returncode == -signal.SIGKILL and "done" not in out:
            killed_mid_run += 1
        lib = Library.open(libpath)  # reconcile runs here
        assert_consistent(lib)
        complete_documents(lib)
        lib.close()
    assert killed_mid_run >= 3, "the kills should land while the writer is working"
    proc, _log = start_writer(tmp_path, tiny_bert_bundle, docs, libpath, delay=0.0)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    lib = Library.open(libpath)
    assert_consistent(lib)
    complete_documents(lib)
    assert chunk_rows(lib) == expected  # none lost, none duplicated
    assert lib.space("cpu-fp32").count == lib.space("alt").count == len(expected)
    lib.close()


@pytest.mark.timeout(240)
def test_reader_in_another_process_never_sees_half_a_batch(tmp_path, tiny_bert_bundle):
    """The reader runs in this process while the writer subprocess commits batches; every
    vector search sees exactly the chunks of the first n committed batches, for some n."""
    from hefsearch.search import Searcher

    docs = tmp_path / "docs"
    write_corpus(docs, n_files=30, paragraphs=3)
    libpath = tmp_path / "lib"
    proc, log = start_writer(tmp_path, tiny_bert_bundle, docs, libpath, delay=0.05)
    observed: list[frozenset] = []
    searches = 0
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        reader = Library.open(libpath)
        searcher = Searcher(reader, encoders={"cpu-fp32": enc})
        deadline = time.time() + 120
        while time.time() < deadline:
            running = proc.poll() is None
            if "cpu-fp32" in searcher.space_names():
                res = searcher.search(SearchRequest("train station platform", k=5000, mode="vector", space="cpu-fp32", all_chunks=True))
                observed.append(frozenset(h.chunk_id for h in res.hits))
                for mode in ("keyword", "hybrid"):
                    searcher.search(SearchRequest("invoice tax deadline", k=20, mode=mode))
                searches += 1
            if not running:
                break
        reader.close()
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    batches = [json.loads(line) for line in log.read_text().splitlines()]
    prefixes = {frozenset()}
    acc: set[int] = set()
    for b in batches:
        acc |= set(b)
        prefixes.add(frozenset(acc))
    print(f"searches={searches} distinct={len(set(observed))} batches={len(batches)}")
    assert searches >= 5
    assert len({s for s in observed}) >= 3, "the reader should have seen the library grow"
    bad = [len(s) for s in observed if s not in prefixes]
    assert not bad, f"{len(bad)} searches saw a state that is no prefix of the committed batches"
    assert observed[-1] == frozenset(acc)

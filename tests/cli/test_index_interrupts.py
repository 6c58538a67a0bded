"""``hefsearch index`` stopped by real signals, in a child process: SIGKILL in the middle of a
mailbox and the run resumed (no committed message lost, none embedded twice), and SIGINT and
SIGTERM stopping a run with its summary and exit code."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

MESSAGES = 1500


def _mbox(path: Path, n: int) -> None:
    with open(path, "wb") as f:
        for i in range(n):
            f.write(b"From sender@example.org Fri Mar  1 09:30:00 2024\n")
            f.write(f"Message-ID: <m{i}@example.org>\nSubject: Message {i}\nFrom: a@example.org\n"
                    f"Date: Fri, 1 Mar 2024 09:30:00 +0000\n\nBody of message {i} mentions word{i} "
                    "and trains, invoices and the weather.\n\n".encode())


def _start(home: Path, *args) -> subprocess.Popen:
    env = {**os.environ, "HEFSEARCH_HOME": str(home), "HEFSEARCH_THREADS": "1", "HEFSEARCH_PROGRESS_SECONDS": "1"}
    env.pop("HEFSEARCH_LIBRARY", None)
    env.pop("HEFSEARCH_BUNDLE", None)
    return subprocess.Popen([sys.executable, "-m", "hefsearch", "index", *map(str, args)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _messages(db: Path) -> dict[str, tuple[int, ...]]:
    """Committed messages (path -> their chunk ids), read as another process reads them."""
    if not db.exists():
        return {}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute("SELECT d.path, c.id FROM documents d JOIN chunks c ON c.doc_id = d.id "
                            "WHERE d.path LIKE '%inbox.mbox/%' ORDER BY c.id").fetchall()
    except sqlite3.OperationalError:  # the tables are not created yet
        return {}
    finally:
        conn.close()
    out: dict[str, tuple[int, ...]] = {}
    for path, cid in rows:
        out[path] = out.get(path, ()) + (cid,)
    return out


def _kill_after(proc: subprocess.Popen, db: Path, more_than: int, kept: dict) -> dict:
    """SIGKILL ``proc`` once more than ``more_than`` messages are committed; every message
    committed before (``kept``) must be there, with its chunks, at every look meanwhile."""
    deadline = time.monotonic() + 150
    while True:
        now = _messages(db)
        lost = [p for p, ids in kept.items() if now.get(p) != ids]
        assert not lost, f"{len(lost)} committed messages lost or re-embedded, e.g. {lost[:3]}"
        if len(now) > more_than:
            break
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the index run committed too little"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    return _messages(db)


@pytest.mark.timeout(400)
def test_mailbox_killed_twice_resumes_without_losing_a_committed_message(tmp_path, tiny_bert_bundle):
    mail = tmp_path / "mail"
    mail.mkdir()
    _mbox(mail / "inbox.mbox", MESSAGES)
    home = tmp_path / "home"
    db = home / "library" / "library.db"
    first = _kill_after(_start(home, mail, "--bundle", tiny_bert_bundle, "--backend", "cpu", "--batch", "16"),
                        db, 150, {})
    assert 150 < len(first) < MESSAGES, "the first kill should land inside the mailbox"
    second = _kill_after(_start(home, mail, "--batch", "16"), db, len(first) + 100, first)
    assert len(second) < MESSAGES, "the second kill should land inside the mailbox"
    proc = _start(home, mail, "--batch", "16")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    final = _messages(db)
    assert len(final) == MESSAGES
    assert all(final[p] == ids for p, ids in second.items()), "a message committed before was embedded again"
    assert re.search(r"; at \S+inbox\.mbox: message \d+", err), err[-2000:]  # progress names the message


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.timeout(200)
def test_sigterm_and_ctrl_c_stop_a_run_with_its_summary(tmp_path, tiny_bert_bundle, sig, code):
    from tests.support.library_helpers import write_corpus

    docs = tmp_path / "docs"
    write_corpus(docs, n_files=300, paragraphs=6)
    home = tmp_path / "home"
    proc = _start(home, docs, "--bundle", tiny_bert_bundle, "--backend", "cpu", "--batch", "8", "--json")
    db = home / "library" / "library.db"
    deadline = time.monotonic() + 150
    while not _documents(db):  # a batch is committed: the run is well inside the folder
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err[-3000:]
    summary = json.loads(out)
    assert summary["interrupted"] is True and summary["added"] < 300  # (a signal between a commit and its count: 0)
    assert "Interrupted after" in err and "Traceback" not in err and "terminate called" not in err
    assert _documents(db) >= summary["added"]  # what the summary counts is committed
    status = subprocess.run([sys.executable, "-m", "hefsearch", "status", "--json"], capture_output=True, text=True,
                            env={**os.environ, "HEFSEARCH_HOME": str(home)}, timeout=120)
    st = json.loads(status.stdout)
    assert st["interrupted"] and st["unfinished"] == [str(docs)]


def _documents(db: Path) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute("SELECT COUNT(*) FROM documents WHERE status = 'ok'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()

"""A large Unigram tokenizer (multilingual-e5's 250k pieces) built for the few texts at hand.

Loading the whole ``tokenizer.json`` of multilingual-e5-small (17 MB, 250,002 pieces) takes
0.7 s on a quiet 2-core x86 and ~2 s loaded, and ~280 MB of memory: more than the rest of a
one-shot search. A Unigram (SentencePiece) model segments each pre-token by a Viterbi search
over the vocabulary pieces that occur in it as substrings, and an unknown character costs the
lowest piece score minus a constant. So a model holding only those pieces, the added tokens and
the lowest-scored piece gives exactly the same segmentation; its ids are mapped back to the
full vocabulary's.

The vocabulary is prepared once per tokenizer (keyed by the sha256 the manifest records) into
hefsearch's cache: an SQLite table of pieces, and the rest of ``tokenizer.json`` (normaliser,
pre-tokeniser, post-processor, added tokens) as a small JSON. A batch of texts then costs one
primary-key lookup per substring of at most the longest piece's length (a query: a few hundred;
the sentences of a hit: a few thousand) and a Tokenizer of those pieces, built in milliseconds.
Used for searching (:class:`~hefsearch.embed.host.HostPipeline` with ``few_texts``); indexing
keeps the whole tokenizer, which is faster per text once loaded. Tokenizers that are not Unigram,
or small, are never prepared (``None``: the caller loads ``tokenizer.json``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import threading
from pathlib import Path

import numpy as np

from .bundle import Bundle, sha256_file
from hefsearch.base.locations import cache_dir

#: vocabularies smaller than this load quickly enough whole (MiniLM's WordPiece: 30k)
MIN_VOCAB = 100_000
_SQL_VARS = 900  # under SQLite's default limit of bound parameters
_NOT_APPLICABLE = "not-applicable"


def prepare(bundle: Bundle) -> Path | None:
    """The prepared folder of ``bundle``'s tokenizer (made now, once, if missing), or None when
    the tokenizer is not a Unigram of at least :data:`MIN_VOCAB` pieces or cannot be prepared
    here (a read-only cache: the caller then loads the whole tokenizer)."""
    if int(bundle.manifest.get("model", {}).get("vocab") or 0) < MIN_VOCAB:
        return None
    source = bundle.path / "tokenizer.json"
    sha = bundle.file_sha256("tokenizer.json") or sha256_file(source)
    folder = cache_dir() / "tokenizers" / sha[:32]
    if (folder / _NOT_APPLICABLE).exists():
        return None
    if (folder / "shell.json").exists():
        return folder
    try:
        return _write(source, folder)
    except (OSError, sqlite3.Error, ValueError, KeyError):
        return None


def _write(source: Path, folder: Path) -> Path | None:
    data = json.loads(source.read_text(encoding="utf-8"))
    model = data.get("model") or {}
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".prep-", dir=folder.parent))
    try:
        vocab = model.get("vocab") or []
        if model.get("type") != "Unigram" or len(vocab) < MIN_VOCAB:
            (tmp / _NOT_APPLICABLE).write_text("")
        else:
            scores = [float(s) for _, s in vocab]
            keep = sorted({int(model.get("unk_id") or 0), int(np.argmin(scores)), *_post_ids(data.get("post_processor")),
                           *(int(t["id"]) for t in data.get("added_tokens", []) if int(t["id"]) < len(vocab))})
            db = sqlite3.connect(tmp / "vocab.sqlite")
            with db:
                db.execute("CREATE TABLE piece (text TEXT PRIMARY KEY, id INTEGER, score REAL) WITHOUT ROWID")
                # a piece listed twice keeps its first id, as the model's own piece -> id map does
                db.executemany("INSERT OR IGNORE INTO piece VALUES (?, ?, ?)",
                               ((p, i, s) for i, (p, s) in enumerate(vocab)))
            db.close()
            model = {k: v for k, v in model.items() if k != "vocab"}
            meta = {"keep": [[i, vocab[i][0], float(vocab[i][1])] for i in keep],
                    "max_chars": max(len(p) for p, _ in vocab), "size": len(vocab)}
            (tmp / "shell.json").write_text(json.dumps({**data, "model": model, "subset": meta}), encoding="utf-8")
        try:
            os.replace(tmp, folder)
        except OSError:  # another process prepared it meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder if (folder / "shell.json").exists() else None


class SubsetTokenizer:
    """``encode(texts)`` -> (ids in the full vocabulary, truncated?) per text, with the specials,
    truncated to ``max_length`` as the whole tokenizer would."""

    def __init__(self, folder: Path, max_length: int):
        from tokenizers import Tokenizer

        shell = json.loads((folder / "shell.json").read_text(encoding="utf-8"))
        meta = shell.pop("subset")
        self._shell = shell
        self._keep = {int(i): (p, s) for i, p, s in meta["keep"]}
        self._max_chars = int(meta["max_chars"])
        self.max_length = max_length
        self._db = sqlite3.connect(f"file:{folder / 'vocab.sqlite'}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        # normaliser and pre-tokeniser only: the substrings are looked up in what the model sees
        self._front = Tokenizer.from_str(self._json(sorted(self._keep))[0])

    def close(self) -> None:
        self._db.close()

    def encode(self, texts: list[str]) -> list[tuple[np.ndarray, bool]]:
        from tokenizers import Tokenizer

        found = self._pieces(texts)
        ids = sorted(set(self._keep) | set(found))
        text, extra = self._json(ids, found)
        tok = Tokenizer.from_str(text)
        tok.no_padding()
        tok.enable_truncation(max_length=self.max_length)
        back = np.asarray(ids + extra, dtype=np.int64)
        encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
        return [(back[np.asarray(e.ids, dtype=np.int64)], bool(e.overflowing))
                for e in encode(list(texts), add_special_tokens=True)]

    def _pieces(self, texts: list[str]) -> dict[int, tuple[str, float]]:
        """{id: (piece, score)} of every vocabulary piece occurring in the texts' pre-tokens."""
        norm, pre = self._front.normalizer, self._front.pre_tokenizer
        subs: set[str] = set()
        for text in texts:
            text = norm.normalize_str(text) if norm is not None else text
            words = [w for w, _ in pre.pre_tokenize_str(text)] if pre is not None else [text]
            for w in words:
                for i in range(len(w)):
                    subs.update(w[i:j] for j in range(i + 1, min(len(w), i + self._max_chars) + 1))
        subs = list(subs)
        out: dict[int, tuple[str, float]] = {}
        with self._lock:
            for k in range(0, len(subs), _SQL_VARS):
                part = subs[k:k + _SQL_VARS]
                rows = self._db.execute(f"SELECT text, id, score FROM piece WHERE text IN ({','.join('?' * len(part))})",
                                        part).fetchall()
                out.update((i, (p, s)) for p, i, s in rows)
        return out

    def _json(self, ids: list[int], found: dict[int, tuple[str, float]] | None = None) -> tuple[str, list[int]]:
        """(tokenizer.json of a model holding the pieces ``ids`` (in that order), every id in it
        (unknown piece, added tokens, post-processor specials) renumbered to its place there;
        the full-vocabulary ids of the added tokens numbered after them)."""
        pieces = {**(found or {}), **self._keep}
        place = {old: new for new, old in enumerate(ids)}
        shell = dict(self._shell)
        model = dict(shell["model"])
        model["vocab"] = [list(pieces[i]) for i in ids]
        model["unk_id"] = place[int(model.get("unk_id") or 0)]
        shell["model"] = model
        extra: list[int] = []  # added tokens outside the model's vocabulary keep a number of their own
        added = []
        for t in shell.get("added_tokens") or []:
            if int(t["id"]) not in place:
                place[int(t["id"])] = len(ids) + len(extra)
                extra.append(int(t["id"]))
            added.append({**t, "id": place[int(t["id"])]})
        shell["added_tokens"] = added
        shell["post_processor"] = _renumbered(shell.get("post_processor"), place)
        return json.dumps(shell), extra


def _renumbered(post, place: dict[int, int]):
    """A post-processor with its special tokens' ids moved to their place in the subset."""
    if not isinstance(post, dict):
        return post
    post = dict(post)
    kind = post.get("type")
    if kind == "TemplateProcessing":
        post["special_tokens"] = {name: {**tok, "ids": [place[int(i)] for i in tok["ids"]]}
                                  for name, tok in (post.get("special_tokens") or {}).items()}
    elif kind in ("RobertaProcessing", "BertProcessing"):
        for key in ("sep", "cls"):
            if key in post:
                post[key] = [post[key][0], place[int(post[key][1])]]
    elif kind == "Sequence":
        post["processors"] = [_renumbered(p, place) for p in post.get("processors") or []]
    return post


def _post_ids(post) -> set[int]:
    """The ids a post-processor adds (<s>, </s>, [CLS] ...): kept in every subset."""
    if not isinstance(post, dict):
        return set()
    if post.get("type") == "TemplateProcessing":
        return {int(i) for tok in (post.get("special_tokens") or {}).values() for i in tok["ids"]}
    if post.get("type") in ("RobertaProcessing", "BertProcessing"):
        return {int(post[k][1]) for k in ("sep", "cls") if k in post}
    if post.get("type") == "Sequence":
        return set().union(*(_post_ids(p) for p in post.get("processors") or []))
    return set()

"""Helpers shared by the library/search tests: corpora, encoder-call counting, invariants."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

TOPICS = [
    ("invoices", "The invoice lists the amount due, the tax and the payment deadline."),
    ("trains", "The train to the central station leaves from platform four every hour."),
    ("cooking", "Simmer the tomatoes with garlic and olive oil until the sauce thickens."),
    ("gardening", "Water the young plants in the morning and keep the soil loose around them."),
    ("hardware", "The router restarts when the firmware update is installed from the admin page."),
    ("health", "Drink enough water, sleep seven hours and walk for thirty minutes a day."),
    ("music", "The orchestra rehearsed the symphony twice before the evening concert."),
    ("taxes", "Send the tax return before the end of May to avoid a late filing penalty."),
]


def write_corpus(folder: Path, n_files: int = 8, paragraphs: int = 4, seed: int = 0) -> list[Path]:
    """``n_files`` small text documents of a few paragraphs each, deterministic."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n_files):
        name, base = TOPICS[i % len(TOPICS)]
        paras = []
        for p in range(paragraphs):
            words = base.split()
            rng.shuffle(words)
            paras.append(f"{base} Note {i}-{p}: " + " ".join(words) + ".")
        path = folder / f"{i:03d}-{name}.txt"
        path.write_text("\n\n".join(paras) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def count_passages(encoder) -> list[str]:
    """Record every passage text the encoder embeds (wraps ``encode_passages`` in place)."""
    seen: list[str] = []
    original = encoder.encode_passages

    def counting(texts):
        texts = list(texts)
        seen.extend(texts)
        return original(texts)

    encoder.encode_passages = counting
    return seen


def faiss_file_ids(space) -> set[int]:
    import faiss

    from hefsearch.index.spaces import INDEX_FILE, index_ids

    return set(index_ids(faiss.read_index(str(space.folder / INDEX_FILE))).tolist())


def assert_consistent(library) -> None:
    """SQLite and every space agree: FAISS (memory and file) ids == members, members ⊆ chunks,
    every member has a raw vector, FTS has exactly the chunks."""
    chunk_ids = set(library.chunk_ids().tolist())
    for table in ("chunks_fts", "chunks_cjk"):  # raises if the index disagrees with the content
        library.query(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
    for info in library.spaces():
        sp = library.space(info.name)
        members = set(library.member_ids(info.name).tolist())
        assert members <= chunk_ids
        from hefsearch.index.spaces import index_ids

        for ids in (set(index_ids(sp.index).tolist()), faiss_file_ids(sp)):
            if sp.removable():
                assert ids == members, f"FAISS != members in {info.name}"
            else:  # HNSW cannot delete: deleted ids stay as tombstones that search filters out
                assert ids >= members, f"FAISS lacks members in {info.name}"
        arr = np.fromiter(members, np.int64, len(members))
        assert sp.raw.has(arr).all()


def chunk_rows(library) -> list[tuple]:
    """Content of the library, independent of ids: (path, ordinal, text, start, end)."""
    return sorted(library.query(
        'SELECT d.path, c.ordinal, c.text, c.start, c."end" FROM chunks c '
        "JOIN documents d ON d.id = c.doc_id"))


def sim_library(folder: Path, sim_bundle: Path, *, n_files: int, paragraphs: int):
    """A library under ``folder`` indexed with the bundle's ``a8`` NPU simulation only (no FP32
    vectors yet); the caller closes it."""
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import sync

    docs = folder / "docs"
    write_corpus(docs, n_files=n_files, paragraphs=paragraphs)
    lib = Library.open(folder / "lib")
    with Encoder.open(sim_bundle, backend="npu-sim", profile="a8", threads=1) as enc:
        sync(lib, [docs], [enc])
    return lib


def small_indexed_library(folder: Path, bundle: Path) -> Path:
    """``folder/lib``: six files under ``folder/docs`` indexed in FP32 in batches of four
    chunks, the bundle recorded (so a search finds it); closed."""
    from hefsearch.embed import Encoder
    from hefsearch.index.library import Library
    from hefsearch.index.sync import SyncOptions, sync

    docs = folder / "docs"
    write_corpus(docs, n_files=6)
    path = folder / "lib"
    with Library.open(path) as lib, Encoder.open(bundle, backend="cpu", threads=1) as enc:
        lib.set_settings(bundle=str(bundle))
        sync(lib, [docs], [enc], SyncOptions(batch_chunks=4))
    return path


def ctrl_c_on_batch(monkeypatch, n: int = 2):
    """Make every Encoder raise KeyboardInterrupt (as Ctrl+C would) in its ``n``-th
    ``encode_passages`` call; returns the function that puts the real one back (not
    ``monkeypatch.undo()``: it would also undo the isolated HEFSEARCH_HOME)."""
    from hefsearch.embed.encoder import Encoder

    real = Encoder.encode_passages
    calls = []

    def interrupted(self, texts, *a, **kw):
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return real(self, texts, *a, **kw)

    monkeypatch.setattr(Encoder, "encode_passages", interrupted)
    return lambda: monkeypatch.setattr(Encoder, "encode_passages", real)

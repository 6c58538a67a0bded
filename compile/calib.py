"""Calibration set for the Dataflow Compiler, from the user's own documents.

The 8-bit ranges of every layer are set from what the calibration set makes the network see,
so it should look like what the NPU will embed: the user's document chunks, cut exactly as the
indexer cuts them (``hefsearch.index`` crawl -> extract -> chunk_text with the encoder's
``count_tokens`` and window), mixed with the bundled multilingual sample texts (which stand in
for queries: short, in many languages). Lengths are therefore distributed like real chunks.

Saved in the bundle as ``calib/calib_s<SEQ>.npz`` with the arrays the parsed network takes:

- ``embeddings`` float32 [N, 1, SEQ, H]: the host pipeline's word + position + type sums,
  exactly ``HostPipeline.embed(..., pad_to=SEQ)`` (zero-padded);
- ``mask`` float32 [N, 1, 1, SEQ]: the 0/1 token mask;
- ``lengths`` int32 [N] and ``source`` uint8 [N] (0 = user document, 1 = bundled sample).

The file is described, with its sha256, under the manifest's ``calibration`` key (not under
``files``: a bundle without ``calib/`` stays valid, e.g. on the Pi). It holds the user's text in a recoverable form (token embeddings), so do not share a bundle
with its ``calib/`` folder. The same seed over the same documents gives the same file.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from hefsearch.embed import samples
from hefsearch.base.atomic_write import write_atomic
from hefsearch.embed.bundle import Bundle, sha256_file
from hefsearch.base.errors import HefsearchError
from hefsearch.embed.host import HostPipeline

log = logging.getLogger("hefsearch.compile")

CALIB_DIR = "calib"
DEFAULT_N = 1024
#: below this many rows the ranges of a 16-layer network are poorly estimated
MIN_ROWS = 256
#: the bundled samples make up at most this share of the set
SAMPLE_SHARE_MAX = 0.25
#: read documents until the chunk pool is this many times the rows we need
POOL_FACTOR = 4
#: warn when calibration lengths differ this much (Kolmogorov-Smirnov) from the documents' chunks
KS_WARN = 0.2
OVERLAP_TOKENS = 32  # what the indexer uses (index/sync.py default)
_EMBED_BATCH = 128


class CalibrationError(HefsearchError):
    title = "calibration error"


@dataclass
class CalibSummary:
    file: str
    sha256: str
    rows: int
    seq_len: int
    hidden: int
    seed: int
    user_rows: int
    sample_rows: int
    files_read: int
    files_failed: int
    files_skipped: int
    pool_chunks: int
    length_edges: list[int]
    length_counts: list[int]
    pool_length_counts: list[int]
    ks_distance: float | None
    embeddings_min: float
    embeddings_max: float
    embeddings_abs_p999: float
    mask_ones_share: float
    warnings: list[str] = field(default_factory=list)
    #: what the user should know but need not act on now (a small library wholly drawn)
    notes: list[str] = field(default_factory=list)

    @property
    def whole_library(self) -> bool:
        """Every chunk the documents hold is in the set: more rows need more documents."""
        return 0 < self.pool_chunks == self.user_rows

    def to_dict(self) -> dict:
        return asdict(self)


def calib_rel_path(seq_len: int) -> str:
    return f"{CALIB_DIR}/calib_s{int(seq_len)}.npz"


def sample_texts() -> list[str]:
    """The bundled multilingual texts: VERIFY_TEXTS plus any parallel set the package ships."""
    out = list(samples.VERIFY_TEXTS)
    for name in ("PARALLEL_PAIRS", "PARALLEL_TEXTS", "PARALLEL_SET"):
        for item in getattr(samples, name, ()) or ():
            out += [t for t in (item if isinstance(item, (tuple, list)) else (item,)) if isinstance(t, str)]
    seen, unique = set(), []
    for t in out:
        if t.strip() and t not in seen:
            seen.add(t)
            unique.append(t)
    return unique


def length_edges(seq_len: int) -> list[int]:
    """Histogram bin edges in tokens: 1, 9, 17, 33, 65, ... up to seq_len + 1."""
    edges = [1]
    e = 8
    while e < seq_len:
        edges.append(e + 1)
        e *= 2
    edges.append(seq_len + 1)
    return edges


def _ks(a: np.ndarray, b: np.ndarray, seq_len: int) -> float | None:
    if len(a) == 0 or len(b) == 0:
        return None
    grid = np.arange(1, seq_len + 1)
    ca = np.searchsorted(np.sort(a), grid, side="right") / len(a)
    cb = np.searchsorted(np.sort(b), grid, side="right") / len(b)
    return float(np.max(np.abs(ca - cb)))


def collect_chunks(
    roots: Sequence[Path],
    count_tokens: Callable[[str], int],
    max_tokens: int,
    rng: np.random.Generator,
    target: int,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[tuple[str, int]], int, int, int]:
    """(chunks as (text, tokens), files read, files failed, files skipped), reading documents in
    a seeded random order until the pool holds ``target`` chunks or the documents run out."""
    from hefsearch.base.terminal_text import printable
    from hefsearch.index.chunk import chunk_text
    from hefsearch.index.crawl import FoundFile, crawl
    from hefsearch.index.crawl_options import DEFAULT_MAX_BYTES
    from hefsearch.readers.extract import extract

    found, skipped = [], 0
    for item in crawl([Path(r) for r in roots]):
        if isinstance(item, FoundFile) and item.kind != "image":  # images: OCR, too slow to draw from
            found.append(item)
        else:
            skipped += 1
    found.sort(key=lambda f: str(f.path))
    order = rng.permutation(len(found))
    pool: list[tuple[str, int]] = []
    read = failed = 0
    for i in order:
        if len(pool) >= target:
            break
        f = found[int(i)]
        try:
            doc = extract(f.path, kind=f.kind, max_bytes=DEFAULT_MAX_BYTES)  # the crawl's decision, as index
        except HefsearchError as e:
            failed += 1
            log.info("calibration: skipped %s (%s)", printable(f.path), e.message)
            continue
        except OSError as e:
            failed += 1
            log.info("calibration: skipped %s (%s)", printable(f.path), e)
            continue
        read += 1
        for c in chunk_text(doc, count_tokens, max_tokens, OVERLAP_TOKENS):
            pool.append((c.text, int(c.tokens)))
        if progress and read % 200 == 0:
            progress(f"read {read} of {len(found)} documents, {len(pool)} chunks")
    return pool, read, failed, skipped


@dataclass
class CalibTexts:
    """The drawn texts (prefixes applied) and where they came from; never saved as text."""

    texts: list[str]
    source: np.ndarray  # uint8: 0 = user document, 1 = bundled sample
    seq_len: int
    pool_lengths: np.ndarray  # token counts of every chunk read (the documents' distribution)
    files_read: int
    files_failed: int
    files_skipped: int

    @property
    def user_rows(self) -> int:
        return int((self.source == 0).sum())

    @property
    def sample_rows(self) -> int:
        return int((self.source == 1).sum())


def choose_texts(bundle: Bundle, roots: Sequence[str | Path], *, n: int = DEFAULT_N, seed: int = 0,
                 seq_len: int | None = None, progress: Callable[[str], None] | None = None) -> CalibTexts:
    """Draw the calibration texts: chunks of the documents under ``roots`` (cut as the indexer
    cuts them, passage prefix) and bundled samples (query prefix), in a seeded order."""
    seq = int(seq_len or bundle.seq_len)
    if seq > bundle.seq_len:
        raise CalibrationError(
            f"--seq-len {seq} is longer than the bundle's window ({bundle.seq_len} tokens).",
            f"Use --seq-len {bundle.seq_len} or less, or re-export the bundle with a longer --seq-len.")
    if n < 1:
        raise CalibrationError("--n must be at least 1.")
    say = progress or (lambda m: log.info(m))
    host = HostPipeline(bundle, max_tokens=seq)
    seq = host.max_tokens  # the position table may cap it
    prefixes = bundle.prefixes

    def count_tokens(text: str) -> int:  # exactly Encoder.count_tokens for passages
        return host.count_tokens(prefixes["passage"] + text)

    rng = np.random.default_rng(seed)
    sample = sample_texts()
    n_sample = min(len(sample), max(1, int(round(SAMPLE_SHARE_MAX * n))), n)
    n_user_target = n - n_sample
    say(f"Reading documents under {', '.join(str(r) for r in roots)}")
    pool, read, failed, skipped = collect_chunks(roots, count_tokens, seq, rng, POOL_FACTOR * max(n_user_target, 1),
                                                 say)
    if not pool:
        from hefsearch.readers.formats import suffix_list

        raise CalibrationError(
            f"No text found under {', '.join(str(r) for r in roots)} ({read} documents read, {failed} failed, "
            f"{skipped} skipped).",
            f"Point --from at folders with your documents ({suffix_list(', ')}).")
    n_user = min(n_user_target, len(pool))
    user_idx = rng.choice(len(pool), size=n_user, replace=False)
    sample_idx = rng.choice(len(sample), size=n_sample, replace=False)
    texts = [prefixes["passage"] + pool[int(i)][0] for i in user_idx]
    texts += [prefixes["query"] + sample[int(i)] for i in sample_idx]
    source = np.array([0] * n_user + [1] * n_sample, dtype=np.uint8)
    perm = rng.permutation(len(texts))
    return CalibTexts([texts[int(i)] for i in perm], source[perm], seq,
                      np.array([t for _, t in pool], dtype=np.int64), read, failed, skipped)


def embed_texts(bundle: Bundle, texts: list[str], seq_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(embeddings [N,1,S,H] float32, mask [N,1,1,S] float32, lengths [N] int32), exactly the
    host pipeline's ``embed(tokenize(texts).ids, pad_to=S)``."""
    host = HostPipeline(bundle, max_tokens=seq_len)
    rows, seq = len(texts), seq_len
    emb = np.zeros((rows, 1, seq, bundle.hidden), dtype=np.float32)
    mask = np.zeros((rows, 1, 1, seq), dtype=np.float32)
    lengths = np.zeros(rows, dtype=np.int32)
    for start in range(0, rows, _EMBED_BATCH):
        tok = host.tokenize(texts[start:start + _EMBED_BATCH])
        e, m = host.embed(tok.ids, pad_to=seq)
        emb[start:start + len(e), 0] = e
        mask[start:start + len(e), 0, 0] = m
        lengths[start:start + len(e)] = tok.lengths
    return emb, mask, lengths


def build_calibration(
    bundle: Bundle | str | Path,
    roots: Sequence[str | Path],
    *,
    n: int = DEFAULT_N,
    seed: int = 0,
    seq_len: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> CalibSummary:
    """Draw, embed and save a calibration set into ``bundle``; return its summary."""
    if not isinstance(bundle, Bundle):
        bundle = Bundle.open(bundle)
    say = progress or (lambda m: log.info(m))
    drawn = choose_texts(bundle, roots, n=n, seed=seed, seq_len=seq_len, progress=say)
    seq = drawn.seq_len
    say(f"Embedding {len(drawn.texts)} texts with the host pipeline (SEQ={seq})")
    emb, mask, lengths = embed_texts(bundle, drawn.texts, seq)
    rows = len(drawn.texts)

    rel = calib_rel_path(seq)
    path = bundle.path / rel
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:  # a file object: np.savez would append ".npz" to a name
            np.savez_compressed(f, embeddings=emb, mask=mask, lengths=lengths, source=drawn.source)

    write_atomic(path, write)

    edges = length_edges(seq)
    real = np.abs(emb[:, 0][mask[:, 0, 0, :] > 0]) if rows else np.zeros(1)
    summary = CalibSummary(
        file=rel, sha256="", rows=rows, seq_len=seq, hidden=bundle.hidden, seed=int(seed),
        user_rows=drawn.user_rows, sample_rows=drawn.sample_rows, files_read=drawn.files_read,
        files_failed=drawn.files_failed, files_skipped=drawn.files_skipped, pool_chunks=len(drawn.pool_lengths),
        length_edges=edges,
        length_counts=np.histogram(lengths, bins=edges)[0].tolist(),
        pool_length_counts=np.histogram(drawn.pool_lengths, bins=edges)[0].tolist(),
        # the documents' rows against the documents: the samples are short by nature, and their
        # share is judged on its own (_warnings)
        ks_distance=_ks(lengths[drawn.source == 0].astype(np.int64), drawn.pool_lengths, seq),
        embeddings_min=float(emb.min()), embeddings_max=float(emb.max()),
        embeddings_abs_p999=float(np.quantile(real, 0.999)) if real.size else 0.0,
        mask_ones_share=float(mask.mean()),
    )
    summary.warnings, summary.notes = _warnings(summary, n)
    summary.sha256 = sha256_file(path)
    # Recorded under "calibration", not "files": Bundle.open requires every listed file, and
    # calib/ is build input that a Pi does not need and a shared bundle should not carry.
    bundle.manifest.get("files", {}).pop(rel, None)
    bundle.manifest.setdefault("calibration", {})[f"s{seq}"] = summary.to_dict()
    bundle.save_manifest()
    return summary


def _warnings(s: CalibSummary, asked: int) -> tuple[list[str], list[str]]:
    """(warnings, notes). A small set drawn from every chunk of the documents is a note: it is
    all the library holds (a demo's, a first folder's), and the remedy is to make the set again
    when the library has grown; a small set that left chunks undrawn is a warning."""
    out, notes = [], []
    if s.rows < MIN_ROWS and s.whole_library:
        notes.append(f"Your documents hold {s.user_rows} chunks, all of them in the set ({s.rows} rows with "
                     f"the samples, asked {asked}); ranges from fewer than {MIN_ROWS} rows are rough. Make the "
                     "set again when the library has grown.")
    elif s.rows < MIN_ROWS:
        out.append(f"Only {s.rows} calibration rows (asked {asked}); below {MIN_ROWS} the 8-bit ranges are "
                   "poorly estimated. Point --from at more documents.")
    elif s.rows < asked:
        notes.append(f"Your documents gave {s.user_rows} chunks, so the set has {s.rows} rows instead of {asked}.")
    if s.rows and s.sample_rows / s.rows > 0.5:
        out.append(f"{s.sample_rows} of {s.rows} rows are bundled sample texts, not your documents: the ranges "
                   "may not fit your library. Point --from at more documents.")
    if s.ks_distance is not None and s.ks_distance > KS_WARN:
        out.append(f"The token lengths of the chunks drawn differ from your documents' (KS distance "
                   f"{s.ks_distance:.2f} > {KS_WARN}); the set is unlike the library it will embed.")
    return out, notes


def load_calibration(bundle: Bundle, seq_len: int, path: str | Path | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """(embeddings, mask, info) from ``path`` or the bundle's ``calib/calib_s<SEQ>.npz``.

    Arrays are returned as stored (no reshaping): the preflight judges them.
    """
    if path is None:
        rel = calib_rel_path(seq_len)
        path = bundle.path / rel
        if not path.is_file():
            raise CalibrationError(
                f"The bundle has no calibration set for SEQ={seq_len} ({path} is missing).",
                f"Make one from your documents: hefsearch compile calib {bundle.path} --from ~/Documents "
                f"--seq-len {seq_len}")
        info = dict(bundle.manifest.get("calibration", {}).get(f"s{seq_len}", {}))
        if info.get("sha256") and info["sha256"] != sha256_file(path):
            raise CalibrationError(f"{path} does not match the sha256 recorded in manifest.json.",
                                   "Rebuild it with 'hefsearch compile calib'.")
        info.setdefault("file", rel)
    else:
        path = Path(path).expanduser()
        info = {"file": str(path)}
    try:
        with np.load(path) as z:
            keys = set(z.files)
            if not {"embeddings", "mask"} <= keys:
                raise CalibrationError(f"{path} holds {sorted(keys)}; expected 'embeddings' and 'mask'.",
                                       "Make the set with 'hefsearch compile calib'.")
            emb, mask = z["embeddings"], z["mask"]
    except (OSError, ValueError) as e:
        raise CalibrationError(f"Cannot read {path}: {e}", "Make the set with 'hefsearch compile calib'.") from None
    if "sha256" not in info:  # setdefault would hash the file again when the manifest has it
        info["sha256"] = sha256_file(path)
    info.setdefault("rows", int(emb.shape[0]) if emb.ndim else 0)
    return emb, mask, info


def format_summary(s: CalibSummary) -> str:
    """A few lines for the terminal: counts, a length histogram against the documents, ranges."""
    lines = [
        f"{s.file}: {s.rows} rows x SEQ {s.seq_len} x H {s.hidden} (seed {s.seed})",
        f"  from your documents: {s.user_rows} chunks drawn from {s.pool_chunks} "
        f"({s.files_read} documents read, {s.files_failed} failed, {s.files_skipped} skipped)",
        f"  bundled multilingual samples: {s.sample_rows}",
        "  tokens      calib  documents",
    ]
    total = max(1, sum(s.length_counts))
    pool_total = max(1, sum(s.pool_length_counts))
    for lo, hi, c, p in zip(s.length_edges[:-1], s.length_edges[1:], s.length_counts, s.pool_length_counts):
        bar = "#" * int(round(30 * c / total))
        lines.append(f"  {lo:>4}-{hi - 1:<5} {100 * c / total:5.1f}%  {100 * p / pool_total:5.1f}%  {bar}")
    ks = "n/a" if s.ks_distance is None else f"{s.ks_distance:.3f}"
    lines.append(f"  length distance of the chunks drawn to your documents (KS): {ks}")
    lines.append(f"  embeddings: min {s.embeddings_min:.3f}, max {s.embeddings_max:.3f}, "
                 f"|x| p99.9 {s.embeddings_abs_p999:.3f}; mask: {100 * s.mask_ones_share:.1f}% real tokens")
    return "\n".join(lines)

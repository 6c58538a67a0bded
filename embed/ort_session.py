"""ONNX Runtime sessions for the CPU backends: the options, and a cache of optimised models.

ONNX Runtime optimises a graph at every session open; :func:`open_body_session` keeps its
optimised model (``SessionOptions.optimized_model_filepath``) in ``cache_dir()/ort``, keyed by
the body's manifest sha256, the file's size and mtime, the ONNX Runtime version, the machine and
the rewrite recipe, and later loads it with optimisation off.

An entry is a folder ``KEY.VARIANT/`` with ``model.onnx`` (the graph) and ``weights`` (its
initializers as external data, memory-mapped by ONNX Runtime: faster cold opens,
docs/performance.md). It is written whole in a temp folder and renamed into place, never
rewritten; one ONNX Runtime cannot load is removed and rebuilt; a read-only cache dir only costs
the optimisation. For a bulk encoder of an FP32 body the cached model has fused attention
(:mod:`hefsearch.embed.attention_fusion`, in a child process, when ``onnx`` is installed),
kept only if it matches the body on a probe batch (pooled cosine >= 0.99999).
``HEFSEARCH_ORT_CACHE=0`` turns the cache off, ``HEFSEARCH_ORT_FUSE=0`` the fusion. The bundle's
body file is never written.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from hefsearch.base import settings
from hefsearch.base.atomic_write import TMP_SUFFIX, fsync_dir, fsync_tree
from hefsearch.base.errors import BundleError

from .cpu_plan import SKIP_LAYER_NORM, default_threads

log = logging.getLogger("hefsearch.embed")

ENV_CACHE = settings.ORT_CACHE.name
ENV_FUSE = settings.ORT_FUSE.name
DEFAULT_PROVIDERS: tuple[str, ...] = ("CPUExecutionProvider",)
#: a fused copy must reproduce the body's pooled vectors at least this closely
FUSED_MIN_COSINE = 0.99999
#: optimised models kept (each about the body's size); the least recently used go first
CACHE_KEEP = 8
#: a cache entry's files: the graph, and its initializers as ONNX external data beside it
ENTRY_MODEL, ENTRY_WEIGHTS = "model.onnx", "weights"
#: a writer's temp folder older than this is a crashed writer's and is removed
STALE_STAGE_S = 3600
#: below this size an initializer stays inside the graph (shapes, scalars)
EXTERNAL_MIN_BYTES = 1024
#: the fusion child's wall-clock limit (it imports onnx and the optimizer: a few seconds)
FUSE_TIMEOUT_S = 300


def session_options(threads: int | None = None, *, optimize: bool = True, spinning: bool = False):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                     else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    opts.intra_op_num_threads = threads or default_threads()
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    # Spinning worker threads win a little on an idle machine and lose badly when the TUI,
    # an indexer and other processes share a Pi's cores: block instead.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    return opts


def make_session(path, threads: int | None = None, providers: Sequence[str] | None = None, *,
                 optimize: bool = True, save_to: str | None = None):
    """An ONNX Runtime session with a bounded thread pool on ``providers`` (default: CPU);
    ``save_to``: also write ONNX Runtime's optimised model there, its initializers in the file
    ``ENTRY_WEIGHTS`` beside it (what a cache entry holds)."""
    import onnxruntime as ort

    opts = session_options(threads, optimize=optimize)
    if save_to:
        opts.optimized_model_filepath = save_to
        opts.add_session_config_entry("session.optimized_model_external_initializers_file_name", ENTRY_WEIGHTS)
        opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes",
                                      str(EXTERNAL_MIN_BYTES))
    # fusions this processor runs slower than the ops they replace (embed/cpu_plan.py); only an
    # optimising open applies fusions, a cached optimised model keeps the form it was built with
    unfused = {"disabled_optimizers": list(graph_form())} if optimize and graph_form() else {}
    try:
        return ort.InferenceSession(str(path), sess_options=opts, providers=list(providers or DEFAULT_PROVIDERS),
                                    **unfused)
    except Exception as e:  # ORT raises its own Fail/InvalidGraph types
        raise BundleError(f"ONNX Runtime cannot load {path}: {e}", "Re-export the bundle.") from None


@dataclass(frozen=True)
class BodyFile:
    """The encoder body a CPU backend runs: its path, the sha256 the manifest records, and
    (for attention fusion) the model's head count and hidden size; ``fusable``: an FP32 body."""

    path: Path
    sha256: str
    heads: int = 0
    hidden: int = 0
    fusable: bool = False


def graph_form() -> tuple[str, ...]:
    """ONNX Runtime fusions left out on this processor (part of a cache entry's key)."""
    from .cpu_plan import current_plan

    return current_plan().unfused


def ort_cache_dir() -> Path:
    from hefsearch.base.locations import cache_dir

    return cache_dir() / "ort"


def cache_key(body: BodyFile, variant: str) -> str:
    import onnxruntime as ort

    from .attention_fusion import RECIPE

    st = body.path.stat()
    parts = [body.sha256, st.st_size, st.st_mtime_ns, ort.__version__, platform.machine(), RECIPE, variant,
             "external-weights", *graph_form()]
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:32]


def _enabled(setting: settings.Setting) -> bool:
    return setting.value("1").strip().lower() not in ("0", "false", "no", "off")


def fusion_available() -> bool:
    """The fusion child can run here: the onnx package is installed (found, not imported)."""
    return _enabled(settings.ORT_FUSE) and importlib.util.find_spec("onnx") is not None


def open_body_session(body: BodyFile, threads: int | None = None, providers: Sequence[str] | None = None,
                      *, bulk: bool = False) -> tuple[object, str]:
    """(session, what it runs) on ``body``, from the optimised-model cache when it holds one (see
    the module docstring); ``bulk``: build the fused copy on a miss (worth its seconds for a long
    run). What it runs: "fused", "optimised" (the body, ONNX Runtime's optimisation cached) or
    "uncached"."""
    if not _enabled(settings.ORT_CACHE) or (providers and list(providers) != list(DEFAULT_PROVIDERS)):
        # another provider optimises for its own device: its graph is not the CPU's to cache
        return make_session(body.path, threads, providers), "uncached"
    folder = ort_cache_dir()
    fused, plain = (folder / f"{cache_key(body, v)}.{v}" for v in ("fused", "plain"))
    if body.fusable:
        sess = _load_cached(fused, threads)
        if sess is not None:
            return sess, "fused"
        # a body the optimizer cannot fuse (another attention pattern) is tried once, not per open
        refused = fused.with_suffix(".refused")
        if bulk and fusion_available() and not refused.exists():
            sess = _build_fused(body, fused, threads)
            if sess is not None:
                return sess, "fused"
            _mark(refused)
    return _load_cached(plain, threads) or _build_cached(body.path, plain, threads), "optimised"


def _load_cached(entry: Path, threads: int | None):
    """The session of the cache entry ``entry``, None when absent; a damaged one is removed."""
    model = entry / ENTRY_MODEL
    if not model.exists():
        return None
    try:
        sess = make_session(model, threads, optimize=False)
    except BundleError as e:
        log.warning("the cached optimised model %s is unusable (%s): rebuilding it", entry, e)
        shutil.rmtree(entry, ignore_errors=True)
        return None
    with contextlib.suppress(OSError):  # recently used: kept when older ones are pruned
        os.utime(entry)
    return sess


def _mark(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError:
        pass


def _build_cached(src: Path, entry: Path, threads: int | None):
    """A session on ``src``, ONNX Runtime's optimised model of it kept as the cache entry ``entry``."""
    with _staging(entry) as stage:
        sess = make_session(src, threads, save_to=str(stage / ENTRY_MODEL) if stage else None)
        if stage:
            _commit(stage, entry)
        return sess


@contextlib.contextmanager
def _staging(entry: Path):
    """A temp folder beside ``entry`` to write it in, removed afterwards (whatever :func:`_commit`
    moved out of it stays); None when the cache dir refuses one (read-only, full): the session
    then runs without being kept."""
    try:
        stage = _stage_dir(entry)
    except OSError as e:
        log.info("cannot keep the optimised model in %s: %s", entry.parent, e)
        yield None
        return
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _stage_dir(entry: Path) -> Path:
    """An empty temp folder beside ``entry`` where its files are written before the rename."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    stage = entry.parent / f".{entry.name}.{secrets.token_hex(6)}{TMP_SUFFIX}"
    stage.mkdir(0o777)  # the umask applies, as for any folder the user makes (mkdtemp: 0700)
    return stage


def _commit(stage: Path, entry: Path) -> None:
    """Rename the written folder ``stage`` into place as ``entry``, durably; when another
    process got there first its entry stays (``stage`` is left for the caller to remove)."""
    try:
        fsync_tree(stage)
        os.rename(stage, entry)
    except OSError as e:  # the entry exists (a racing writer), or the disk refused
        if not (entry / ENTRY_MODEL).exists():
            log.info("cannot keep the optimised model in %s: %s", entry.parent, e)
        return
    fsync_dir(entry.parent)
    prune(entry.parent)


def prune(folder: Path, keep: int = CACHE_KEEP) -> None:
    """Remove all but the ``keep`` most recently used cache entries in ``folder``, and what
    older layouts left there (single-file models)."""
    with contextlib.suppress(OSError):
        for old in folder.glob("*.onnx"):  # the layout before entries were folders
            old.unlink(missing_ok=True)
    now = time.time()
    for stage in folder.glob(f".*{TMP_SUFFIX}"):  # a crashed writer's folder, long abandoned
        with contextlib.suppress(OSError):
            if now - stage.stat().st_mtime > STALE_STAGE_S:
                shutil.rmtree(stage, ignore_errors=True)
    entries = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
    entries.sort(key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in entries[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def _build_fused(body: BodyFile, target: Path, threads: int | None):
    """The fused copy built by the child, checked against the body, cached; None when it cannot be."""
    with tempfile.TemporaryDirectory(prefix="hefsearch-fuse-") as tmp:
        fused = Path(tmp) / "fused.onnx"
        cmd = [sys.executable, "-m", "hefsearch.embed.attention_fusion", str(body.path), str(fused),
               "--heads", str(body.heads), "--hidden", str(body.hidden)]
        if SKIP_LAYER_NORM in graph_form():
            cmd.append("--no-skip-layer-norm")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=FUSE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            log.info("attention fusion did not run: %s", e)
            return None
        if proc.returncode != 0 or not fused.exists():
            log.info("attention fusion found nothing to fuse in %s (%s)", body.path.name,
                     (proc.stderr or proc.stdout).strip()[-300:])
            return None
        with _staging(target) as stage:
            try:
                plain = make_session(body.path, 1)
                # ONNX Runtime's optimised model of the copy, written into the stage as the
                # session opens: renamed into place once the check passes, removed otherwise
                saved = str(stage / ENTRY_MODEL) if stage else None
                candidate = make_session(fused, threads, save_to=saved)
            except BundleError as e:
                log.info("the fused copy does not load: %s", e)
                return None
            cosine = probe_cosine(plain, candidate, body.hidden)
            if cosine < FUSED_MIN_COSINE:
                log.warning("the fused copy of %s differs from it (pooled cosine %.6f): not used",
                            body.path, cosine)
                return None
            if stage:
                _commit(stage, target)
            return candidate


def probe_cosine(a, b, hidden: int, seed: int = 0) -> float:
    """Lowest pooled cosine between two sessions of the same body on a padded probe batch."""
    import numpy as np

    from .host import mean_pool
    from .metrics import paired_cosine

    rng = np.random.default_rng(seed)
    lengths = [3, 17, 40]
    s = max(lengths)
    e = (rng.standard_normal((len(lengths), s, hidden)) * 0.5).astype(np.float32)
    mask = np.zeros((len(lengths), s), dtype=np.int64)
    for i, k in enumerate(lengths):
        mask[i, :k] = 1
        e[i, k:] = 0.0
    feed = {"embeddings": e, "attention_mask": mask}
    pooled = [mean_pool(sess.run(["last_hidden_state"], feed)[0], mask) for sess in (a, b)]
    return float(paired_cosine(*pooled).min())

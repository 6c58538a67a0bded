"""Hugging Face model -> model bundle (ARCHITECTURE.md section 3). Needs the compile extra.

``export_bundle`` resolves the model offline (a local folder, or an id in the local Hugging
Face cache), writes the tokenizer, the float32 embedding tables and the FP32 encoder body,
reads pooling and normalisation from the sentence-transformers config, and then verifies
itself: the bundle's own pipeline (ONNX Runtime) against the full model with its own pooling
on the built-in multilingual sample texts, cosine >= 0.9999 per text, or it fails loudly.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from hefsearch.base.atomic_write import fsync_dir, fsync_tree, write_json_atomic
from hefsearch.embed.bundle import SCHEMA_VERSION, EncoderEntry, sha256_file
from hefsearch.base.errors import ExportError, ModelNotFound
from hefsearch.embed.samples import VERIFY_TEXTS

from .torch_body import DEFAULT_MASK_VALUE, export_body_onnx
from .model_source import WEIGHT_FILES, download_for_export, find_cached

log = logging.getLogger("hefsearch.compile")

PARITY_MIN_COSINE = 0.9999
SUPPORTED_MODEL_TYPES = {"bert", "xlm-roberta", "roberta", "camembert"}


@dataclass
class ExportReport:
    bundle: Path
    model_id: str
    seq_len: int
    pooling: str
    normalize: bool
    notices: list[str] = field(default_factory=list)
    cosines: list[float] = field(default_factory=list)

    @property
    def min_cosine(self) -> float:
        return min(self.cosines) if self.cosines else float("nan")


def resolve_model(model: str, *, say: Callable[[str], None] | None = None) -> Path:
    """A local folder as is; otherwise a Hugging Face id from the local cache, offline.

    If the id is not cached, it is downloaded (only the files export needs, see
    ``model_source``) unless the hub is switched off (HF_HUB_OFFLINE); an unreachable hub fails
    within seconds.
    """
    p = Path(model).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ModelNotFound(
                f"{p} has no config.json: it is not a Hugging Face model folder.",
                "Point MODEL at the folder that holds config.json and the weights.",
            )
        return p
    if p.exists() or model.count("/") > 1 or model.startswith((".", "~")):
        raise ModelNotFound(f"{model} is neither a model folder nor a Hugging Face id.")
    cached = find_cached(model)
    if cached is not None:
        return cached
    return download_for_export(model, say=say)


def read_sentence_transformers_config(folder: Path) -> tuple[str, bool, int | None, list[str]]:
    """(pooling, normalize, max_seq_length or None, notices) from modules.json and friends."""
    notices = []
    modules_path = folder / "modules.json"
    if not modules_path.is_file():
        notices.append("No sentence-transformers config (modules.json): using mean pooling and L2 normalisation.")
        return "mean", True, None, notices
    modules = json.loads(modules_path.read_text())
    types = [m.get("type", "") for m in modules]
    pooling, normalize = "mean", False
    for m in modules:
        t = m.get("type", "")
        if t.endswith("Pooling"):
            cfg_path = folder / m.get("path", "") / "config.json"
            cfg = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}
            modes = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v]
            mode = cfg.get("pooling_mode") or (modes[0].removeprefix("pooling_mode_").removesuffix("_tokens") if modes else "mean")
            mode = {"mean_tokens": "mean", "cls_token": "cls", "max_tokens": "max"}.get(mode, mode)
            if mode not in {"mean", "cls", "max"} or len(modes) > 1:
                raise ExportError(f"Pooling {modes or mode} in {cfg_path} is not supported.",
                                  "hefsearch supports mean, cls and max pooling.")
            pooling = mode
        elif t.endswith("Normalize"):
            normalize = True
        elif t.endswith("Transformer"):
            continue
        else:
            raise ExportError(f"sentence-transformers module {t} in {modules_path} is not supported.",
                              "hefsearch supports Transformer + Pooling (+ Normalize) models.")
    if not any(t.endswith("Normalize") for t in types):
        notices.append("The model has no Normalize module; hefsearch stores raw pooled vectors.")
    max_len = None
    sb = folder / "sentence_bert_config.json"
    if sb.is_file():
        max_len = json.loads(sb.read_text()).get("max_seq_length")
    return pooling, normalize, max_len, notices


def model_prefixes(folder: Path, query_prefix: str | None, passage_prefix: str | None) -> tuple[dict, str | None]:
    """The query/passage prefixes: the ones given (an empty string means none), else the
    model's own sentence-transformers prompts (config_sentence_transformers.json "prompts":
    "query", and "passage" or "document"), else none; with a notice when prompts were used."""
    path = folder / "config_sentence_transformers.json"
    prompts = {}
    if path.is_file():
        try:
            prompts = json.loads(path.read_text()).get("prompts") or {}
        except (ValueError, AttributeError):
            prompts = {}
    from_model = {"query": prompts.get("query", ""), "passage": prompts.get("passage", prompts.get("document", ""))}
    given = {"query": query_prefix, "passage": passage_prefix}
    prefixes = {k: v if v is not None else str(from_model[k]) for k, v in given.items()}
    used = {k: prefixes[k] for k in prefixes if given[k] is None and prefixes[k]}
    notice = None
    if used:
        notice = "Prefixes from the model's sentence-transformers prompts: " + ", ".join(
            f"{k} {v!r}" for k, v in used.items()) + "."
    return prefixes, notice


def _model_id(model: str, folder: Path) -> str:
    """The Hugging Face id when given one; for a folder its name (with the parent's when the
    folder has a generic name such as ``model``)."""
    if not Path(model).expanduser().is_dir():
        return model
    if folder.name.lower() in {"model", "models", "snapshot"}:
        return f"{folder.parent.name}/{folder.name}"
    return folder.name


def _model_hash(folder: Path) -> tuple[str, str]:
    """(sha256 of the weights file, its name). Identifies the source weights."""
    for name in WEIGHT_FILES:
        f = folder / name
        if f.is_file():
            return sha256_file(f), name
    raise ExportError(f"No weights ({' or '.join(WEIGHT_FILES)}) in {folder}.")


@dataclass(frozen=True)
class ExportOptions:
    """The choices of ``compile export`` (its flags): the sequence length (None: the model's
    sentence-transformers max_seq_length, else 256), the query and passage prefixes (None: the
    model's own prompts), the additive mask value, the texts the export verifies itself on
    (None: the built-in multilingual samples), and whether a bundle at ``out`` may be replaced."""

    seq_len: int | None = None
    query_prefix: str | None = None
    passage_prefix: str | None = None
    mask_value: float = DEFAULT_MASK_VALUE
    verify_texts: list[str] | None = None
    overwrite: bool = False


def export_bundle(model: str, out: str | os.PathLike, options: ExportOptions = ExportOptions(),
                  progress: Callable[[str], None] | None = None) -> ExportReport:
    """Export ``model`` into the bundle folder ``out``: resolve and load it, choose the window and
    the prefixes, write the tables and the body into ``out``.partial, describe them in the
    manifest, verify the bundle against the full model and only then put it in place."""
    say = progress or (lambda msg: log.info(msg))
    folder = resolve_model(model, say=say)
    out = Path(out).expanduser()
    _check_destination(out, options.overwrite)
    config, hf_model = _load_model(folder)
    pooling, normalize, st_max, notices = read_sentence_transformers_config(folder)
    for n in notices:
        say(n)
    offset = int(config.pad_token_id) + 1 if config.model_type != "bert" else 0
    max_positions = int(config.max_position_embeddings) - offset
    seq_len = _choose_seq_len(options.seq_len, st_max, max_positions, say)
    prefixes = _choose_prefixes(model, folder, options, notices, say)

    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "embeddings").mkdir(parents=True)
    say(f"Writing tokenizer and embedding tables from {folder}")
    _write_tokenizer_and_tables(folder, hf_model, tmp)
    say("Exporting the encoder body to ONNX")
    export_body_onnx(hf_model, tmp / "encoder.onnx", int(config.hidden_size), mask_value=options.mask_value)
    manifest = _manifest(model, folder, tmp, config, max_positions, {
        "position_ids": {"scheme": "padding_offset" if offset else "absolute", "offset": offset},
        "seq_len": int(seq_len), "pooling": pooling, "normalize": bool(normalize), "prefixes": prefixes,
        "mask_value": float(options.mask_value)})
    write_json_atomic(tmp / "manifest.json", manifest)

    report = ExportReport(tmp, manifest["model"]["id"], int(seq_len), pooling, bool(normalize), notices)
    say("Verifying the bundle against the full model")
    report.cosines = verify_against_model(tmp, hf_model, pooling, options.verify_texts or VERIFY_TEXTS)
    _check_parity(report.cosines, tmp)
    _publish(tmp, out)
    report.bundle = out
    say(f"Bundle written to {out} (min cosine {report.min_cosine:.6f} on {len(report.cosines)} texts)")
    return report


def _check_destination(out: Path, overwrite: bool) -> None:
    """``out`` may be written: empty, or a bundle and ``overwrite`` (never another folder)."""
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise ExportError(f"{out} exists and is not empty.", "Choose another --out, or pass --overwrite.")
        if not (out / "manifest.json").is_file():
            raise ExportError(f"{out} is not a bundle; refusing to overwrite it.", "Choose an empty --out folder.")


def _load_model(folder: Path):
    """(config, model in eval mode with eager attention) of a supported BERT-family encoder."""
    try:
        from transformers import AutoConfig, AutoModel
    except ImportError:
        raise ExportError("Export needs torch and transformers.", "pip install 'hefsearch[compile]'") from None
    config = AutoConfig.from_pretrained(folder)
    if config.model_type not in SUPPORTED_MODEL_TYPES:
        raise ExportError(
            f"Model type {config.model_type!r} is not supported.",
            f"Supported: {', '.join(sorted(SUPPORTED_MODEL_TYPES))} (BERT-family encoders).",
        )
    return config, AutoModel.from_pretrained(folder, attn_implementation="eager").eval()


def _choose_seq_len(asked: int | None, st_max: int | None, max_positions: int, say: Callable[[str], None]) -> int:
    """The window: the one asked, else the model's sentence-transformers max_seq_length, else 256."""
    seq_len = asked
    if seq_len is None:
        seq_len = int(st_max) if st_max else 256
        if st_max:
            say(f"Sequence length {seq_len} (the model's sentence-transformers max_seq_length).")
    if seq_len > max_positions:
        raise ExportError(f"--seq-len {seq_len} exceeds the model's {max_positions} positions.")
    return seq_len


def _choose_prefixes(model: str, folder: Path, options: ExportOptions, notices: list[str],
                     say: Callable[[str], None]) -> dict:
    """The query and passage prefixes (given, else the model's prompts); what was chosen or is
    missing is said and added to ``notices``."""
    prefixes, prompt_notice = model_prefixes(folder, options.query_prefix, options.passage_prefix)
    if prompt_notice:
        notices.append(prompt_notice)
        say(prompt_notice)
    if not any(prefixes.values()) and "e5" in str(model).lower():
        notices.append("e5 models expect --query-prefix 'query: ' --passage-prefix 'passage: '.")
        say(notices[-1])
    return prefixes


def _write_tokenizer_and_tables(folder: Path, hf_model, tmp: Path) -> None:
    """tokenizer.json and the float32 embedding tables (word, position, token type)."""
    import torch
    from transformers import AutoTokenizer

    # Save the tokenizer transformers actually runs, not a copy of the file: transformers 5
    # rebuilds some pipelines (XLM-R's pre-tokenizer) from the vocabulary, and the bundle must
    # tokenise exactly as the full model it is checked against.
    try:
        backend = AutoTokenizer.from_pretrained(folder, use_fast=True).backend_tokenizer
    except Exception as e:  # a folder with only tokenizer.json and no config for it
        if not (folder / "tokenizer.json").is_file():
            raise ExportError(f"Cannot load the tokenizer of {folder}: {e}") from None
        shutil.copyfile(folder / "tokenizer.json", tmp / "tokenizer.json")
    else:
        backend.save(str(tmp / "tokenizer.json"))
    emb = hf_model.embeddings
    for name, module in (("word", emb.word_embeddings), ("position", emb.position_embeddings),
                         ("token_type", emb.token_type_embeddings)):
        np.save(tmp / f"embeddings/{name}.npy", module.weight.detach().to(torch.float32).cpu().numpy())


def _manifest(model: str, folder: Path, tmp: Path, config, max_positions: int, pipeline: dict) -> dict:
    """The manifest of the files in ``tmp``: their sizes and sha256, the model's identity and
    shape, ``pipeline`` (window, pooling, prefixes, mask value, position ids) and the FP32 body."""
    files = {}
    for rel in ("tokenizer.json", "embeddings/word.npy", "embeddings/position.npy",
                "embeddings/token_type.npy", "encoder.onnx"):
        f = tmp / rel
        files[rel] = {"bytes": f.stat().st_size, "sha256": sha256_file(f)}
    weights_sha, weights_name = _model_hash(folder)
    identity = hashlib.sha256()
    for rel in ("tokenizer.json", "embeddings/word.npy", "embeddings/position.npy", "embeddings/token_type.npy"):
        identity.update(files[rel]["sha256"].encode())
    identity.update(weights_sha.encode())
    hidden = int(config.hidden_size)
    return {
        "schema": SCHEMA_VERSION,
        "model": {
            "id": _model_id(model, folder),
            "source": str(model),
            "revision": folder.name if "snapshots" in folder.parts else None,
            "weights": {"file": weights_name, "sha256": weights_sha},
            "hash": identity.hexdigest()[:24],
            "type": config.model_type,
            "hidden": hidden,
            "layers": int(config.num_hidden_layers),
            "heads": int(config.num_attention_heads),
            "vocab": int(config.vocab_size),
            "max_positions": max_positions,
        },
        **pipeline,
        "files": files,
        "encoders": [
            EncoderEntry(
                kind="onnx",
                file="encoder.onnx",
                extra={
                    "precision": "fp32",
                    "inputs": {"embeddings": ["N", "S", hidden], "attention_mask": ["N", "S"]},
                    "outputs": {"last_hidden_state": ["N", "S", hidden]},
                },
            ).to_dict()
        ],
    }


def _check_parity(cosines: list[float], tmp: Path) -> None:
    """Fail loudly unless every sample text's cosine (bundle vs full model) reaches PARITY_MIN_COSINE."""
    bad = [(i, c) for i, c in enumerate(cosines) if not c >= PARITY_MIN_COSINE]
    if bad:
        raise ExportError(
            f"Export did not verify: {len(bad)} sample texts have cosine < {PARITY_MIN_COSINE} between the "
            f"bundle and the full model (worst {min(c for _, c in bad):.6f}). The partial bundle is in {tmp}.",
            "This model's architecture may differ from a BERT/XLM-R encoder; please report it.",
        )


def _publish(tmp: Path, out: Path) -> None:
    """Replace ``out`` with the verified ``tmp``, durably."""
    if out.exists():
        shutil.rmtree(out)
    fsync_tree(tmp)  # a power cut after the rename must not leave a bundle of empty files
    os.replace(tmp, out)
    fsync_dir(out.parent)


def verify_against_model(bundle_path: Path, hf_model, pooling: str, texts: list[str]) -> list[float]:
    """Cosine per text between the bundle's ONNX pipeline and the full torch model."""
    import torch

    from hefsearch.embed.reference import open_reference_encoder

    with open_reference_encoder(bundle_path) as enc:
        ours = enc.encode(texts)
        tok = enc.host
        batch = tok.tokenize(texts)
    refs = []
    with torch.no_grad():
        for ids in batch.ids:
            input_ids = torch.as_tensor(ids[None, :])
            mask = torch.ones_like(input_ids)
            hidden = hf_model(input_ids=input_ids, attention_mask=mask).last_hidden_state[0].numpy()
            if pooling == "mean":
                v = hidden.mean(axis=0)
            elif pooling == "cls":
                v = hidden[0]
            else:
                v = hidden.max(axis=0)
            refs.append(v)
    refs = np.asarray(refs, dtype=np.float64)
    a = ours.astype(np.float64)
    cos = (a * refs).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(refs, axis=1) + 1e-30)
    return [float(c) for c in cos]

"""The model bundle: a self-describing folder shared by compile, embed and index.

Layout (ARCHITECTURE.md section 3)::

    manifest.json                  what is here, with sha256 of every file
    tokenizer.json                 the model's own fast tokenizer
    embeddings/word.npy            float32 [vocab, H]
    embeddings/position.npy        float32 [max_positions, H]
    embeddings/token_type.npy      float32 [type_vocab, H]
    encoder.onnx                   FP32 encoder body: embeddings [N,S,H], attention_mask [N,S]
    encoder.<hw_arch>[.s<SEQ>].hef compiled bodies for one chip (optional)

Opening a bundle checks the manifest, that every listed file exists with the recorded size,
and the shapes and dtypes of the embedding tables (read from the .npy headers, so it is
fast even for a 250k-row vocabulary). :meth:`Bundle.verify` also checks every sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import BundleError

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
TABLES = ("word", "position", "token_type")
REQUIRED_KEYS = ("schema", "model", "seq_len", "pooling", "normalize", "position_ids", "files", "encoders")


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temp file in the same folder and rename it over ``path``."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class EncoderEntry:
    """One compiled or exported encoder body listed in the manifest."""

    kind: str  # "onnx" (FP32 body) or "hef"
    file: str
    seq_len: int | None = None  # fixed S for a HEF; None for the dynamic ONNX body
    hw_arch: str | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict) -> "EncoderEntry":
        known = {"kind", "file", "seq_len", "hw_arch"}
        return cls(
            kind=d["kind"],
            file=d["file"],
            seq_len=d.get("seq_len"),
            hw_arch=d.get("hw_arch"),
            extra={k: v for k, v in d.items() if k not in known},
        )

    def to_dict(self) -> dict:
        d = {"kind": self.kind, "file": self.file}
        if self.seq_len is not None:
            d["seq_len"] = self.seq_len
        if self.hw_arch is not None:
            d["hw_arch"] = self.hw_arch
        d.update(self.extra)
        return d


class Bundle:
    """An opened, validated model bundle. Cheap to open; tables are memory-mapped lazily."""

    def __init__(self, path: Path, manifest: dict):
        self.path = Path(path)
        self.manifest = manifest
        self._tables: dict[str, np.ndarray] = {}
        self._tokenizer = None

    # -- opening -------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike) -> "Bundle":
        path = Path(path).expanduser()
        if not path.exists():
            raise BundleError(
                f"Bundle folder {path} does not exist.",
                "Create one with: hefsearch compile export MODEL --out BUNDLE",
            )
        if not path.is_dir():
            raise BundleError(f"{path} is not a folder; a bundle is a folder with manifest.json.")
        mpath = path / MANIFEST
        if not mpath.is_file():
            raise BundleError(
                f"{mpath} is missing: {path} is not a hefsearch bundle.",
                "Point --bundle at the folder written by 'hefsearch compile export'.",
            )
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BundleError(f"{mpath} is not valid JSON ({e}).", "Re-export the bundle.") from None
        bundle = cls(path, manifest)
        bundle._check()
        return bundle

    def _check(self) -> None:
        m = self.manifest
        mpath = self.path / MANIFEST
        if not isinstance(m, dict):
            raise BundleError(f"{mpath} does not hold a JSON object.")
        missing = [k for k in REQUIRED_KEYS if k not in m]
        if missing:
            raise BundleError(f"{mpath} lacks the keys {', '.join(missing)}.", "Re-export the bundle.")
        if m["schema"] != SCHEMA_VERSION:
            raise BundleError(
                f"{mpath} has schema {m['schema']!r}; this hefsearch reads schema {SCHEMA_VERSION}.",
                "Re-export the bundle with this version of hefsearch.",
            )
        for rel, info in m["files"].items():
            f = self.path / rel
            if not f.is_file():
                raise BundleError(
                    f"Bundle file {f} is missing (listed in manifest.json).",
                    "Copy the whole bundle folder again, or re-export it.",
                )
            size = f.stat().st_size
            if "bytes" in info and size != info["bytes"]:
                raise BundleError(
                    f"Bundle file {f} has {size} bytes; manifest.json says {info['bytes']}: "
                    "it is truncated or was replaced.",
                    "Copy the whole bundle folder again, or re-export it.",
                )
        hidden = self.hidden
        for name in TABLES:
            rel = f"embeddings/{name}.npy"
            if rel not in m["files"]:
                raise BundleError(f"{mpath} does not list {rel}.", "Re-export the bundle.")
            shape, dtype = _npy_header(self.path / rel)
            if dtype != np.float32 or len(shape) != 2 or shape[1] != hidden:
                raise BundleError(
                    f"Bundle file {self.path / rel} holds {dtype} {list(shape)}; expected float32 [*, {hidden}].",
                    "Re-export the bundle.",
                )
        for e in self.encoders:
            if e.file not in m["files"]:
                raise BundleError(f"{mpath} lists encoder {e.file} but not its file entry.")

    def verify(self) -> list[str]:
        """Check every file's sha256 against the manifest; return the names that differ."""
        bad = []
        for rel, info in self.manifest["files"].items():
            if "sha256" in info and sha256_file(self.path / rel) != info["sha256"]:
                bad.append(rel)
        return bad

    # -- manifest accessors --------------------------------------------------------------
    @property
    def model(self) -> dict:
        return self.manifest["model"]

    @property
    def model_id(self) -> str:
        return self.model.get("id", "?")

    @property
    def model_hash(self) -> str:
        return self.model["hash"]

    @property
    def hidden(self) -> int:
        return int(self.model["hidden"])

    @property
    def seq_len(self) -> int:
        return int(self.manifest["seq_len"])

    @property
    def pooling(self) -> str:
        return self.manifest["pooling"]

    @property
    def normalize(self) -> bool:
        return bool(self.manifest["normalize"])

    @property
    def position_offset(self) -> int:
        """First position id of a real token: 0 for BERT, padding_idx + 1 for XLM-R."""
        return int(self.manifest["position_ids"].get("offset", 0))

    @property
    def prefixes(self) -> dict:
        p = self.manifest.get("prefixes") or {}
        return {"query": p.get("query", ""), "passage": p.get("passage", "")}

    @property
    def mask_value(self) -> float:
        return float(self.manifest.get("mask_value", -50.0))

    @property
    def encoders(self) -> list[EncoderEntry]:
        return [EncoderEntry.from_dict(d) for d in self.manifest["encoders"]]

    def encoder_entries(self, kind: str) -> list[EncoderEntry]:
        return [e for e in self.encoders if e.kind == kind]

    def file_sha256(self, rel: str) -> str:
        return self.manifest["files"][rel].get("sha256", "")

    # -- heavy parts, loaded on demand ---------------------------------------------------
    def table(self, name: str) -> np.ndarray:
        """A float32 embedding table, memory-mapped read-only (no resident cost)."""
        if name not in self._tables:
            path = self.path / f"embeddings/{name}.npy"
            try:
                self._tables[name] = np.load(path, mmap_mode="r")
            except (OSError, ValueError) as e:
                raise BundleError(f"Cannot read {path}: {e}", "Re-export the bundle.") from None
        return self._tables[name]

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            path = self.path / "tokenizer.json"
            try:
                self._tokenizer = Tokenizer.from_file(str(path))
            except Exception as e:  # tokenizers raises a bare Exception on bad JSON
                raise BundleError(f"Cannot load {path}: {e}", "Re-export the bundle.") from None
        return self._tokenizer

    # -- writing -------------------------------------------------------------------------
    def add_file(self, rel: str) -> None:
        """Record (or refresh) a file's size and sha256 in the in-memory manifest."""
        f = self.path / rel
        self.manifest["files"][rel] = {"bytes": f.stat().st_size, "sha256": sha256_file(f)}

    def upsert_encoder(self, entry: EncoderEntry) -> None:
        encs = [d for d in self.manifest["encoders"] if d["file"] != entry.file]
        encs.append(entry.to_dict())
        self.manifest["encoders"] = encs

    def save_manifest(self) -> None:
        write_json_atomic(self.path / MANIFEST, self.manifest)


def _npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    try:
        with open(path, "rb") as f:
            major, _minor = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, _fortran, dtype = read(f)
    except Exception as e:
        raise BundleError(f"Bundle file {path} is not a valid .npy array ({e}).", "Re-export the bundle.") from None
    return tuple(shape), dtype

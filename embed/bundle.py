"""The model bundle: a self-describing folder shared by compile, embed and index.

Layout (ARCHITECTURE.md section 3)::

    manifest.json                  what is here, with sha256 of every file
    tokenizer.json                 the model's own fast tokenizer
    embeddings/word.npy            float32 [vocab, H]
    embeddings/position.npy        float32 [max_positions, H]
    embeddings/token_type.npy      float32 [type_vocab, H]
    encoder.onnx                   FP32 encoder body: embeddings [N,S,H], attention_mask [N,S]
    encoder.<hw_arch>[.s<SEQ>].hef compiled bodies for one chip (optional)

Opening a bundle checks the manifest (every value hefsearch reads has the right type; file
names stay inside the folder), that every listed file exists with the recorded size, and the
shapes and dtypes of the embedding tables (read from the .npy headers, so it is fast even for
a 250k-row vocabulary). :meth:`Bundle.verify` also checks every sha256 (``doctor``);
:meth:`Bundle.check_unchanged` checks the files an indexing encoder reads, hashing each file
once and remembering the result by the file's identity (size, mtime, ctime, inode).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Iterable

import numpy as np

from hefsearch.base.atomic_write import write_json_atomic
from hefsearch.base.errors import BundleError
from hefsearch.base.locations import cache_dir

log = logging.getLogger("hefsearch.embed")

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
TABLES = ("word", "position", "token_type")
REQUIRED_KEYS = ("schema", "model", "seq_len", "pooling", "normalize", "position_ids", "files", "encoders")
POOLINGS = ("mean", "cls", "max")  # embed/host.py POOLERS
#: a tokenizer vocabulary this large means a multilingual model (XLM-R: 250k; English BERT: 30k)
MULTILINGUAL_VOCAB = 100_000
#: the recovery for a manifest that does not hold what this hefsearch wrote
REEXPORT = ("Copy the whole bundle folder again from where it was made, or re-export it: "
            "hefsearch compile export MODEL --out BUNDLE")


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


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
        except OSError as e:
            raise BundleError(f"Cannot read {mpath}: {e.strerror}.",
                              "Check the bundle folder's permissions, or copy it again.") from None
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise BundleError(f"{mpath} is not valid JSON ({e}): it is truncated or damaged.", REEXPORT) from None
        bundle = cls(path, manifest)
        bundle._check()
        return bundle

    def _check(self) -> None:
        _check_manifest(self.manifest, self.path / MANIFEST)
        m = self.manifest
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
        mpath = self.path / MANIFEST
        for name in TABLES:
            rel = f"embeddings/{name}.npy"
            if rel not in m["files"]:
                raise BundleError(f"{mpath} does not list {rel}.", REEXPORT)
            shape, dtype = _npy_header(self.path / rel)
            if dtype != np.float32 or len(shape) != 2 or shape[1] != hidden:
                raise BundleError(
                    f"Bundle file {self.path / rel} holds {dtype} {list(shape)}; expected float32 [*, {hidden}].",
                    "Re-export the bundle.",
                )
        for e in self.encoders:
            if e.file not in m["files"]:
                raise BundleError(f"{mpath} lists encoder {e.file} but not its file entry.", REEXPORT)

    def verify(self) -> list[str]:
        """Check every file's sha256 against the manifest; return the names that differ."""
        bad = []
        for rel, info in self.manifest["files"].items():
            try:
                if "sha256" in info and sha256_file(self.path / rel) != info["sha256"]:
                    bad.append(rel)
            except OSError:  # unreadable counts as differing: doctor names it
                bad.append(rel)
        return bad

    def encoding_files(self, entries: Iterable["EncoderEntry"]) -> list[str]:
        """The files an encoder reads: the tokenizer, the embedding tables and its bodies."""
        rels = ["tokenizer.json", *(f"embeddings/{t}.npy" for t in TABLES), *(e.file for e in entries)]
        return [r for r in dict.fromkeys(rels) if r in self.manifest["files"]]

    def check_unchanged(self, rels: Iterable[str]) -> None:
        """Raise if a file's sha256 differs from the manifest (a file damaged in place keeps
        its size, so opening does not see it, and it would store wrong or NaN vectors).

        A file is hashed once per identity (size, mtime, ctime, inode): later runs cost one
        ``stat`` per file. The hashes are kept in the user cache dir, never in the bundle, so a
        read-only bundle works the same.
        """
        cache = FileHashCache.load()
        try:
            for rel in rels:
                expected = self.file_sha256(rel)
                if not expected:
                    continue
                path = self.path / rel
                try:
                    actual = cache.sha256(path)
                except OSError as e:
                    raise BundleError(f"Cannot read bundle file {path}: {e.strerror}.",
                                      "Copy the whole bundle folder again, or re-export it.") from None
                if actual != expected:
                    raise BundleError(
                        f"Bundle file {path} is damaged or was replaced: its sha256 is {actual}, "
                        f"manifest.json records {expected}. Vectors made with it would be wrong.",
                        "Copy the whole bundle folder again from where it was exported, or re-export "
                        "it (hefsearch compile export); 'hefsearch doctor --bundle BUNDLE' checks every file.",
                    )
        finally:
            cache.save()

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
    def multilingual(self) -> bool:
        """Whether the model is multilingual, told by its vocabulary's size (:data:`MULTILINGUAL_VOCAB`)."""
        return int(self.model.get("vocab") or 0) >= MULTILINGUAL_VOCAB

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
        return (self.manifest["files"].get(rel) or {}).get("sha256", "")

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
        """The bundle's tokenizer, loaded once and shared (the chunker's)."""
        if self._tokenizer is None:
            self._tokenizer = self.fresh_tokenizer()
        return self._tokenizer

    def fresh_tokenizer(self):
        """A new Tokenizer read from ``tokenizer.json``, for a caller that changes its settings
        (truncation, padding are per-Tokenizer state). One parse: a 250k vocabulary takes a
        noticeable part of a one-shot search's start, so no copy goes through ``to_str``."""
        from tokenizers import Tokenizer

        path = self.path / "tokenizer.json"
        try:
            return Tokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises a bare Exception on bad JSON
            raise BundleError(f"Cannot load {path}: {e}", "Re-export the bundle.") from None

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


# -- manifest validation: a crafted or damaged manifest is a message, never a traceback --------
def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _bad(mpath: Path, what: str) -> BundleError:
    return BundleError(f"{mpath} is damaged or was not written by hefsearch: {what}.", REEXPORT)


def _need(mpath: Path, where: str, value, ok: bool, expected: str) -> None:
    if not ok:
        raise _bad(mpath, f"{where} is {json.dumps(value, default=str)[:60]}, expected {expected}")


def is_confined(rel) -> bool:
    """Whether a manifest file name stays inside the bundle folder (no absolute path, no ..)."""
    if not isinstance(rel, str) or not rel.strip() or "\0" in rel:
        return False
    if PurePosixPath(rel).is_absolute() or PureWindowsPath(rel).drive or PureWindowsPath(rel).root:
        return False
    return ".." not in rel.replace("\\", "/").split("/")


def _check_file_name(mpath: Path, where: str, rel) -> None:
    _need(mpath, where, rel, isinstance(rel, str), "a file name")
    if not is_confined(rel):
        raise _bad(mpath, f"{where} names {rel!r}, which is not a file inside the bundle folder")


def _check_manifest(m, mpath: Path) -> None:
    """Types and shapes of everything hefsearch reads from a manifest, before any of it is used."""
    if not isinstance(m, dict):
        raise BundleError(f"{mpath} does not hold a JSON object.", REEXPORT)
    missing = [k for k in REQUIRED_KEYS if k not in m]
    if missing:
        raise BundleError(f"{mpath} lacks the keys {', '.join(missing)}.", REEXPORT)
    if m["schema"] != SCHEMA_VERSION:
        raise BundleError(
            f"{mpath} has schema {json.dumps(m['schema'], default=str)[:60]}; this hefsearch reads "
            f"schema {SCHEMA_VERSION}.",
            "Re-export the bundle with this version of hefsearch.",
        )
    model = m["model"]
    _need(mpath, "model", model, isinstance(model, dict), "an object")
    _need(mpath, "model.hash", model.get("hash"), isinstance(model.get("hash"), str) and model.get("hash"),
          "the model's hash (a string)")
    _need(mpath, "model.hidden", model.get("hidden"), _is_int(model.get("hidden")) and model["hidden"] > 0,
          "a positive whole number")
    _need(mpath, "model.id", model.get("id"), isinstance(model.get("id", ""), str), "a string")
    for key in ("layers", "heads", "vocab", "max_positions"):  # read by compile
        if key in model:
            _need(mpath, f"model.{key}", model[key], _is_int(model[key]) and model[key] > 0,
                  "a positive whole number")
    _need(mpath, "seq_len", m["seq_len"], _is_int(m["seq_len"]) and m["seq_len"] > 0, "a positive whole number")
    _need(mpath, "pooling", m["pooling"], m["pooling"] in POOLINGS, f"one of {', '.join(POOLINGS)}")
    _need(mpath, "normalize", m["normalize"], isinstance(m["normalize"], bool), "true or false")
    pos = m["position_ids"]
    _need(mpath, "position_ids", pos, isinstance(pos, dict), "an object")
    _need(mpath, "position_ids.offset", pos.get("offset"), _is_int(pos.get("offset", 0)) and pos.get("offset", 0) >= 0,
          "a whole number >= 0")
    prefixes = m.get("prefixes") or {}
    _need(mpath, "prefixes", prefixes, isinstance(prefixes, dict)
          and all(isinstance(prefixes.get(k, ""), str) for k in ("query", "passage")),
          "an object of query/passage strings")
    mask_value = m.get("mask_value", -50.0)
    _need(mpath, "mask_value", mask_value, isinstance(mask_value, (int, float)) and not isinstance(mask_value, bool),
          "a number")
    _check_files(m["files"], mpath)
    _check_encoders(m["encoders"], mpath)
    calibration = m.get("calibration", {})
    _need(mpath, "calibration", calibration, isinstance(calibration, dict), "an object")
    for key, rec in calibration.items():
        if isinstance(rec, dict) and "file" in rec:
            _check_file_name(mpath, f"calibration.{key}.file", rec["file"])


def _check_files(files, mpath: Path) -> None:
    _need(mpath, "files", files, isinstance(files, dict), "an object of file name -> {bytes, sha256}")
    for rel, info in files.items():
        _check_file_name(mpath, "a key of files", rel)
        _need(mpath, f"files[{rel!r}]", info, isinstance(info, dict), "an object with bytes and sha256")
        if "bytes" in info:
            _need(mpath, f"files[{rel!r}].bytes", info["bytes"], _is_int(info["bytes"]) and info["bytes"] >= 0,
                  "a whole number >= 0")
        if "sha256" in info:
            _need(mpath, f"files[{rel!r}].sha256", info["sha256"], isinstance(info["sha256"], str),
                  "a hex string")


def _check_encoders(encoders, mpath: Path) -> None:
    _need(mpath, "encoders", encoders, isinstance(encoders, list), "a list")
    for i, d in enumerate(encoders):
        where = f"encoders[{i}]"
        _need(mpath, where, d, isinstance(d, dict), "an object with kind and file")
        _need(mpath, f"{where}.kind", d.get("kind"), isinstance(d.get("kind"), str), "a string")
        _check_file_name(mpath, f"{where}.file", d.get("file"))
        seq = d.get("seq_len")
        _need(mpath, f"{where}.seq_len", seq, seq is None or (_is_int(seq) and seq > 0), "a positive whole number")
        _need(mpath, f"{where}.hw_arch", d.get("hw_arch"), isinstance(d.get("hw_arch", ""), (str, type(None))),
              "a string")


# -- the sha256 cache of the write path --------------------------------------------------------
CACHE_FILE = "file-sha256.json"
#: entries kept; the oldest go first (a few bundles' files, each a few hundred bytes)
CACHE_LIMIT = 512


def _identity(st: os.stat_result) -> list[int]:
    # ctime too: a copy with a preserved mtime over the same inode still changes it
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


class FileHashCache:
    """sha256 of files by absolute path, valid while the file's identity is unchanged."""

    def __init__(self, path: Path, entries: dict):
        self.path = path
        self.entries = entries
        self.changed = False

    @classmethod
    def load(cls) -> "FileHashCache":
        path = cache_dir() / CACHE_FILE
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # absent, unreadable or damaged: start afresh
            entries = {}
        return cls(path, entries if isinstance(entries, dict) else {})

    def sha256(self, path: Path) -> str:
        key = str(Path(path).resolve())
        before = os.stat(key)
        hit = self.entries.get(key)
        if isinstance(hit, dict) and hit.get("id") == _identity(before) and isinstance(hit.get("sha256"), str):
            return hit["sha256"]
        digest = sha256_file(key)
        if _identity(os.stat(key)) == _identity(before):  # not changing under us: worth keeping
            self.entries.pop(key, None)
            self.entries[key] = {"id": _identity(before), "sha256": digest}
            self.changed = True
        return digest

    def save(self) -> None:
        if not self.changed:
            return
        keep = dict(list(self.entries.items())[-CACHE_LIMIT:])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.path, keep)
        except OSError as e:  # a read-only home still works; it only hashes again next time
            log.info("cannot keep the file hashes in %s: %s", self.path, e)
        self.changed = False


def _npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    try:
        with open(path, "rb") as f:
            major, _minor = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, _fortran, dtype = read(f)
    except Exception as e:
        raise BundleError(f"Bundle file {path} is not a valid .npy array ({e}).", "Re-export the bundle.") from None
    return tuple(shape), dtype

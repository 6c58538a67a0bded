"""The actor side of ``hefsearch index --ray`` (:mod:`hefsearch.index.ray_pool` is the driver's).

The bundle travels through Ray, never a shared disk: :func:`ship_bundle` (driver) puts the
manifest and every file it lists into the object store once; :func:`materialise_bundle` (actor)
writes them to ``<cache>/ray-bundles/<sha256 of manifest.json>/`` on its node with one atomic
folder rename, so the actors of a node share one copy (Ray moves an object to a node once) and a
later run on that node fetches nothing. The encoder then opens it with ``bulk=True``, which
checks the files' sha256 against the manifest.

An actor sends errors as words (:func:`explain`): Ray cannot rebuild exceptions whose
constructor takes a hint (they arrive as "Failed to deserialize exception"). ray itself is
imported only by :func:`import_ray`, at call time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import time
import uuid
from pathlib import Path
from typing import Callable

import numpy as np

from hefsearch.embed.errors import HefsearchError
from hefsearch.embed.versions import hefsearch_version

INSTALL_HINT = "Install it with: pip install 'hefsearch[ray]' (on the driver and on every node of the cluster)."


class RayUnavailable(HefsearchError):
    title = "ray not installed"


def import_ray():
    """The ``ray`` module, or :class:`RayUnavailable` saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise RayUnavailable(f"--ray needs the Ray package, which is not installed here ({e}).",
                             INSTALL_HINT) from None
    return ray


def materialise_bundle(key: str, refs: dict) -> Path:
    """The bundle on this node: ``<cache>/ray-bundles/<key>``, written once (atomic rename)."""
    from hefsearch.embed.bundle import cache_dir

    root = cache_dir() / "ray-bundles"
    dest = root / key
    if (dest / "manifest.json").is_file():
        return dest
    ray = import_ray()
    tmp = root / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        for rel, ref in refs.items():
            data = ray.get(ref)
            f = tmp / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            with open(f, "wb") as out:
                out.write(memoryview(data))
                out.flush()
                os.fsync(out.fileno())
        try:
            os.rename(tmp, dest)
        except OSError:  # another actor of this node was first: use its copy
            if not (dest / "manifest.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def open_bundle_encoder(bundle: Path, backend: str, opts: dict, actor_index: int):
    """The default way an actor opens its encoder (``actor_index`` lets a simulation vary)."""
    from hefsearch.embed.encoder import Encoder

    return Encoder.open(bundle, backend=backend, bulk=True, **opts)


def explain(e: BaseException) -> str:
    """An actor's error as plain text: Ray cannot carry exceptions whose constructor takes a
    hint (they arrive as "Failed to deserialize exception"), so actors send the words."""
    return e.message if isinstance(e, HefsearchError) else f"{type(e).__name__}: {e}"


class EmbedWorker:
    """One Ray actor: the bundle fetched to its node, one encoder, texts in, vectors out.
    An encoder that cannot open is reported by :meth:`identity`, not raised."""

    def __init__(self, key: str, refs: dict, backend: str, opts: dict, open_encoder: Callable,
                 actor_index: int):
        self.encoder, self.failure = None, ""
        try:
            self.encoder = open_encoder(materialise_bundle(key, refs), backend, opts, actor_index)
        except Exception as e:
            self.failure = explain(e)

    def identity(self) -> dict:
        if self.encoder is None:
            return {"host": socket.gethostname(), "pid": os.getpid(), "failure": self.failure}
        enc = self.encoder
        return {"host": socket.gethostname(), "pid": os.getpid(), "version": hefsearch_version(),
                "label": enc.label, "backend": enc.backend.name, "space_name": enc.space_name,
                "space_kind": enc.space_kind, "space_opts": enc.space_opts, "parts": enc.fingerprint_parts(),
                "fingerprint": enc.fingerprint, "max_tokens": enc.max_tokens, "dim": enc.dim}

    def encode(self, texts: list[str]) -> tuple[np.ndarray, float]:
        t = time.perf_counter()
        try:
            vecs = self.encoder.encode_passages(texts)
        except Exception as e:
            raise RuntimeError(explain(e)) from None
        return np.ascontiguousarray(vecs, np.float32), time.perf_counter() - t


def ship_bundle(ray, bundle) -> tuple[str, dict]:
    """(key, {relative path: ObjectRef}) of an opened bundle's manifest and every file it lists."""
    manifest = (bundle.path / "manifest.json").read_bytes()
    refs = {"manifest.json": ray.put(np.frombuffer(manifest, np.uint8))}
    for rel in bundle.manifest["files"]:
        refs[rel] = ray.put(np.fromfile(bundle.path / rel, np.uint8))
    return hashlib.sha256(manifest).hexdigest()[:32], refs

"""The actor side of ``hefsearch index --ray`` (:mod:`hefsearch.index.ray_pool` is the driver's).

The bundle travels through Ray, never a shared disk: :func:`ship_bundle` (driver) puts the
manifest and every file it lists into the object store once; :func:`materialise_bundle` (actor)
writes them to ``<cache>/ray-bundles/<sha256 of manifest.json>/`` on its node with one atomic
folder rename, so the actors of a node share one copy (Ray moves an object to a node once) and a
later run on that node fetches nothing. The encoder then opens it with ``bulk=True``, which
checks the files' sha256 against the manifest.

An actor starts in two steps: the driver asks each for its node (:meth:`EmbedWorker.node`),
numbers the actors of each node (:func:`ranks_on_nodes`), then :meth:`EmbedWorker.start` opens
the encoders. A ``hailo`` actor (a backend with a ``ray_resource``) takes the chip at its rank
among its node's devices (:func:`device_for_rank` over the backend's ``device_ids()``: for
``hailo`` ``Device.scan()``, sorted), so the actors of a multi-chip host never share a chip; a
node with fewer chips than actors says so. With ``also_fp32`` an actor
also opens the CPU FP32 encoder of the same bundle and returns both spaces' vectors per batch.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from hefsearch.base.errors import BackendUnavailable, HefsearchError
from hefsearch.embed.reference import REFERENCE_BACKEND
from hefsearch.embed.space_names import FP32_SPACE
from hefsearch.base.versions import hefsearch_version

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
    from hefsearch.base.locations import cache_dir

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


def ranks_on_nodes(nodes: list[str]) -> list[tuple[int, int]]:
    """For actors placed on ``nodes`` (one node id per actor, in actor order): each actor's
    (rank among the actors of its node, how many actors that node has)."""
    seen: dict[str, int] = {}
    ranks = []
    for node in nodes:
        ranks.append(seen.get(node, 0))
        seen[node] = ranks[-1] + 1
    return [(rank, seen[node]) for rank, node in zip(ranks, nodes)]


def device_for_rank(devices: list[str], rank: int, actors_on_node: int, host: str) -> str:
    """The chip of the actor with this rank on its node: the node's device ids sorted, one each.
    An actor left without a chip (a ``--resources`` count above the chips) gets an error that
    says so; the actors with a chip go on."""
    devices = sorted(devices)
    if rank >= len(devices):
        raise BackendUnavailable(
            f"{host} has {len(devices)} Hailo device(s) ({', '.join(devices) or 'none found'}) "
            f"for the {actors_on_node} hailo actors Ray placed there: no chip is left for this one.",
            f"Start Ray on {host} with as many 'hailo' resources as chips: ray stop; ray start --address "
            f"HEAD:6379 --resources='{{\"hailo\": {len(devices)}}}' ('hailortcli scan' lists the chips).")
    return devices[rank]


def _space_identity(enc) -> dict:
    """What the driver needs of one encoder: its space, fingerprint and backend's own parts
    (the driver rebuilds the encoder's identity from them: ray_pool._RemoteBackend)."""
    seq_lens = enc.backend.seq_lens
    return {"label": enc.label, "backend": enc.backend.name, "space_name": enc.space_name,
            "space_kind": enc.space_kind, "space_opts": enc.space_opts, "parts": enc.fingerprint_parts(),
            "fingerprint": enc.fingerprint, "backend_parts": enc.backend.fingerprint_parts(),
            "seq_lens": None if seq_lens is None else list(seq_lens)}


@dataclass(frozen=True)
class WorkerSpec:
    """What every actor of a pool opens: ``open_encoder(bundle, backend, opts, actor index)``,
    and with ``also_fp32`` the CPU FP32 reference too, with ``also_opts``."""

    backend: str
    opts: dict
    open_encoder: Callable
    also_fp32: bool = False
    also_opts: dict = field(default_factory=dict)


class EmbedWorker:
    """One Ray actor: the bundle fetched to its node, its encoder(s), texts in, vectors out.
    An encoder that cannot open is reported by :meth:`start`, not raised."""

    def __init__(self, key: str, refs: dict, spec: WorkerSpec, actor_index: int):
        self._bundle = (key, refs)
        self.spec, self.actor_index = spec, actor_index
        self.encoders: list = []
        self.failure, self.device = "", None

    def node(self) -> str:
        """The Ray node this actor runs on (the driver numbers the actors of each node)."""
        return import_ray().get_runtime_context().get_node_id()

    def start(self, rank_on_node: int | None, actors_on_node: int) -> dict:
        """Open the encoder(s); ``rank_on_node`` (hailo actors) picks this actor's chip.
        Returns :meth:`identity`."""
        spec, index, opts = self.spec, self.actor_index, dict(self.spec.opts)
        try:
            bundle = materialise_bundle(*self._bundle)
            if rank_on_node is not None:  # a backend on devices (its ray_resource): one chip each
                from hefsearch.embed.backends import load_backend_class

                self.device = device_for_rank(load_backend_class(spec.backend).device_ids(), rank_on_node,
                                              actors_on_node, socket.gethostname())
                opts["device_id"] = self.device
            self.encoders.append(spec.open_encoder(bundle, spec.backend, opts, index))
            if spec.also_fp32 and self.encoders[0].space_name != FP32_SPACE:
                self.encoders.append(spec.open_encoder(bundle, REFERENCE_BACKEND, dict(spec.also_opts), index))
        except Exception as e:
            self.failure = explain(e)
            self.close()
        return self.identity()

    def identity(self) -> dict:
        where = {"host": socket.gethostname(), "pid": os.getpid(), "device": self.device}
        if not self.encoders:
            return {**where, "failure": self.failure or "not started"}
        return {**where, "version": hefsearch_version(), **_space_identity(self.encoders[0]),
                "also": [_space_identity(e) for e in self.encoders[1:]]}

    def encode(self, texts: list[str], space: str | None = None) -> tuple[dict, float]:
        """({space name: vectors}) of every space this actor embeds, or of ``space`` only."""
        t = time.perf_counter()
        out = {}
        try:
            for enc in self.encoders:
                if space is None or enc.space_name == space:
                    out[enc.space_name] = np.ascontiguousarray(enc.encode_passages(texts), np.float32)
        except Exception as e:
            raise RuntimeError(explain(e)) from None
        return out, time.perf_counter() - t

    def close(self) -> None:
        encoders, self.encoders = self.encoders, []
        for enc in encoders:
            try:
                enc.close()
            except Exception:  # releasing a broken device: nothing more to do
                pass


def ship_bundle(ray, bundle) -> tuple[str, dict]:
    """(key, {relative path: ObjectRef}) of an opened bundle's manifest and every file it lists."""
    manifest = (bundle.path / "manifest.json").read_bytes()
    refs = {"manifest.json": ray.put(np.frombuffer(manifest, np.uint8))}
    for rel in bundle.manifest["files"]:
        refs[rel] = ray.put(np.fromfile(bundle.path / rel, np.uint8))
    return hashlib.sha256(manifest).hexdigest()[:32], refs

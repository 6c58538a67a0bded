"""Embedding on a Ray cluster: the encoder behind ``hefsearch index PATH... --ray ADDRESS``.

The driver (the machine with the library) crawls, extracts, chunks and commits as a local run
(:mod:`hefsearch.index.sync`); a pool of Ray actors computes the first space's vectors, and the
CPU FP32 space's (``--also-fp32``, or when the library has it). :class:`RayEncoder` is the
:class:`~hefsearch.embed.encoder.Encoder` there: its backend (:class:`_RemoteBackend`) carries
the actors' identity; tokenizer and the rest of the fingerprint come from the driver's copy of the
bundle. Batches go out with :meth:`RayEncoder.submit_passages` and come back in order with
:meth:`RayEncoder.collect`; the FP32 space is a :class:`RemoteSpaceEncoder`
(``RayEncoder.companions``) whose vectors arrive with the first space's, in the same batch.

Contracts: ray is imported only here and in :mod:`~hefsearch.index.ray_worker`, at call time;
the bundle travels through Ray's object store. Actors go where the backend class says
(``ray_resource``, ``device_ids()``): one per chip, pinned; else one per free CPU or
``--ray-actors N``. An actor whose fingerprint differs from the library's space (or the
majority's) is refused by name. At most :attr:`RayEncoder.max_in_flight` batches are out; the
oldest is committed first (same chunk ids as a local run). A dead or failing actor is retired
and its batches go to the others. Figures: docs/performance.md; guide: docs/scaling.md.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from hefsearch.embed.backends import AUTO_ORDER, load_backend_class
from hefsearch.embed.backends.base import Backend
from hefsearch.embed.encoder import Encoder
from hefsearch.base.errors import HefsearchError
from hefsearch.embed.fingerprint import space_fingerprint
from hefsearch.embed.reference import REFERENCE_BACKEND
from hefsearch.embed.space_names import FP32_SPACE

from .errors import FingerprintMismatch
from .ray_session import RaySession, join_cluster, start_own_ray
from .ray_worker import EmbedWorker, WorkerSpec, import_ray, open_bundle_encoder, ranks_on_nodes, ship_bundle

__all__ = ["RayEncoder", "RayPoolOptions", "RemoteSpaceEncoder", "RayPoolError", "connect", "choose_backend"]

log = logging.getLogger("hefsearch.index")

#: batches out at once per live actor (one running, one queued on the actor)
IN_FLIGHT_PER_ACTOR = 2
#: how long the actors may take to start (fetching the bundle, opening the encoder)
READY_TIMEOUT_S = 300.0
#: an actor that has not answered one batch in this long is retired (a hung device)
BATCH_TIMEOUT_S = 600.0
#: how long starting waits for free CPUs or chips (those of actors just stopped come back late)
ROOM_WAIT_S = 10.0


@dataclass(frozen=True)
class RayPoolOptions:
    """How :meth:`RayEncoder.start` builds the pool: the cluster (``"auto"``, ``"local"`` or an
    address), the backend (``"auto"``: the library's default space's), the actors (None: one per
    free device or CPU slot) and the CPUs each takes; ``also_fp32``: the actors embed the CPU FP32
    space too; ``open_encoder(bundle, backend, opts, actor index)`` opens an actor's encoder."""

    address: str = "auto"
    backend: str | None = "auto"
    actors: int | None = None
    actor_cpus: float = 1.0
    also_fp32: bool = False
    ready_timeout_s: float = READY_TIMEOUT_S
    open_encoder: Callable = open_bundle_encoder


class RayPoolError(HefsearchError):
    title = "ray cluster"


@dataclass
class ActorState:
    """One actor as the driver sees it; ``status`` is ok, refused, died or not started."""

    index: int
    handle: object
    name: str = ""
    status: str = "starting"
    reason: str = ""
    identity: dict = field(default_factory=dict)
    frames: int = 0
    busy_s: float = 0.0
    batches: int = 0
    outstanding: int = 0

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.busy_s if self.busy_s > 0 else 0.0

    def summary(self) -> dict:
        return {"actor": self.name, "status": self.status, "reason": self.reason, "frames": self.frames,
                "batches": self.batches, "frames_per_s": round(self.frames_per_s, 1)}


@dataclass
class _Ticket:
    texts: list[str]
    #: the one space to embed (a back-fill); None: every space the actors embed
    space: str | None = None
    actor: ActorState | None = None
    ref: object = None


def connect(address: str) -> RaySession | None:
    """Join the cluster at ``address`` (Ray's forms: ``auto``, ``ray://host:10001``,
    ``host:6379``; ``auto`` honours ``RAY_ADDRESS``), or with ``local`` start a Ray of this run's
    own (:mod:`~hefsearch.index.ray_session`). Returns the session this call opened (its
    ``close`` disconnects, and stops a Ray it started), or None when Ray was already
    initialised here (then nothing of it is ours to stop)."""
    ray = sys.modules.get("ray")  # not imported here: local imports it in single-machine mode
    if ray is not None and ray.is_initialized():
        return None
    return start_own_ray() if address == "local" else join_cluster(address)


def choose_backend(library, backend: str | None, cluster: dict) -> tuple[str, dict, str]:
    """(backend, options, why): ``auto`` keeps the library's default space's backend, else the
    NPU when the cluster has the ``hailo`` resource, else cpu."""
    if backend not in (None, "auto"):
        return backend, {}, f"{backend} (chosen by --backend)"
    spaces = {s.name: s for s in library.spaces()}
    default = library.settings().get("default_space")
    if default in spaces:
        info = spaces[default]
        return info.backend, dict(info.backend_opts), f"{info.backend} (the backend of the library's default space {default!r})"
    for name in AUTO_ORDER:  # the accelerators, each on the Ray resource its backend declares
        resource = ray_resource(name)
        if resource and cluster.get(resource, 0) >= 1:
            return name, {}, f"{name} (auto: the cluster has {int(cluster[resource])} '{resource}' resource(s))"
    return REFERENCE_BACKEND, {}, f"{REFERENCE_BACKEND} (auto: no node of the cluster offers the 'hailo' resource)"


def ray_resource(backend: str) -> str | None:
    """The Ray resource one actor of ``backend`` takes (its class's ``ray_resource``: one actor
    per device), or None when its actors need CPUs only."""
    return load_backend_class(backend).ray_resource


def _placement(backend: str, actors: int | None, actor_cpus: float, available: dict) -> tuple[int, dict]:
    """(how many actors, ray options of each) for this backend on this cluster."""
    resource = ray_resource(backend)
    if resource:
        chips = int(available.get(resource, 0))
        if chips < 1:
            raise RayPoolError(f"No node of the Ray cluster offers a free '{resource}' resource for the {backend} backend.",
                               f"Start each NPU host with: ray start --address HEAD:6379 --resources='{{\"{resource}\": 1}}' "
                               "(the number of chips), or use --backend cpu|cpu-int8|npu-sim with --ray-actors N.")
        n = chips if actors is None else min(actors, chips)
        return n, {"resources": {resource: 1}, "num_cpus": actor_cpus}
    cpus = available.get("CPU", 0)
    most = int(cpus // actor_cpus) if actor_cpus > 0 else (actors or 1)
    n = most if actors is None else (actors if actor_cpus <= 0 else min(actors, most))
    if n < 1:
        raise RayPoolError(f"The Ray cluster has no free CPU for a {backend} actor ({cpus:g} free).",
                           "Add nodes (ray start --address HEAD:6379) or stop other Ray jobs.")
    return n, {"num_cpus": actor_cpus}


def _wait_for_room(ray, backend: str, actors: int | None, actor_cpus: float) -> tuple[int, dict]:
    """:func:`_placement` once the cluster has room for ``actors`` (or for one), waiting up to
    ``ROOM_WAIT_S``: resources of actors just stopped come back a moment later."""
    deadline = time.monotonic() + ROOM_WAIT_S
    while True:
        try:
            n, placement = _placement(backend, actors, actor_cpus, ray.available_resources())
            if actors is None or n >= actors or time.monotonic() > deadline:
                return n, placement
        except RayPoolError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def _describe(index: int, ident: dict) -> str:
    label = f", {ident['label']}" if ident.get("label") else ""
    device = f" {ident['device']}" if ident.get("device") else ""
    return f"actor {index} on {ident.get('host', '?')} (pid {ident.get('pid', '?')}{label}{device})"


def _differences(parts: dict, ref: dict) -> str:
    keys = sorted(k for k in set(parts) | set(ref) if parts.get(k) != ref.get(k))
    return ", ".join(f"{k} {parts.get(k)!r} instead of {ref.get(k)!r}" for k in keys[:4]) or "another fingerprint"


class _RemoteEncoder(Encoder):
    """An Encoder in identity (fingerprint, space, chunking, the language-neutral derivation,
    which builds its encoder from the backend: search/derived_space.py) whose vectors the Ray
    actors compute. Its fingerprint is the driver's own, computed from the actors' backend
    parts and the driver's copy of the bundle, so it must equal the one the actors report."""

    def __init__(self, bundle, ident: dict, backend_reason: str):
        super().__init__(bundle, _RemoteBackend(ident), backend_reason=backend_reason)
        if self.fingerprint != ident["fingerprint"]:  # the same parts give the same fingerprint
            raise RayPoolError(f"The Ray actors' {self.space_name} encoder reports a fingerprint its parts do not give.",
                               "Use the same hefsearch version on the driver and the nodes.")

    def encode_queries(self, texts) -> np.ndarray:  # pragma: no cover - indexing never embeds queries
        raise NotImplementedError("a Ray pool embeds passages only")


class RayEncoder(_RemoteEncoder):
    """The first encoder of a sync, run by Ray actors (see the module docstring).

    Open it with :meth:`start`; it is an Encoder for ``sync`` (identity, chunking,
    ``encode_passages``) and adds ``submit_passages``/``collect``/``max_in_flight``.
    """

    def __init__(self, ray, bundle, actors: list[ActorState], session: RaySession | None, why: str):
        self._ray = ray
        self.actors = actors
        self._session = session
        ident = self.live[0].identity
        super().__init__(bundle, ident, f"{why} on {len(self.live)} Ray actor(s)")
        #: the other spaces the actors embed with the first (the CPU FP32 one), for the sync
        self.companions = [RemoteSpaceEncoder(self, bundle, also, len(self.live)) for also in ident.get("also", [])]

    # -- opening -----------------------------------------------------------------------------
    @classmethod
    def start(cls, library, bundle_path: str | Path, options: RayPoolOptions = RayPoolOptions()) -> "RayEncoder":
        """Join the cluster, ship the bundle, start the actors and check their fingerprints.
        ``options.also_fp32`` (or a library that has the CPU FP32 space): the actors embed it too."""
        from hefsearch.embed.bundle import Bundle

        actor_cpus = options.actor_cpus
        session = connect(options.address)  # first: a loopback Ray needs its settings before ray is imported
        ray = import_ray()
        states: list[ActorState] = []
        try:
            name, opts, why = choose_backend(library, options.backend, ray.cluster_resources())
            n, placement = _wait_for_room(ray, name, options.actors, actor_cpus)
            on_devices = ray_resource(name) is not None
            if not on_devices and actor_cpus >= 1:
                opts.setdefault("threads", int(actor_cpus))
            bundle = Bundle.open(bundle_path)
            key, refs = ship_bundle(ray, bundle)
            worker = ray.remote(EmbedWorker)
            spaces = {s.name: s for s in library.spaces()}
            spec = WorkerSpec(name, opts, options.open_encoder, also_fp32=options.also_fp32 or FP32_SPACE in spaces,
                              also_opts={"threads": max(1, int(actor_cpus))})
            states = [ActorState(i, worker.options(**placement).remote(key, refs, spec, i)) for i in range(n)]
            _start_actors(ray, states, on_devices, options.ready_timeout_s)
            _check_fingerprints(ray, states, spaces)
            _check_fingerprints(ray, states, spaces, which="also")
            return cls(ray, bundle, states, session, why)
        except BaseException:
            for s in states:
                _kill(ray, s.handle)
            if session is not None:
                session.close()
            raise

    # -- what sync reads -------------------------------------------------------------------------
    @property
    def live(self) -> list[ActorState]:
        return [a for a in self.actors if a.status == "ok"]

    @property
    def max_in_flight(self) -> int:
        return max(1, IN_FLIGHT_PER_ACTOR * len(self.live))

    # -- encoding --------------------------------------------------------------------------------
    def submit_passages(self, texts: list[str], space: str | None = None) -> _Ticket:
        """Send a batch to the least busy live actor; :meth:`collect` returns its vectors
        (of every space the actors embed, or of ``space`` only)."""
        ticket = _Ticket(list(texts), space)
        self._send(ticket)
        return ticket

    def collect(self, ticket: _Ticket) -> dict[str, np.ndarray]:
        """{space name: vectors} of a submitted batch; an actor that dies or fails meanwhile is
        retired and the batch is sent to another one."""
        ray = self._ray
        while True:
            actor = ticket.actor
            try:
                vecs, seconds = ray.get(ticket.ref, timeout=BATCH_TIMEOUT_S)
            except ray.exceptions.GetTimeoutError:
                self._retire(actor, "died", f"no answer to a batch within {BATCH_TIMEOUT_S:.0f} s")
            except ray.exceptions.RayActorError as e:
                self._retire(actor, "died", _first_line(e))
            except ray.exceptions.RayTaskError as e:
                self._retire(actor, "died", f"its encoder failed: {_first_line(e)}")
            else:
                actor.outstanding -= 1
                actor.frames += len(ticket.texts)
                actor.busy_s += seconds
                actor.batches += 1
                return vecs
            self._send(ticket)

    def encode_passages(self, texts, sections=None, *, space: str | None = None) -> np.ndarray:
        """Embed ``texts`` into the first space (or ``space``) now, spread over the live actors
        (back-fill, small batches); ``sections`` as ``Encoder.encode_passages`` takes them (the
        actors' encoders have no post-transform, so the mean is taken here)."""
        from hefsearch.embed.in_context import ContextPlan

        plan, space = ContextPlan(list(texts), sections), space or self.space_name
        if not plan.texts:
            return np.empty((0, self.dim), np.float32)
        flat = plan.flat
        parts = max(1, min(len(self.live), len(flat) // 16))
        step = -(-len(flat) // parts)
        tickets = [self.submit_passages(flat[i : i + step], space) for i in range(0, len(flat), step)]
        return plan.fuse(np.concatenate([self.collect(t)[space] for t in tickets]))

    def _send(self, ticket: _Ticket) -> None:
        live = self.live
        if not live:
            raise RayPoolError("Every Ray actor failed: " + "; ".join(
                f"{a.name}: {a.reason}" for a in self.actors if a.status != "refused"),
                "Every batch committed so far is kept; fix the cluster and run the same command again.")
        actor = min(live, key=lambda a: (a.outstanding, a.index))
        actor.outstanding += 1
        ticket.actor = actor
        ticket.ref = actor.handle.encode.remote(ticket.texts, ticket.space)

    def _retire(self, actor: ActorState, status: str, reason: str) -> None:
        if actor.status == "ok":
            actor.status, actor.reason = status, reason
            log.warning("%s stopped (%s); its batches go to the other actors", actor.name, reason)
            _kill(self._ray, actor.handle)

    # -- the end ---------------------------------------------------------------------------------
    def summary(self) -> list[dict]:
        """One entry per actor: name, status (ok, refused, died), reason, frames, frames/s."""
        return [a.summary() for a in self.actors]

    def close(self) -> None:
        for a in self.actors:
            _kill(self._ray, a.handle)
        if self._session is not None:
            self._session.close()  # a Ray this run started: stopped with all its processes
            self._session = None


def _kill(ray, handle) -> None:
    try:
        ray.kill(handle)
    except Exception:  # already gone
        pass


def _first_line(e: BaseException) -> str:
    """The line of a Ray error that says what happened (its last: the cause, after the trace)."""
    cause = getattr(e, "cause", None)
    text = str(cause if isinstance(cause, BaseException) else e).strip().splitlines()
    return text[-1].strip() if text else type(e).__name__


def _gather(ray, calls: dict, timeout_s: float) -> list[tuple[ActorState, object]]:
    """(actor, answer) of each call that answered in time; the others' actors are marked not
    started (with Ray's reason, or the timeout) and stopped."""
    ready, pending = ray.wait(list(calls), num_returns=len(calls), timeout=max(0.0, timeout_s))
    answers = []
    for ref in ready:
        s = calls[ref]
        try:
            answers.append((s, ray.get(ref)))
        except Exception as e:
            s.name, s.status, s.reason = f"actor {s.index}", "not started", _first_line(e)
            _kill(ray, s.handle)
    for ref in pending:
        s = calls[ref]
        s.name, s.status, s.reason = f"actor {s.index}", "not started", f"not ready within {timeout_s:.0f} s"
        _kill(ray, s.handle)
    return answers


def _start_actors(ray, states: list[ActorState], pin_devices: bool, timeout_s: float) -> None:
    """Each actor's node, then its encoders opened (a ``hailo`` actor on the chip of its rank on
    that node) and its identity, or why it did not start."""
    deadline = time.monotonic() + timeout_s
    placed = _gather(ray, {s.handle.node.remote(): s for s in states}, timeout_s)
    slots = ranks_on_nodes([node for _, node in placed])
    calls = {s.handle.start.remote(rank if pin_devices else None, count): s
             for (s, _), (rank, count) in zip(placed, slots)}
    for s, ident in _gather(ray, calls, deadline - time.monotonic()) if calls else []:
        s.identity, s.name = ident, _describe(s.index, ident)
        if ident.get("failure"):
            s.status, s.reason = "not started", ident["failure"]
            _kill(ray, s.handle)
        else:
            s.status = "ok"
    for s in states:
        if s.status == "not started":
            log.warning("%s did not start: %s", s.name, s.reason)
    if not any(s.status == "ok" for s in states):
        raise RayPoolError("No Ray actor started: " + "; ".join(f"{s.name}: {s.reason}" for s in states),
                           "Check that every node has hefsearch installed ('pip install hefsearch[ray]') "
                           "and the backend's hardware.")


def _check_fingerprints(ray, states: list[ActorState], spaces: dict, which: str = "first") -> None:
    """Refuse, by name, every actor whose encoder is not the reference one: the library's space
    of that name, else the fingerprint (and hefsearch version) most actors share. ``which``:
    the first space's encoder, or ``"also"``, the second space's (the CPU FP32 one)."""
    def pick(s: ActorState) -> dict | None:
        return s.identity if which == "first" else next(iter(s.identity.get("also", [])), None)

    ok = [s for s in states if s.status == "ok" and pick(s) is not None]
    if not ok:
        return
    votes = Counter((pick(s)["space_name"], pick(s)["fingerprint"], s.identity["version"]) for s in ok)
    (space, fp, version), _ = votes.most_common(1)[0]
    info = spaces.get(space)
    ref_parts = info.parts if info is not None else next(pick(s)["parts"] for s in ok if pick(s)["fingerprint"] == fp)
    if info is not None:
        fp = info.fingerprint
    own = "its encoder" if which == "first" else f"its {space} encoder"
    for s in ok:
        ident = pick(s)
        if space_fingerprint(ident["parts"]) != ident["fingerprint"]:
            why = f"the fingerprint of {own} does not match its own parts"
        elif ident["space_name"] != space:
            why = f"it fills space {ident['space_name']!r}, the others {space!r}"
        elif ident["fingerprint"] != fp:
            whose = f"the library's space {space!r}" if info is not None else "the other actors'"
            why = f"{own} builds other vectors than {whose}: {_differences(ident['parts'], ref_parts)}"
        elif s.identity["version"] != version:
            why = f"it runs hefsearch {s.identity['version']}, the others {version}"
        else:
            continue
        s.status, s.reason = "refused", why
        log.warning("%s is refused: %s", s.name, why)
        _kill(ray, s.handle)
    if not any(s.status == "ok" for s in states):
        raise FingerprintMismatch(
            "Every Ray actor was refused: " + "; ".join(f"{s.name}: {s.reason}" for s in states),
            f"The library's space {space!r} was built with another encoder; use the same bundle, chip "
            "and backend on the cluster, or index into a new library.")


class _RemoteBackend(Backend):
    """What the driver knows of a backend that runs on the actors: its identity, never its
    arithmetic (``run`` is the actors' job)."""

    def __init__(self, ident: dict):
        self.name, self.label, self.space_kind = ident["backend"], ident["label"], ident["space_kind"]
        self.seq_lens = tuple(ident["seq_lens"]) if ident.get("seq_lens") else None
        self.space_name = ident["space_name"]
        self._space_opts, self._parts = dict(ident["space_opts"]), dict(ident["backend_parts"])

    @property
    def space_opts(self) -> dict:
        return dict(self._space_opts)

    def fingerprint_parts(self) -> dict:
        return dict(self._parts)

    def run(self, embeddings, mask):  # pragma: no cover - never called: the actors embed
        raise RayPoolError(f"The {self.name} backend of this space runs on the Ray actors.")

    def close(self) -> None:
        pass


class RemoteSpaceEncoder(_RemoteEncoder):
    """A second space the Ray actors embed next to the first (the CPU FP32 one), whose vectors
    come with the first space's batches (:meth:`RayEncoder.collect`) or, for a back-fill, from
    the actors."""

    def __init__(self, pool: RayEncoder, bundle, ident: dict, actors: int):
        super().__init__(bundle, ident, f"{ident['backend']} ({ident['label']}) on {actors} Ray actor(s)")
        self._ray_pool = pool

    def encode_passages(self, texts, sections=None) -> np.ndarray:
        return self._ray_pool.encode_passages(texts, sections, space=self.space_name)

    def close(self) -> None:
        pass  # the pool (the first encoder) stops the actors

"""The Ray instance under ``hefsearch index --ray``: one that hefsearch starts and stops
(``local``), or a cluster it joins (``auto``, ``HOST:6379``, ``ray://HOST:10001``);
:func:`hefsearch.index.ray_pool.connect` picks one, and only this module touches Ray's lifecycle.

- ``local`` always starts a Ray of its own (``ray.init(address="local")``, 127.0.0.1, no
  dashboard), never one named by ``$RAY_ADDRESS`` or a stale current-cluster file.
- Joining is bounded: :func:`probe` opens a TCP connection to the address Ray would dial within
  :data:`JOIN_PROBE_S` and fails at once naming it; something that answers but is no GCS gets
  one attempt of Ray's own instead of twenty.
- A Ray hefsearch started, it stops with every process: :meth:`RaySession.close` (success,
  error, Ctrl+C) snapshots the processes this run started, calls ``ray.shutdown()``, waits
  :data:`STOP_WAIT_S` and kills what is left; on Linux the driver is a child subreaper while
  its Ray runs, so orphaned agents come back to it. SIGTERM and SIGHUP raise :class:`_Terminated`
  (a ``KeyboardInterrupt``) and are held while Ray spawns its processes, so a signal to
  hefsearch's process group reaches only the driver, which stops its Ray in order.
- Ray's own output goes to ``<cache>/ray-driver.log`` (``-v`` shows it).

Verified on Linux with Ray 2.x; elsewhere the subreaper and signal holding are skipped.
Why (a stale cluster file, Ray's ~40 s retries): docs/decisions.md.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

from .ray_worker import import_ray

__all__ = ["RaySession", "start_own_ray", "join_cluster", "probe", "JOIN_PROBE_S"]

log = logging.getLogger("hefsearch.index")

#: how long joining waits for the cluster's address to accept a connection
JOIN_PROBE_S = 5.0
#: how long stopping waits for the processes of a Ray hefsearch started before killing them
STOP_WAIT_S = 5.0
#: where Ray's own start-up and shutdown output goes (in hefsearch's cache folder)
LOG_NAME = "ray-driver.log"
#: signals that stop a run like Ctrl+C; held while Ray spawns its processes
_STOP_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s)
_PR_SET_CHILD_SUBREAPER = 36
#: Ray's switch between single-machine (0: every address is 127.0.0.1) and cluster mode
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
JOIN_HINT = ("Start one with 'ray start --head' (NPU hosts: ray start --address HEAD:6379 "
             "--resources='{\"hailo\": 1}'), then pass --ray auto on a node of it, --ray HEAD:6379 or "
             "--ray ray://HEAD:10001; or --ray local to start a Ray of its own for this run.")


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP during a Ray run: unwinds like Ctrl+C (the Ray is stopped, committed
    batches are kept); ``exit_code`` is 128 + the signal, as a shell reports it."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum
        self.exit_code = 128 + signum


def _pool_error(message: str, hint: str):
    from .ray_pool import RayPoolError

    return RayPoolError(message, hint)


class RaySession:
    """The Ray this run uses: ``own`` when hefsearch started it (then :meth:`close` stops it
    with all its processes), else a joined cluster (``close`` only disconnects)."""

    def __init__(self, ray, address: str, own: bool, before: set | None = None, handlers: dict | None = None):
        self.ray, self.address, self.own = ray, address, own
        self._before = before or set()
        self._seen: dict = {}  # (pid, create time) -> psutil.Process, for processes we started
        #: the signal handlers from before ray.init (which installs its own): restored by close
        self._handlers = handlers if handlers is not None else _handlers_now()
        self.closed = False

    # -- signals ---------------------------------------------------------------------------
    def catch_signals(self) -> None:
        """SIGTERM/SIGHUP raise :class:`_Terminated` until :meth:`close` (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for s in _STOP_SIGNALS:
            signal.signal(s, _raise_terminated)

    def _restore_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for s, old in self._handlers.items():
            signal.signal(s, old if old is not None else signal.SIG_DFL)

    # -- processes ---------------------------------------------------------------------------
    def processes(self) -> list:
        """The live processes this run's Ray consists of (descendants of this process that
        were not there before it started), remembered so that one orphaned later is still
        stopped. Empty without psutil or for a joined cluster."""
        if not self.own:
            return []
        for p in _descendants():
            key = _key(p)
            if key is not None and key not in self._before:
                self._seen.setdefault(key, p)
        return [p for p in self._seen.values() if _alive(p)]

    def close(self) -> None:
        """Disconnect; for a Ray hefsearch started, stop every one of its processes (bounded:
        :data:`STOP_WAIT_S`, then killed). Signals wait until it is done."""
        if self.closed:
            return
        self.closed = True
        with _held(_STOP_SIGNALS + (signal.SIGINT,)):
            try:
                started = self.processes()
                with _ray_output():
                    try:
                        self.ray.shutdown()
                    except Exception as e:  # noqa: BLE001 - a half-dead Ray: the processes are stopped below
                        log.info("ray.shutdown() failed: %s", e)
                if self.own:
                    _stop(started + [p for p in self.processes() if p not in started])
            finally:
                self._restore_signals()
                if self.own:
                    _set_subreaper(False)


def start_own_ray(**init_kwargs) -> RaySession:
    """A Ray of this run's own on this machine (module docstring), bound to 127.0.0.1."""
    ray = _import_ray_loopback_only()
    before = {k for k in (_key(p) for p in _descendants()) if k is not None}
    handlers = _handlers_now()
    _set_subreaper(True)
    session = None
    try:
        with _held(_STOP_SIGNALS), _ray_output() as log_path:
            try:
                ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False,
                         log_to_driver=False, logging_level=_ray_log_level(), **init_kwargs)
            except (ConnectionError, ValueError, RuntimeError, OSError) as e:
                raise _pool_error(f"Could not start a local Ray: {_last_line(e)}",
                                  f"Ray's output is in {log_path}; 'ray start --head' shows the same "
                                  "problem interactively.") from None
            session = RaySession(ray, "local", own=True, before=before, handlers=handlers)
            session.processes()  # remember them now: an agent may be orphaned before close
            session.catch_signals()
        return session  # a signal held meanwhile is raised when _held ends, above
    except BaseException:
        if session is not None:
            session.close()
        else:
            RaySession(ray, "local", own=True, before=before, handlers=handlers).close()
        raise


def join_cluster(address: str) -> RaySession:
    """Join the cluster at ``address`` (Ray's forms; ``auto`` honours ``$RAY_ADDRESS`` and the
    current-cluster file), failing within about :data:`JOIN_PROBE_S` when nothing answers."""
    from .ray_address import is_loopback_address, join_hint, join_options

    options = join_options(address)  # a loopback head: Ray's single-node settings (ray_address.py)
    hint = join_hint(address) if is_loopback_address(address) else JOIN_HINT
    ray = import_ray()
    dialled, source = dialled_address(address)
    if dialled:
        probe(dialled, address, source)
    handlers = _handlers_now()
    try:
        with _ray_output(), _one_gcs_attempt():
            ray.init(address=address, log_to_driver=False, logging_level=_ray_log_level(), **options)
    except (ConnectionError, ValueError, RuntimeError) as e:
        at = f" ({dialled}, named by {source})" if dialled and source else f" ({dialled})" if dialled else ""
        raise _pool_error(f"Cannot join the Ray cluster at {address!r}{at}: {_last_line(e)}", hint) from None
    session = RaySession(ray, address, own=False, handlers=handlers)
    session.catch_signals()
    return session


def dialled_address(address: str) -> tuple[str | None, str]:
    """(host:port that ``ray.init(address)`` will connect to, where it came from), resolved by
    Ray itself; (None, "") when Ray cannot say (then only Ray's own timeouts apply)."""
    env = os.environ.get("RAY_ADDRESS") or ""
    from_env = address == "auto" and bool(env)  # ray.init reads $RAY_ADDRESS for auto only
    given, source = (env, "$RAY_ADDRESS") if from_env else (address, f"--ray {address}")
    if "://" in given:  # Ray Client: host:port after the scheme
        return given.split("://", 1)[1].split("/", 1)[0], source
    try:
        from ray._private import services
        from ray._private.utils import read_ray_address

        dialled = services.canonicalize_bootstrap_address(given)
        current = read_ray_address() if address == "auto" and not from_env else None
        if current and services.canonicalize_bootstrap_address(current) == dialled:
            source = f"Ray's current-cluster file {_current_cluster_file()}"
    except ConnectionError as e:  # auto, and no cluster anywhere
        raise _pool_error(f"No Ray cluster to join with --ray {address}: {_last_line(e)}", JOIN_HINT) from None
    except Exception:  # noqa: BLE001 - a Ray without these internals: let ray.init decide
        return None, ""
    return dialled, source


def probe(hostport: str, address: str, source: str = "", timeout_s: float = JOIN_PROBE_S) -> None:
    """Raise RayPoolError unless ``hostport`` accepts a TCP connection within ``timeout_s``."""
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return
    except socket.timeout:
        reason = f"no answer within {timeout_s:g} s"
    except (OSError, ValueError) as e:
        reason = getattr(e, "strerror", None) or str(e)
    named = f", named by {source}" if source else ""
    stale = "current-cluster file" in source
    raise _pool_error(
        f"Nothing answers at {hostport} ({reason}): cannot join the Ray cluster {address!r}{named}.",
        ("That file is left behind by a Ray that has stopped: 'ray stop' removes it. " if stale else "")
        + JOIN_HINT)


# -- helpers -----------------------------------------------------------------------------------
def _import_ray_loopback_only():
    """ray, imported in its single-machine mode when this process has not imported it yet
    (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read once at import: every address Ray hands out
    is 127.0.0.1, so the GCS, raylet and agents listen on the loopback only; ray.init alone
    turns ``_node_ip_address="127.0.0.1"`` into the LAN address and binds every interface).
    The processes it starts inherit the setting; this process's environment is left as it was."""
    if "ray" in sys.modules or LOOPBACK_ENV in os.environ:
        return import_ray()
    os.environ[LOOPBACK_ENV] = "0"
    try:
        return import_ray()
    finally:
        os.environ.pop(LOOPBACK_ENV, None)


def _raise_terminated(signum, frame):
    raise _Terminated(signum)


def _handlers_now() -> dict:
    return {s: signal.getsignal(s) for s in _STOP_SIGNALS}


@contextmanager
def _held(signals):
    """Block ``signals`` in this thread (and in processes started meanwhile, which inherit the
    mask); pending ones are delivered when it ends."""
    if not signals or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, set(signals))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _verbose() -> bool:
    return logging.getLogger("hefsearch").getEffectiveLevel() <= logging.INFO


def _ray_log_level() -> int:
    return logging.INFO if _verbose() else logging.ERROR


def _log_path() -> Path:
    from hefsearch.base.locations import cache_dir

    return cache_dir() / LOG_NAME


@contextmanager
def _ray_output():
    """Send what Ray writes to stderr meanwhile (its processes inherit it) to the log file;
    yields the file's path. With -v (or no usable stderr) nothing is redirected."""
    path = _log_path()
    if _verbose():
        yield path
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        out = open(path, "ab")
        saved = os.dup(2)
    except OSError:
        yield path
        return
    _flush_stderr()
    os.dup2(out.fileno(), 2)
    out.close()
    try:
        yield path
    finally:
        _flush_stderr()
        os.dup2(saved, 2)
        os.close(saved)


def _flush_stderr() -> None:
    try:
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a closed or replaced stderr
        pass


@contextmanager
def _one_gcs_attempt():
    """One GCS connection attempt instead of Ray's twenty (each up to ~40 s) while joining."""
    key = "RAY_gcs_server_port_wait_time_s"
    if key in os.environ:  # the user's own budget wins
        yield
        return
    os.environ[key] = "1"
    try:
        yield
    finally:
        os.environ.pop(key, None)


def _current_cluster_file() -> str:
    try:
        from ray._common.utils import get_ray_address_file

        return get_ray_address_file(None)
    except Exception:  # noqa: BLE001
        return "ray_current_cluster"


def _last_line(e: BaseException) -> str:
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(e).__name__


def _set_subreaper(on: bool) -> None:
    """Linux: orphaned descendants are re-parented to this process instead of init, so the
    processes of a Ray it started stay findable until they are stopped."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _descendants() -> list:
    try:
        import psutil
    except ImportError:
        return []
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def _key(p):
    try:
        return p.pid, p.create_time()
    except Exception:  # noqa: BLE001 - gone meanwhile
        return None


def _alive(p) -> bool:
    try:
        import psutil

        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except Exception:  # noqa: BLE001
        return False


def _stop(processes: list) -> None:
    """Wait up to STOP_WAIT_S for ``processes`` to end (ray.shutdown asked them), then kill the
    rest; zombies among our children are reaped on the way."""
    if not processes:
        return
    import psutil

    _, alive = psutil.wait_procs(processes, timeout=STOP_WAIT_S)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    _, still = psutil.wait_procs(alive, timeout=2.0)
    if alive:
        log.info("killed %d Ray process(es) that outlived ray.shutdown(): %s", len(alive),
                 ", ".join(f"{_name(p)} (pid {p.pid})" for p in alive))
    for p in still:
        log.warning("Ray process %s (pid %d) is still running after SIGKILL", _name(p), p.pid)


def _name(p) -> str:
    try:
        return p.name()
    except Exception:  # noqa: BLE001
        return "?"

"""Whether ``hefsearch mcp`` may believe ``<library>/serve.json``: whoever can write the library
folder (a library shared with a group) could plant one that sends the assistant's queries,
and a token, to a server of their own; after a reboot a stale one names a pid that is now
another process.

A record is trusted only when every check that can be made here holds:

- the file is a regular file (not a link) owned by this user and writable by no one else;
- its URL is on this machine (a loopback address, or 0.0.0.0/:: which is reached at loopback);
- its pid is alive and, where ``/proc`` tells (Linux), is this user's ``hefsearch serve``
  process, started before the record was written (a reused pid is younger than the record)
  and listening on the recorded address and port (another program may listen on the same
  port at another loopback address, 127.0.0.2).

The token is never taken from a path the record names: it comes from this user's own
configuration (``--token-file``, ``HEFSEARCH_TOKEN``, or the default token file in
hefsearch's data folder). Anything else: ``hefsearch mcp`` opens the library itself and says
why. Verified on Linux; elsewhere the ``/proc`` checks are skipped and the file checks remain.
"""

from __future__ import annotations

import ipaddress
import json
import os
import stat
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from hefsearch.base.errors import HefsearchError

from hefsearch.base.hosts import LOCAL_NAMES, loopback_host
from .server import SERVE_STATE


@dataclass
class Recorded:
    """A trusted record: where to connect (loopback for a wildcard bind) and what it said."""

    url: str
    state: dict


class Untrusted(HefsearchError):
    """The record exists but is not believed; the message says why."""

    title = "serve.json not trusted"


def trusted_server(folder) -> Recorded | None:
    """The library's running server when its record passes every check; None when there is no
    record (or its process is gone); :class:`Untrusted` when there is one that fails a check."""
    path = Path(folder) / SERVE_STATE
    try:
        st = os.lstat(path)
    except OSError:
        return None
    state = _read(path, st)
    try:
        pid = int(state["pid"])
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # the server is gone (killed): a stale record
    except (KeyError, TypeError, ValueError, OverflowError):
        raise Untrusted(f"{path} does not name a process.") from None
    except PermissionError:
        raise Untrusted(f"{path} names process {pid}, which belongs to another user.") from None
    url = connect_url(state.get("url"))
    if url is None:
        raise Untrusted(f"{path} records the address {str(state.get('url'))[:100]!r}, which is not on this machine.")
    _check_process(pid, state, path, urllib.parse.urlsplit(url))
    return Recorded(url, state)


def _read(path: Path, st: os.stat_result) -> dict:
    if not stat.S_ISREG(st.st_mode):
        raise Untrusted(f"{path} is not a regular file (a link?).")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise Untrusted(f"{path} belongs to another user (uid {st.st_uid}).")
    if st.st_mode & 0o022:
        raise Untrusted(f"{path} can be changed by other users (mode {stat.S_IMODE(st.st_mode):04o}).")
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise Untrusted(f"{path} cannot be read ({e}).") from None
    if not isinstance(state, dict):
        raise Untrusted(f"{path} is not a server record.")
    return state


def connect_url(url) -> str | None:
    """The URL to reach a recorded server at: itself when its host is a loopback address or
    localhost, loopback for a wildcard bind (0.0.0.0, ::); None for anything else."""
    if not isinstance(url, str):
        return None
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname or ""
    if parts.scheme != "http" or port is None or parts.path not in ("", "/") or parts.username or parts.query:
        return None
    reach = loopback_host(host)
    return f"http://{reach}:{port}" if reach else None


def _check_process(pid: int, state: dict, path: Path, target: urllib.parse.SplitResult) -> None:
    proc = Path(f"/proc/{pid}")
    if not proc.is_dir():
        return  # no /proc here: the file checks are what there is
    try:
        owner = proc.stat().st_uid
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        raise Untrusted(f"process {pid}, named in {path}, cannot be inspected.") from None
    if hasattr(os, "getuid") and owner != os.getuid():
        raise Untrusted(f"process {pid}, named in {path}, belongs to another user.")
    if not _is_hefsearch_serve([a.decode("utf-8", "replace") for a in argv if a]):
        raise Untrusted(f"process {pid}, named in {path}, is not 'hefsearch serve' (a stale record?).")
    started = _start_time(pid)
    recorded = state.get("started")
    if started is not None and isinstance(recorded, (int, float)) and started > recorded + 2:
        raise Untrusted(f"process {pid} started after {path} was written: the record is stale.")
    host, port = target.hostname or "", target.port
    if port is not None and not _listens(pid, host, port):
        raise Untrusted(f"process {pid}, named in {path}, does not listen on {target.netloc} (another "
                        "program may: the record is not believed).")


def _is_hefsearch_serve(argv: list[str]) -> bool:
    """``python -m hefsearch ... serve`` or ``.../hefsearch ... serve``."""
    for i, arg in enumerate(argv):
        entry = (arg == "hefsearch" and i > 0 and argv[i - 1] == "-m") or (
            i <= 1 and os.path.basename(arg) == "hefsearch")
        if entry:
            return "serve" in argv[i + 1:]
    return False


def _start_time(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds), from /proc; None when unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of stat(5): starttime, after pid and (comm)
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _listens(pid: int, host: str, port: int) -> bool:
    """Whether process ``pid`` holds a listening TCP socket that a connection to ``host:port``
    reaches: on that port, and bound to that address or to a wildcard one (a listener of
    another program on 127.0.0.2 and the same port is not the server). True when /proc does not
    tell."""
    want = _ip(host)
    inodes = set()
    readable = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            f = line.split()
            if len(f) <= 9 or f[3] != "0A":  # 0A: LISTEN
                continue
            address, _, hex_port = f[1].rpartition(":")
            bound = _proc_address(address)
            if int(hex_port, 16) == port and bound is not None and (bound.is_unspecified or bound == want):
                inodes.add(f[9])
    if not readable:
        return True
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return True  # not inspectable: owner and process checks have passed
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False


def _ip(host: str):
    """``host`` (an address or localhost, as :func:`connect_url` leaves it) as an IP address;
    an IPv4-mapped one as its IPv4 address."""
    host = host.strip("[]")
    try:
        ip = ipaddress.ip_address("127.0.0.1" if host.lower().rstrip(".") in LOCAL_NAMES else host)
    except ValueError:
        return None
    return ip.ipv4_mapped or ip if ip.version == 6 else ip


def _proc_address(hex_address: str):
    """A local address as /proc/net/tcp{,6} writes it (32-bit words in host byte order, hex),
    as an IP address; None when it cannot be read."""
    try:
        raw = bytes.fromhex(hex_address)
        if len(raw) not in (4, 16):
            return None
        order = sys.byteorder
        words = b"".join(int.from_bytes(raw[i:i + 4], order).to_bytes(4, "big") for i in range(0, len(raw), 4))
        ip = ipaddress.ip_address(words)
    except ValueError:
        return None
    return ip.ipv4_mapped or ip if ip.version == 6 else ip

"""Joining a Ray cluster on one machine whose network reaches only loopback.

What Ray does (checked with Ray 2.60 here; ``ray/_private/services.py``): an address whose host
is ``127.0.0.1``, ``localhost`` or ``::1`` is rewritten to the machine's LAN address, both for
``ray start --head --node-ip-address 127.0.0.1`` (the head registers its node, and writes its
bootstrap address, under the LAN address, and its GCS listens on every interface) and for
``ray.init(address="127.0.0.1:PORT")`` (``resolve_ip_for_localhost``). Where only loopback is
reachable, the join then fails with "Failed to connect to Ray cluster at <LAN address>:PORT".
Ray keeps a loopback address only when it treats the machine as a single node, which it does
when ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (its switch for platforms without multi-node
clusters): then the head's node *and* its GCS are on 127.0.0.1 only. So a loopback cluster needs

- on the head: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 ray start --head --node-ip-address 127.0.0.1``;
- in the driver (:func:`join_options`, used by ``hefsearch index --ray 127.0.0.1:PORT``): the same
  setting before ``ray.init`` and ``_node_ip_address="127.0.0.1"``, so the driver attaches to the
  head's node instead of waiting for one at the LAN address;
- and, since Ray 2.5x starts heads with token authentication when a token exists
  (``~/.ray/auth_token``) but never turns it on for an explicit address, ``RAY_AUTH_MODE=token``
  in the driver: set here for a loopback head when a token is there (as Ray itself does for
  ``address="auto"``).

A head started without that setting registered its node under the LAN address: no driver
setting can reach it over loopback, and :func:`join_hint` says how to start it instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hefsearch.base.hosts import is_loopback

SINGLE_NODE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
LOOPBACK_NODE = "127.0.0.1"


def address_host(address: str) -> str | None:
    """The host of ``HOST:PORT`` / ``ray://HOST:PORT`` (None for auto and local)."""
    if address in ("auto", "local", "") or address is None:
        return None
    rest = address.split("://", 1)[-1]
    host = rest.rsplit(":", 1)[0] if rest.count(":") == 1 or rest.startswith("[") else rest
    return host.strip("[]")


def is_loopback_address(address: str) -> bool:
    """Whether ``address`` names a head on this machine's loopback (localhost, 127.0.0.0/8, ::1,
    ::ffff:127.0.0.1): the same answer as the server's (:func:`hefsearch.base.hosts.is_loopback`)."""
    host = address_host(address)
    return host is not None and is_loopback(host)


def join_options(address: str) -> dict:
    """Extra ``ray.init`` arguments (and environment) for joining ``address``: for a loopback
    head, a node on 127.0.0.1 that Ray does not rewrite; otherwise nothing. (``--ray local``
    starts its own single-machine Ray: index/ray_session.py.)"""
    if not is_loopback_address(address):
        return {}
    os.environ[SINGLE_NODE_ENV] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:  # ray imported before: its constant was read then
        constants.ENABLE_RAY_CLUSTER = False
    if "RAY_AUTH_MODE" not in os.environ and _token_available():
        os.environ["RAY_AUTH_MODE"] = "token"
        if constants is not None:  # Ray read its config at import: have it read the mode again
            try:
                from ray._raylet import Config

                Config.initialize("")
            except Exception:  # pragma: no cover - another Ray version: the join says why
                pass
    return {"_node_ip_address": LOOPBACK_NODE}


def _token_available() -> bool:
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    return Path(path).is_file()


def join_hint(address: str) -> str:
    port = address.rpartition(":")[2] if ":" in address else "6379"
    if is_loopback_address(address):
        return (f"Ray rewrites a loopback address to this machine's LAN address unless it runs as a single "
                f"node. Start the head as: {SINGLE_NODE_ENV}=0 ray start --head --node-ip-address "
                f"{LOOPBACK_NODE} --port {port} (hefsearch sets the same for its side), or use --ray local.")
    return ("Start one with 'ray start --head' (NPU hosts: ray start --address HEAD:6379 "
            "--resources='{\"hailo\": 1}'), then pass --ray auto on a node of it, --ray HEAD:6379, or "
            "--ray ray://HEAD:10001. A head started with token authentication also needs "
            "RAY_AUTH_MODE=token here.")

"""Whether a host is this machine: one answer for the server's bind (a token is required off
loopback), the guard's ``Host`` check, the client (no proxy for this machine) and a recorded
server (reached over loopback). An IPv4-mapped IPv6 address counts as the IPv4 address.
"""

from __future__ import annotations

import ipaddress

#: names that mean this machine whatever the resolver says
LOCAL_NAMES = ("localhost", "localhost.localdomain")


def _address(host: str):
    """The IP address ``host`` names (bracketed or not); an IPv4-mapped IPv6 address
    (``::ffff:127.0.0.1``) as the IPv4 address it is, so it is loopback where that is."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    return ip.ipv4_mapped or ip if ip.version == 6 else ip


def _name(host: str) -> str:
    return host.lower().rstrip(".")


def is_loopback(host: str) -> bool:
    """localhost, or a loopback address (127.0.0.0/8, ::1, ::ffff:127.0.0.1), bracketed or not."""
    ip = _address(host)
    return _name(host) in LOCAL_NAMES or (ip is not None and ip.is_loopback)


def on_this_machine(host: str) -> bool:
    """Loopback, or a wildcard bind address (0.0.0.0, ::), which a client here reaches too."""
    ip = _address(host)
    return is_loopback(host) or (ip is not None and ip.is_unspecified)


def loopback_host(host: str) -> str | None:
    """The host to put in a URL to reach a server bound to ``host`` from this machine (IPv6
    bracketed; a wildcard bind becomes loopback); None when ``host`` is not this machine."""
    if _name(host) in LOCAL_NAMES:
        return "127.0.0.1"
    ip = _address(host)
    if ip is None or not (ip.is_loopback or ip.is_unspecified):
        return None
    if ip.is_unspecified:
        return "127.0.0.1" if ip.version == 4 else "[::1]"
    return str(ip) if ip.version == 4 else f"[{ip}]"

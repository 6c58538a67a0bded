"""base/hosts.py: the one answer to "is this host this machine", for the bind, the client and a
recorded server."""

from __future__ import annotations

import pytest

from hefsearch.base.hosts import is_loopback, loopback_host, on_this_machine


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.4.5", "::1", "[::1]", "localhost", "LOCALHOST.", "localhost.localdomain"])
def test_loopback_hosts_need_no_token_and_are_reached_as_they_are(host):
    assert is_loopback(host) and on_this_machine(host)
    assert loopback_host(host) in ("127.0.0.1", host.strip("[]"), "[::1]")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "[::]"])
def test_a_wildcard_bind_is_this_machine_but_not_loopback(host):
    assert on_this_machine(host) and not is_loopback(host)
    assert loopback_host(host) == ("127.0.0.1" if "." in host else "[::1]")


@pytest.mark.parametrize("host", ["192.168.1.4", "10.0.0.1", "example.org", "fe80::1", "", "localhost.example.org"])
def test_other_hosts_are_not_this_machine(host):
    assert not is_loopback(host) and not on_this_machine(host) and loopback_host(host) is None

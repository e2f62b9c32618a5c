"""Hostile addresses refused without a server: deprecated and reserved ranges, public addresses passed. (Bombs,
thin strips, timeouts and redirects against servers: tests/integration/reliability/test_hostile_servers.py.)"""
from __future__ import annotations


import pytest

from cultura.curate import safety
from tests.fakes.image_server import image_server, tall_png  # noqa: F401 (fixture)


@pytest.mark.parametrize("ip,cat", [
    ("fec0::1", "site-local"), ("fefe::1", "site-local"), ("3ffe:831f::1", "reserved"), ("2001:db8::1", "private"),
    ("100.64.0.1", "non-global"), ("198.18.0.1", "private"), ("240.0.0.1", "private"), ("0.1.2.3", "private"),
    ("::7f00:1", "loopback"), ("64:ff9b::a00:1", "private"), ("::ffff:10.0.0.1", "private"), ("::1", "loopback"),
])
def test_deprecated_and_reserved_ranges_are_refused(ip, cat):
    assert safety.blocked_category(ip) == cat
    with pytest.raises(safety.BlockedAddress):
        safety.check_host(ip, 80)


@pytest.mark.parametrize("ip", ["8.8.8.8", "2606:4700:4700::1111", "2a00:1450:4001::1"])
def test_public_addresses_pass(ip):
    assert safety.blocked_category(ip) is None

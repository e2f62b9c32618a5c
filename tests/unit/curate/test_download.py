"""The downloader's address policy without a server: blocked categories and every numeric host form resolved
before the check. (Against the trap server: tests/integration/curate/test_download_against_servers.py.)"""
from __future__ import annotations


import pytest

from cultura.curate import safety
from tests.fakes.image_server import image_bytes, image_server  # noqa: F401 (fixture)


@pytest.mark.parametrize("ip, category", [
    ("127.0.0.1", "loopback"), ("10.0.0.1", "private"), ("172.16.5.4", "private"), ("192.168.1.1", "private"),
    ("169.254.169.254", "link-local"), ("224.0.0.1", "multicast"), ("0.0.0.0", "unspecified"),
    ("100.64.0.1", "non-global"), ("240.0.0.1", "private"), ("::1", "loopback"), ("fe80::1", "link-local"),
    ("fc00::1", "private"), ("::ffff:127.0.0.1", "loopback"), ("2002:a00:1::", "private"),
    ("ff02::1", "multicast"), ("8.8.8.8", None), ("2606:4700:4700::1111", None)])
def test_blocked_category(ip, category):
    assert safety.blocked_category(ip) == category


def test_numeric_host_forms_are_resolved_before_checking():
    with pytest.raises(safety.BlockedAddress, match="loopback"):
        safety.check_host("2130706433", 80)            # 127.0.0.1 written as one number
    assert safety.check_host("127.0.0.1", 8080, ["127.0.0.1:8080"]) == ["127.0.0.1"]
    assert safety.host_allowed("::1", 80, ["[::1]:80"])

"""Address checks for the image downloader: never connect to loopback, private, link-local, multicast or
reserved addresses (SSRF), unless the exact ``host:port`` is listed in ``download.allow_hosts``.

The check happens *after* DNS resolution, on every address a name resolves to, and the connection is then
made to an address that was checked (no second lookup, so a DNS answer that changes between the check and
the connect cannot slip a private address through). All lookups go through :func:`resolve_host`, one
function that tests monkeypatch.

The downloader's client (:class:`.fetcher.SafeClient`) calls :func:`acheck_host` for every TCP connection it
opens, including each redirect hop, and connects to an address it returned.

>>> blocked_category("127.0.0.1"), blocked_category("169.254.169.254"), blocked_category("93.184.215.14")
('loopback', 'link-local', None)
>>> host_allowed("127.0.0.1", 8080, ["127.0.0.1:8080"]), host_allowed("127.0.0.1", 8081, ["127.0.0.1:8080"])
(True, False)
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import select
import socket
import typing

from ..errors import CulturaError

__all__ = ["BlockedAddress", "DNSError", "resolve_host", "blocked_category", "host_allowed", "check_host",
           "acheck_host"]


class BlockedAddress(CulturaError):
    """The host resolves to an address the downloader refuses (loopback, private, …)."""


class DNSError(CulturaError):
    """The host name does not resolve."""


def resolve_host(host: str, port: int) -> list[str]:
    """All IP addresses ``host`` resolves to (in resolver order, duplicates removed).

    The single place where the downloader does DNS: tests monkeypatch this function.
    Raises :class:`DNSError` when the name does not resolve.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise DNSError(f"cannot resolve {host!r}: {e}") from None
    out: list[str] = []
    for *_, sockaddr in infos:
        ip = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 zone id
        if ip not in out:
            out.append(ip)
    if not out:
        raise DNSError(f"{host!r} resolves to no address")
    return out


_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_V4COMPAT = ipaddress.ip_network("::/96")


def _embedded(ip: ipaddress.IPv4Address | ipaddress.IPv6Address):
    """IPv4 addresses carried inside an IPv6 one (mapped, 6to4, Teredo client, NAT64, IPv4-compatible)."""
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            yield ip.ipv4_mapped
        if ip.sixtofour is not None:
            yield ip.sixtofour
        if ip.teredo is not None:
            yield ip.teredo[1]
        if ip in _NAT64 or (ip in _V4COMPAT and int(ip) > 0xFFFF):
            yield ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)


#: Ranges refused although Python's ``ipaddress`` calls them global (or that are easy to miss): deprecated
#: IPv6 site-local (fec0::/10), the 6bone (3ffe::/16), documentation, benchmarking, NAT64 and the like.
#: IPv4 addresses embedded in NAT64 / IPv4-compatible forms are checked through :func:`_embedded`.
_EXTRA_BLOCKED = [(ipaddress.ip_network(n), cat) for n, cat in (
    ("fec0::/10", "site-local"), ("3ffe::/16", "reserved"), ("2001:db8::/32", "reserved"),
    ("3fff::/20", "reserved"), ("5f00::/16", "reserved"), ("100::/64", "reserved"),
    ("2001::/23", "reserved"), ("2002::/16", "reserved"), ("64:ff9b:1::/48", "private"),
    ("fc00::/7", "private"), ("fe80::/10", "link-local"), ("ff00::/8", "multicast"), ("::/8", "reserved"),
    ("0.0.0.0/8", "unspecified"), ("100.64.0.0/10", "private"), ("192.0.0.0/24", "reserved"),
    ("192.0.2.0/24", "reserved"), ("198.18.0.0/15", "reserved"), ("198.51.100.0/24", "reserved"),
    ("203.0.113.0/24", "reserved"), ("240.0.0.0/4", "reserved"), ("255.255.255.255/32", "reserved"),
)]


def blocked_category(ip: str) -> str | None:
    """Why ``ip`` must not be contacted (``'loopback'``, ``'private'``, ``'link-local'``, ``'multicast'``,
    ``'reserved'``, ``'unspecified'``, ``'site-local'``, ``'non-global'``), or ``None`` for a public unicast
    address."""
    try:
        addr = ipaddress.ip_address(ip.strip("[]").split("%", 1)[0])
    except ValueError:
        return "invalid"
    for inner in _embedded(addr):
        cat = blocked_category(str(inner))
        if cat:
            return cat
    for name, flag in (("unspecified", addr.is_unspecified), ("loopback", addr.is_loopback),
                       ("link-local", addr.is_link_local), ("multicast", addr.is_multicast),
                       ("private", addr.is_private), ("reserved", addr.is_reserved),
                       ("non-global", not addr.is_global)):
        if flag:
            return name
    for net, cat in _EXTRA_BLOCKED:
        if addr.version == net.version and addr in net:
            return cat
    return None


def _host_key(host: str, port: int) -> str:
    host = host.strip("[]").lower().rstrip(".")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def host_allowed(host: str, port: int, allow_hosts: typing.Iterable[str]) -> bool:
    """True when the exact ``host:port`` is listed (IPv6 as ``[::1]:8080``; case-insensitive)."""
    key = _host_key(host, port)
    return any(key == a.strip().lower() for a in allow_hosts)


def _ip_literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


def check_host(host: str, port: int, allow_hosts: typing.Iterable[str] = ()) -> list[str]:
    """Resolve ``host`` and return the addresses that may be contacted, in order.

    Raises :class:`BlockedAddress` when any address is refused (a name that resolves to one public and one
    private address is refused as a whole), :class:`DNSError` when it does not resolve.
    """
    literal = _ip_literal(host)
    ips = [literal] if literal else resolve_host(host.strip("[]"), port)
    if host_allowed(host, port, allow_hosts):
        return ips
    for ip in ips:
        cat = blocked_category(ip)
        if cat:
            shown = host if literal else f"{host} ({ip})"
            raise BlockedAddress(f"refused {cat} address {shown}:{port}; list the exact "
                                 f"'{_host_key(host, port)}' in download.allow_hosts to allow it")
    return ips


_dns_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _dns_executor() -> concurrent.futures.ThreadPoolExecutor:
    """Lookups get their own threads: a slow DNS server must not hold up image decoding."""
    global _dns_pool
    if _dns_pool is None:
        _dns_pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="cultura-dns")
    return _dns_pool


async def acheck_host(host: str, port: int, allow_hosts: typing.Iterable[str] = (), *,
                      timeout: float | None = None) -> list[str]:
    """:func:`check_host` without blocking the event loop (the lookup runs in a thread)."""
    if _ip_literal(host):
        return check_host(host, port, allow_hosts)
    loop = asyncio.get_running_loop()
    fut = loop.run_in_executor(_dns_executor(), check_host, host, port, list(allow_hosts))
    return await asyncio.wait_for(fut, timeout)


def _socket_readable(sock) -> bool:
    """True when the socket has data or EOF pending (an idle keep-alive connection the server closed)."""
    if sock is None or sock.fileno() < 0:
        return True
    if hasattr(select, "poll"):
        p = select.poll()
        p.register(sock, select.POLLIN)
        return bool(p.poll(0))
    return bool(select.select([sock], [], [], 0)[0])

"""Which HTTP proxy carries a download, read the way the Python ecosystem reads it.

``download.proxy`` wins when set: ``http://host:port`` sends every request through that proxy, ``direct`` sends
none through a proxy. Unset, the environment decides, as for curl, httpx, pip and :mod:`urllib.request`:
``http_proxy``/``HTTP_PROXY`` for ``http://`` URLs, ``https_proxy``/``HTTPS_PROXY`` for ``https://`` URLs,
``all_proxy``/``ALL_PROXY`` for either when the scheme's own is unset, and ``no_proxy``/``NO_PROXY`` (host names,
domain suffixes, ``host:port``, ``*``) for the hosts reached directly (:func:`urllib.request.getproxies` and
:func:`urllib.request.proxy_bypass`: the lower-case name wins, ``HTTP_PROXY`` is ignored in a CGI request).

The proxy is a host the user chose, so it is not address-checked (it may be ``127.0.0.1``); every *target* host
still is (:mod:`.fetcher` resolves it and refuses private addresses before asking the proxy to connect). Only
``http://`` proxies are spoken to (HTTPS targets through ``CONNECT``); credentials in the proxy URL
(``http://user:password@host:port``, from the environment only: ``cultura.toml`` holds no secrets) become the
``Proxy-Authorization`` header and appear nowhere else: a :class:`Proxy` prints as ``http://host:port``.
"""
from __future__ import annotations

import base64
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from ..errors import CulturaError

__all__ = ["Proxy", "ProxyConfigError", "Proxies", "proxies_for", "basic_credentials"]


class ProxyConfigError(CulturaError):
    """A proxy from the environment or ``download.proxy`` that the downloader cannot use."""


@dataclass(frozen=True)
class Proxy:
    """An HTTP proxy: where to connect and the ``Proxy-Authorization`` value, if any (never printed)."""
    host: str
    port: int
    authorization: bytes | None = field(default=None, repr=False)

    @property
    def shown(self) -> str:
        """``http://host:port``: the proxy as messages name it (no credentials)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def __str__(self) -> str:
        return self.shown


def basic_credentials(user: str | None, password: str | None) -> bytes:
    """The ``Basic`` credentials of a URL's ``user:password`` (percent-decoded, as curl and httpx send them):
    the value of ``Proxy-Authorization`` for a proxy URL, of ``Authorization`` for an image URL."""
    pair = f"{urllib.parse.unquote(user or '')}:{urllib.parse.unquote(password or '')}"
    return b"Basic " + base64.b64encode(pair.encode("utf-8"))


def _parse(url: str, origin: str) -> Proxy:
    """A :class:`Proxy` from ``url`` (``http://[user:password@]host[:port]``; ``host:port`` alone is taken as
    ``http://``, as curl does). ``origin`` names where the URL came from, for the error."""
    raw = url.strip()
    if "://" not in raw:
        raw = "http://" + raw
    try:
        p = urllib.parse.urlsplit(raw)
        port = p.port
    except ValueError as e:
        raise ProxyConfigError(f"{origin} is not a valid proxy URL ({e}); set it to http://host:port.") from None
    if p.scheme.lower() != "http" or not p.hostname:
        shown = urllib.parse.urlunsplit((p.scheme, p.hostname or "", "", "", ""))
        raise ProxyConfigError(f"{origin} is {shown!r}, but the downloader talks to HTTP proxies only "
                               "(http://host:port; HTTPS sites go through them with CONNECT); set it to an "
                               "http:// proxy, or set download.proxy to 'direct' to ignore it.")
    auth = basic_credentials(p.username, p.password) if p.username is not None or p.password is not None else None
    return Proxy(p.hostname, port or 80, auth)


class Proxies:
    """The proxy of each request: :meth:`for_url` gives a :class:`Proxy` or ``None`` (direct)."""

    def __init__(self, *, fixed: Proxy | None = None, environment: dict[str, str] | None = None,
                 direct: bool = False):
        self.fixed, self.direct = fixed, direct
        self.environment = {k: v for k, v in (environment or {}).items() if k != "no" and v}
        self._parsed: dict[str, Proxy] = {}
        for scheme in ("http", "https", "all"):  # refused now, with the variable's name, not on the first request
            if scheme in self.environment:
                self._parsed[scheme] = _parse(self.environment[scheme],
                                              f"The environment's {scheme.upper()}_PROXY")

    @property
    def active(self) -> bool:
        return not self.direct and (self.fixed is not None or bool(self._parsed))

    def for_url(self, scheme: str, host: str, port: int) -> Proxy | None:
        """The proxy for ``scheme://host:port``, or ``None`` to connect directly."""
        if self.direct:
            return None
        if self.fixed is not None:
            return self.fixed
        proxy = self._parsed.get(scheme) or self._parsed.get("all")
        if proxy is None:
            return None
        shown = f"[{host}]" if ":" in host else host
        if urllib.request.proxy_bypass(f"{shown}:{port}"):  # NO_PROXY: host, domain suffix, host:port, *
            return None
        return proxy

    def describe(self) -> str:
        """What the downloader does about proxies, in words (no credentials), for the run's record."""
        if self.direct:
            return "direct"
        if self.fixed is not None:
            return self.fixed.shown
        if not self._parsed:
            return "none"
        return ", ".join(f"{k}: {v.shown}" for k, v in sorted(self._parsed.items()))


def proxies_for(setting: str | None) -> Proxies:
    """The :class:`Proxies` of a download: ``download.proxy`` (``setting``) when set, else the environment."""
    if setting:
        if setting.strip() == "direct":
            return Proxies(direct=True)
        return Proxies(fixed=_parse(setting, "download.proxy"))
    return Proxies(environment=urllib.request.getproxies())

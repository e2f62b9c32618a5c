"""One scrubber for secrets: nothing a user configured as a credential reaches the database, logs,
reports, exports or Label Studio.

Two operations, used by every area before it stores, logs, exports or pushes text:

- :func:`strip_userinfo` removes ``user:password@`` from a URL (``http://u:p@host/v1`` → ``http://host/v1``);
- :func:`display_url` is the form of a URL that may be stored, printed, logged or exported: no userinfo, no
  known secret, no value of a secret-looking query parameter (``token``, ``key``, ``api_key``,
  ``access_token``, ``password``, ``secret``). It is for display only: a request is made with the URL as given
  (a signed URL's token is what lets it through), and :func:`shown_as` tells whether a URL is the one behind a
  display form;
- :func:`scrub` removes every known secret from free text (an error message, a server reply): the values of
  credential-like environment variables (``*_API_KEY``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, …), the
  key in ``OPENAI_API_KEY_FILE``, passwords inside URLs held in the environment, secrets registered at run
  time with :func:`register_secret` (e.g. the Label Studio admin token), and anything shaped like an
  ``Authorization`` header, a bearer token or userinfo inside a URL.

>>> strip_userinfo("http://user:pass@example.org:8080/v1?q=1")
'http://example.org:8080/v1?q=1'
>>> scrub("HTTP 500: echo Authorization: Bearer abc.def-123", secrets=())
'HTTP 500: echo Authorization: [redacted]'
>>> scrub("cannot reach http://bob:hunter2@example.org/v1", secrets=())
'cannot reach http://example.org/v1'
"""
from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path
from typing import Any, Iterable

__all__ = ["REDACTED", "strip_userinfo", "strip_urls", "scrub", "scrub_obj", "known_secrets", "register_secret",
           "display_url", "shown_as"]

REDACTED = "[redacted]"

#: Environment variable names whose values are credentials.
_SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS$|CREDENTIAL|AUTH|PRIVATE_KEY|"
                          r"ACCESS_KEY|SESSION)", re.I)
#: Values shorter than this are not treated as secrets (a PASSWORD=1 would otherwise redact every "1").
MIN_SECRET_LEN = 6

_registered: set[str] = set()

# "Authorization: Bearer xyz", "authorization": "Token xyz", 'Bearer xyz', "X-Api-Key: xyz", api_key=xyz
_PATTERNS = [
    re.compile(r"(?i)(\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?)((?:bearer|token|basic)\s+)?[^\s\"',;}]+"),
    re.compile(r"(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(\bToken\s+)(?=[A-Za-z]*\d)[A-Za-z0-9]{20,}"),
    re.compile(r"(?i)(\b(?:x-)?api[-_]?key\b[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&}]+"),
    re.compile(r"(?i)([?&](?:api_?key|access_token|token|key|password|secret)=)[^&\s\"'#]+"),
    re.compile(r"\b(sk-)[A-Za-z0-9_-]{12,}"),
]
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@\"'<>]+@")


def strip_userinfo(url: str | None) -> str | None:
    """``url`` without ``user:password@`` (anything else unchanged; ``None`` and non-URLs pass through)."""
    if not url or "@" not in url:
        return url
    try:
        p = urllib.parse.urlsplit(url)
    except ValueError:
        return _URL_USERINFO.sub(r"\1", url)
    if not p.scheme or "@" not in p.netloc:
        return url
    netloc = p.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit((p.scheme, netloc, p.path, p.query, p.fragment))


def display_url(url: str | None, *, secrets: Iterable[str] | None = None) -> str | None:
    """``url`` as it may be stored and shown: :func:`strip_userinfo`, then :func:`scrub` (``secrets``: default
    :func:`known_secrets`). ``None`` passes through.

    >>> display_url("https://u:pw@cdn.example/img/78.jpg?token=abc123&w=300", secrets=())
    'https://cdn.example/img/78.jpg?token=[redacted]&w=300'
    """
    if not isinstance(url, str):
        return url
    return scrub(strip_userinfo(url), secrets=secrets)


def shown_as(display: str, url: str) -> bool:
    """True when ``display`` can be the :func:`display_url` of ``url``: equal once ``url`` has lost its
    userinfo, each ``[redacted]`` standing for the text it replaced (whatever secrets were known then).

    >>> shown_as("https://cdn.example/a.jpg?token=[redacted]", "https://cdn.example/a.jpg?token=s3cr3t")
    True
    >>> shown_as("https://cdn.example/a.jpg?token=[redacted]", "https://cdn.example/b.jpg?token=s3cr3t")
    False
    """
    if not isinstance(display, str) or not isinstance(url, str):
        return False
    bare = strip_userinfo(url)
    if REDACTED not in display:
        return display == bare
    pattern = "(?s:.+?)".join(re.escape(part) for part in display.split(REDACTED))
    return re.fullmatch(pattern, bare) is not None


def register_secret(value: str | None) -> None:
    """Treat ``value`` as a secret for the rest of the process (e.g. a token read from a 0600 file)."""
    if value and len(value) >= MIN_SECRET_LEN:
        _registered.add(value)


def _userinfo_parts(url: str) -> list[str]:
    try:
        p = urllib.parse.urlsplit(url)
    except ValueError:
        return []
    out = []
    for part in (p.password, p.username):
        if part:
            out += [part, urllib.parse.unquote(part)]
    return out


def known_secrets(environ: dict | None = None) -> list[str]:
    """Every secret value known now: credential-like environment variables, the key file named by
    ``OPENAI_API_KEY_FILE``, user names and passwords inside URL-valued variables, registered secrets.
    Longest first (so a secret that contains another is removed whole)."""
    env = os.environ if environ is None else environ
    found = set(_registered)
    for name, value in env.items():
        if not value:
            continue
        if _SECRET_NAME.search(name) and not name.endswith("_FILE"):
            found.add(value.strip())
        if "://" in value and "@" in value:
            found.update(_userinfo_parts(value.strip()))
    key_file = env.get("OPENAI_API_KEY_FILE")
    if key_file:
        try:
            found.add(Path(key_file).expanduser().read_text().strip())
        except OSError:
            pass
    return sorted((s for s in found if len(s) >= MIN_SECRET_LEN), key=len, reverse=True)


def scrub(text: Any, *, secrets: Iterable[str] | None = None) -> Any:
    """``text`` with every secret replaced by ``[redacted]`` (``secrets``, default :func:`known_secrets`;
    registered ones always), userinfo removed from URLs and credential-shaped headers masked. Non-strings
    pass through unchanged."""
    if not isinstance(text, str) or not text:
        return text
    if secrets is None:
        secrets = known_secrets()
    else:
        secrets = sorted({s for s in [*secrets, *_registered] if s and len(s) >= MIN_SECRET_LEN},
                         key=len, reverse=True)
    for s in secrets:
        if s in text:
            text = text.replace(s, REDACTED)
    text = _URL_USERINFO.sub(r"\1", text)
    for pat in _PATTERNS:
        text = pat.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def strip_urls(obj: Any) -> Any:
    """``obj`` (a string or a JSON-like structure) with ``user:password@`` removed from every URL inside its
    strings (keys included). Cheap enough for every printed table or JSON document: strings without ``://``
    and ``@`` are returned as they are. What a command prints goes through this (``cultura.cli.console``)."""
    if isinstance(obj, str):
        return _URL_USERINFO.sub(r"\1", obj) if "@" in obj and "://" in obj else obj
    if isinstance(obj, dict):
        return {strip_urls(k): strip_urls(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(strip_urls(x) for x in obj)
    return obj


def scrub_obj(obj: Any, *, secrets: Iterable[str] | None = None) -> Any:
    """:func:`scrub` applied to every string in a JSON-like structure (dict keys included)."""
    if secrets is None:
        secrets = known_secrets()
    if isinstance(obj, str):
        return scrub(obj, secrets=secrets)
    if isinstance(obj, dict):
        return {scrub_obj(k, secrets=secrets): scrub_obj(v, secrets=secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(scrub_obj(x, secrets=secrets) for x in obj)
    return obj

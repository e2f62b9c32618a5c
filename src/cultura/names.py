"""The one validator for names that enter a project from outside: concept names (``concepts add``, ``urls:``
rows, ``folder:`` layouts, img2dataset sidecars, every importer) and native terms (``concepts set-term``, its
``--from`` file). Core: imports only ``errors``.

A name is canonicalised, then checked; a name that fails is refused with one sentence (an importer records
it as a failed input row with the reason and goes on with the file):

- **Unicode NFC.** "café" typed with a combining accent (NFD) and with a precomposed é (NFC) is one name.
  Runs of whitespace (tabs, newlines, non-breaking spaces) become one space; the ends are trimmed.
- **No invisible or control characters**: C0/C1 controls (NUL, ESC, …), bidirectional embedding/override/
  isolate/mark characters (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C: they make a name display
  unlike its bytes), zero-width and other format characters (U+200B, U+2060, U+FEFF, U+00AD, …), surrogates,
  private-use and unassigned code points. The zero-width (non-)joiners U+200C/U+200D are kept between two
  visible characters, where Persian, Hindi, Malayalam and emoji sequences need them.
- **Something visible**: at least one letter, digit or symbol (a name of zero-width characters is refused).
- **Not path-like**: no ``..`` segment and no leading ``/``, ``\\`` or ``~`` (names become parts of file names
  and item keys).
- **No spreadsheet formula start**: a name starting with ``=``, ``+``, ``-`` or ``@`` is **refused**, not
  rewritten, because a spreadsheet opening an export would run it as a formula and a silently rewritten name
  would no longer match its source. Rename it (e.g. drop the sign) and rerun.
- **A length cap**: :data:`MAX_NAME_CHARS` characters for a concept, :data:`MAX_TERM_CHARS` for a term,
  :data:`MAX_LABEL_CHARS` for the names a user gives a benchmark, an annotator or a campaign.

Benchmark, annotator and campaign names (:func:`label_name`, :func:`benchmark_name`) pass the same checks at
every door that creates one; a benchmark's name also becomes a Hugging Face dataset config name, so it may not
hold any of :data:`HUB_CONFIG_FORBIDDEN` (the characters ``datasets`` refuses in a config name with
``InvalidConfigName``: they cannot be in a folder name on Windows), nor ``@`` (``NAME@VERSION`` names a version).

>>> clean_name("  Cafe\u0301   au  lait ")
'Café au lait'
>>> name_problem("a/../b")
'looks like a file path'
>>> name_problem("=HYPERLINK(1)")
"starts with '=', which spreadsheets run as a formula"
"""
from __future__ import annotations

import unicodedata
import urllib.parse

from .errors import CulturaError
from .redact import strip_userinfo

__all__ = ["MAX_NAME_CHARS", "MAX_TERM_CHARS", "MAX_LABEL_CHARS", "HUB_CONFIG_FORBIDDEN", "BadName", "clean_name",
           "name_problem", "concept_name", "check_concept", "label_name", "benchmark_name", "check_endpoint_url",
           "endpoint_url_problem"]

#: Longest concept name accepted (characters, after NFC); the seeds' longest is under 40.
MAX_NAME_CHARS = 200
#: Longest native term accepted (characters, after NFC).
MAX_TERM_CHARS = 500
#: Longest benchmark, annotator or campaign name (characters, after NFC): it becomes part of file names,
#: Label Studio project titles and a Hub config name.
MAX_LABEL_CHARS = 100
#: Characters a Hugging Face dataset config name may not hold: ``datasets.naming.INVALID_WINDOWS_CHARACTERS_IN_PATH``
#: (``datasets`` raises ``InvalidConfigName`` on load), mirrored here so that names.py imports nothing heavy.
HUB_CONFIG_FORBIDDEN = r"<>:/\|?*"

_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}
_JOINERS = {0x200C, 0x200D}
_FORMULA = "=+-@"


class BadName(CulturaError):
    """A name refused by :func:`clean_name`; ``reason`` is the short phrase an import row records."""

    def __init__(self, message: str, *, reason: str, param: str | None = None):
        super().__init__(message, param=param)
        self.reason = reason


def _shown(text: str, limit: int = 40) -> str:
    """A short, printable rendering of ``text`` for an error (invisible characters as ``\\uXXXX``)."""
    short = text if len(text) <= limit else text[:limit] + "…"
    return ascii(short) if any(unicodedata.category(c)[0] in "CZ" and c != " " for c in short) else repr(short)


def _char_problem(s: str) -> str | None:
    for i, ch in enumerate(s):
        cp = ord(ch)
        cat = unicodedata.category(ch)
        if cp in _BIDI:
            return f"contains the bidirectional control character U+{cp:04X}"
        if cp in _JOINERS:
            before, after = s[i - 1:i], s[i + 1:i + 2]
            if not before or not after or before.isspace() or after.isspace() or \
                    ord(before) in _JOINERS or ord(after) in _JOINERS:
                return f"contains the zero-width joiner U+{cp:04X} outside a word"
            continue
        if cat == "Cc":
            return f"contains the control character U+{cp:04X}"
        if cat == "Cf":
            return f"contains the invisible format character U+{cp:04X}"
        if cat in ("Cs", "Co", "Cn"):
            kind = {"Cs": "a surrogate", "Co": "a private-use", "Cn": "an unassigned"}[cat]
            return f"contains {kind} code point U+{cp:04X}"
    return None


def name_problem(name: str, *, max_chars: int = MAX_NAME_CHARS) -> str | None:
    """Why the canonical ``name`` (see :func:`clean_name`) is refused, as a short phrase; ``None`` if it is
    fine. The empty name is not judged here (callers decide whether empty means "missing")."""
    if not name:
        return None
    if len(name) > max_chars:
        return f"is {len(name):,} characters long (at most {max_chars:,})"
    bad = _char_problem(name)
    if bad:
        return bad
    if not any(unicodedata.category(c)[0] in "LNS" for c in name):
        return "has no visible character"
    if name[0] in _FORMULA:
        return f"starts with {name[0]!r}, which spreadsheets run as a formula"
    segments = name.replace("\\", "/").split("/")
    if ".." in (s.strip() for s in segments) or name[0] in "/\\~":
        return "looks like a file path"
    return None


def clean_name(raw, *, what: str = "concept name", max_chars: int = MAX_NAME_CHARS,
               param: str | None = None) -> str:
    """``raw`` in canonical form (NFC, whitespace collapsed, trimmed; case kept), or :class:`BadName` with one
    sentence naming the fix. ``None`` and whitespace-only text give ``""``."""
    if raw is None:
        return ""
    text = raw if isinstance(raw, str) else str(raw)
    if len(text) > 4 * max_chars + 1024:  # do not normalise megabytes only to refuse them
        raise BadName(f"The {what} {_shown(text)} is {len(text):,} characters long (at most {max_chars:,}); "
                      "shorten it and rerun.", reason=f"{what} is {len(text):,} characters long (at most "
                      f"{max_chars:,})", param=param)
    name = " ".join(unicodedata.normalize("NFC", text).split())
    problem = name_problem(name, max_chars=max_chars)
    if problem:
        raise BadName(f"The {what} {_shown(name)} {problem}; fix it in the input and rerun.",
                      reason=f"{what} {problem}", param=param)
    return name


def concept_name(raw, *, param: str | None = None) -> str:
    """The canonical concept name: :func:`clean_name`, then lower case (NFC again: lower-casing may
    decompose)."""
    name = clean_name(raw, param=param)
    return unicodedata.normalize("NFC", name.lower())


def check_concept(raw) -> tuple[str, str | None]:
    """For importers: ``(name, None)`` for a good concept name, ``("", reason)`` for a refused one (``reason``
    is what the failed import row records)."""
    try:
        return concept_name(raw), None
    except BadName as e:
        return "", e.reason


def label_name(raw, *, what: str, param: str | None = None) -> str:
    """The canonical name a user gives a benchmark, an annotator or a campaign (``what`` says which):
    :func:`clean_name` with the :data:`MAX_LABEL_CHARS` cap, and never empty. One sentence naming the fix
    otherwise (:class:`BadName`).

    >>> label_name("  team  ja ", what="campaign name")
    'team ja'
    >>> label_name("\u202eevil", what="annotator name")
    Traceback (most recent call last):
    ...
    cultura.names.BadName: The annotator name '\u202eevil' contains the bidirectional control character U+202E; fix it in the input and rerun.
    """
    name = clean_name(raw, what=what, max_chars=MAX_LABEL_CHARS, param=param)
    if not name:
        raise BadName(f"The {what} is empty; give one with a visible character and rerun.",
                      reason=f"{what} is empty", param=param)
    return name


def benchmark_name(raw, *, param: str | None = "name") -> str:
    r"""The canonical benchmark name: :func:`label_name`, and none of :data:`HUB_CONFIG_FORBIDDEN`, because the
    exported dataset has one config per benchmark, named after it, and ``datasets.load_dataset`` refuses a
    config name holding one of them.

    >>> benchmark_name("a/b")
    Traceback (most recent call last):
    ...
    cultura.names.BadName: The benchmark name 'a/b' contains '/', and a benchmark name becomes a Hugging Face dataset config name, which may not hold any of <>:/\|?* (datasets' InvalidConfigName); rename it, e.g. 'a-b', and rerun.
    """
    name = label_name(raw, what="benchmark name", param=param)
    bad = next((c for c in name if c in HUB_CONFIG_FORBIDDEN), None)
    if bad is not None:
        fixed = "".join("-" if c in HUB_CONFIG_FORBIDDEN else c for c in name).strip("-") or "benchmark"
        raise BadName(f"The benchmark name {_shown(name)} contains {bad!r}, and a benchmark name becomes a Hugging "
                      f"Face dataset config name, which may not hold any of {HUB_CONFIG_FORBIDDEN} (datasets' "
                      f"InvalidConfigName); rename it, e.g. {fixed!r}, and rerun.",
                      reason=f"benchmark name contains {bad!r}", param=param)
    if "@" in name:  # NAME@VERSION names one version wherever a benchmark is given (export, evaluate)
        raise BadName(f"The benchmark name {_shown(name)} contains '@', which separates a benchmark's name from its "
                      f"version (NAME@VERSION); rename it, e.g. {name.replace('@', '-')!r}, and rerun.",
                      reason="benchmark name contains '@'", param=param)
    return name


# ------------------------------------------------------------------------------------------ endpoint URLs

def check_endpoint_url(url: str, *, source: str, param: str | None = None) -> str:
    """``url`` (an OpenAI-compatible server's base URL from ``source``: ``OPENAI_BASE_URL``, ``llm.base_url``,
    a model option) if it parses as an http(s) URL with a host, else one sentence naming the fix (never an
    ``httpx.InvalidURL`` traceback). Credentials inside the URL are never echoed.

    >>> check_endpoint_url("http://[::1", source="OPENAI_BASE_URL")
    Traceback (most recent call last):
    ...
    cultura.errors.CulturaError: OPENAI_BASE_URL 'http://[::1' is not a valid URL (Invalid IPv6 URL); set it to the server's http(s) base URL, e.g. http://127.0.0.1:8000/v1, and rerun.
    """
    problem = endpoint_url_problem(url)
    if problem:
        shown = repr(strip_userinfo(url) if len(url) <= 200 else url[:200] + "…")
        raise CulturaError(f"{source} {shown} is not a valid URL ({problem}); set it to the server's http(s) base "
                           "URL, e.g. http://127.0.0.1:8000/v1, and rerun.", param=param)
    return url


def endpoint_url_problem(url: str) -> str | None:
    """Why ``url`` is not a usable http(s) base URL (a short phrase), or ``None``."""
    problem = None
    if any(unicodedata.category(c) in ("Cc", "Cf") or c.isspace() for c in url):
        problem = "contains spaces or control characters"
    else:
        try:
            p = urllib.parse.urlsplit(url)
            p.port  # noqa: B018 - raises ValueError for a port that is not a number in 0..65535
        except ValueError as e:
            problem = str(e)
        else:
            if p.scheme.lower() not in ("http", "https"):
                problem = "it is not http:// or https://"
            elif not p.hostname:
                problem = "it has no host"
    return problem

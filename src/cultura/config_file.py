"""Reading ``cultura.toml`` without validating it: the TOML, its read errors as one sentence, the depth limit,
the project's country list on its own, and the memo of the files the validator already accepted.

:mod:`cultura.config` validates the whole file with pydantic, whose import and model building cost more CPU than
``cultura status`` needs in all. Every command still refuses an invalid file before it starts
(:class:`cultura.project.Project` checks it on open), but a file whose exact bytes this validator accepted
before — :func:`known_valid`, a memo in the user cache keyed by the file's and the validator's sha256 — needs
no second look: the command that reads only the countries (``status``, opening the database) takes them from
here, and a setting read later validates the file then. Imports nothing of cultura but its errors and
:func:`cultura.files.user_cache`.
"""
from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

from .errors import ConfigError
from .files import user_cache

#: Deepest nesting of arrays/tables accepted in cultura.toml (the real file nests 3 levels).
MAX_DEPTH = 32

#: The keys of ``[project]`` and the type each must have for :func:`project_countries` to read them unvalidated.
PROJECT_KEYS = {"name": str, "countries": list, "preset": str}


def read_config_data(path: Path) -> dict:
    """The TOML of ``path`` as a dict, nested at most :data:`MAX_DEPTH` levels; every read problem (missing,
    not TOML, not UTF-8, too deep) is a :class:`ConfigError` saying how to fix it."""
    return config_data(read_config_bytes(path), path)


def read_config_bytes(path: Path) -> bytes:
    """The bytes of the file at ``path``; a missing file is a :class:`ConfigError` naming ``cultura init``."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"No configuration at {path}. Run 'cultura init DIR' to create a project.") from None


def config_data(raw: bytes, path: Path) -> dict:
    """The TOML in ``raw`` (the bytes of the file at ``path``, which the errors name) as a dict: one read of
    the file serves both the parse and the note that those very bytes are valid (:func:`remember_valid`)."""
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML ({e}). Fix the syntax and rerun.") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path} is not UTF-8 text ({e.reason} at byte {e.start}). Save it as UTF-8 and "
                          "rerun.") from None
    except RecursionError:  # tomllib recurses once per nested array/inline table
        raise ConfigError(f"Invalid configuration in {path}: arrays or tables are nested more than {MAX_DEPTH} "
                          "levels deep (too deep to parse); flatten them and rerun.") from None
    check_depth(data, str(path))
    return data


def project_countries(path: Path) -> list[str] | None:
    """``project.countries`` of the file at ``path`` (``[]`` when unset, as the validated default), or None when
    the ``[project]`` table is not plainly valid — an unknown key, a value of the wrong type — so that the caller
    validates the whole file, which names the problem in one sentence."""
    section = read_config_data(path).get("project", {})
    if not isinstance(section, dict) or not set(section) <= set(PROJECT_KEYS):
        return None
    if not all(isinstance(value, PROJECT_KEYS[key]) for key, value in section.items()):
        return None
    countries = section.get("countries", [])
    return list(countries) if all(isinstance(code, str) for code in countries) else None


def _memo(data: bytes) -> Path | None:
    """The memo file that says ``data`` passed this cultura's validator (None: no user cache,
    ``CULTURA_CACHE_DIR=off``). The key covers the validator's source, so a changed rule checks every file
    again."""
    base = user_cache()
    if base is None:
        return None
    rules = hashlib.sha256()
    for name in ("config.py", "config_file.py", "names.py", "redact.py"):  # the validator and its checks
        rules.update((Path(__file__).parent / name).read_bytes())
    key = hashlib.sha256(rules.digest() + hashlib.sha256(data).digest()).hexdigest()
    return base / "config-checked" / key


def known_valid(path: Path) -> bool:
    """Whether the file at ``path`` holds exactly the bytes of a file this validator accepted before."""
    try:
        memo = _memo(Path(path).read_bytes())
    except OSError:
        return False
    return memo is not None and memo.is_file()


def remember_valid(data: bytes) -> None:
    """Note that ``data`` (a file's bytes) passed the validator; a cache that cannot be written is no error."""
    memo = _memo(data)
    if memo is None:
        return
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.touch()
    except OSError:
        pass


def too_deep(data, limit: int = MAX_DEPTH) -> str | None:
    """The dotted path where ``data`` nests deeper than ``limit`` levels, else ``None`` (iterative: a hostile
    file cannot exhaust the stack here)."""
    stack = [(data, 0, "")]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > limit:
                return path or "(top)"
            items = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend((v, depth + 1, f"{path}.{k}" if path else str(k)) for k, v in items)
    return None


def check_depth(data, source: str) -> None:
    """A :class:`ConfigError` when ``data`` nests deeper than :data:`MAX_DEPTH` (see :func:`too_deep`)."""
    where = too_deep(data)
    if where is not None:
        raise ConfigError(f"Invalid configuration in {source}: '{where[:80]}' nests arrays or tables more than "
                          f"{MAX_DEPTH} levels deep; flatten it and rerun.")


__all__ = ["MAX_DEPTH", "read_config_data", "read_config_bytes", "config_data", "project_countries", "known_valid",
           "remember_valid", "too_deep", "check_depth"]

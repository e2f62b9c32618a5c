"""``cultura config get`` / ``config set``: a key of ``cultura.toml`` read, or changed in the file itself —
validated exactly like the file (:mod:`cultura.config`), the value replaced on its line, the line's inline
comment and every other line kept as written. Core: imports ``config``, ``errors`` and ``files`` only."""
from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path

import tomli_w
from pydantic import BaseModel

from .config import Config, load_config, parse_config
from .errors import ConfigError
from .files import write_atomic


def _walk_model(dotted: str):
    """The pydantic model or field annotation at ``dotted`` (``section`` or ``section.key``), else a ConfigError
    naming the valid keys (as the file's own validation does)."""
    node: type[BaseModel] | None = Config
    annotation = None
    parts = dotted.split(".") if dotted else []
    for i, part in enumerate(parts):
        if node is None:  # below a free-form table (culture_labels.KEY…)
            return None
        fields = node.model_fields
        if part not in fields:
            close = difflib.get_close_matches(part, list(fields), n=1)
            hint = f" Did you mean {'.'.join([*parts[:i], close[0]])!r}?" if close else ""
            raise ConfigError(f"unknown key '{'.'.join(parts[:i + 1])}'.{hint} Valid keys here: "
                              f"{', '.join(sorted(fields))}.")
        annotation = fields[part].annotation
        node = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return annotation


def get_config_value(cfg: Config, dotted: str | None = None):
    """The value at ``section.key`` (a dict for a section, the whole config for None), as the file would hold it
    after defaults. Unknown keys raise :class:`ConfigError` with "did you mean"."""
    data = cfg.model_dump()
    if not dotted:
        return data
    _walk_model(dotted)
    node = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(f"'{dotted}' is not set.")
        node = node[part]
    return node


def parse_value(raw: str):
    """A command-line VALUE as TOML reads it (``8``, ``true``, ``0.5``, ``["a:1", "b:2"]``, ``"text"``); anything
    that is not a TOML value is taken as a plain string (``gpt-4o``, ``127.0.0.1:8000``)."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


_HEADER = r"^\s*\[\s*{}\s*\]\s*(#.*)?$"


def _edit_text(text: str, parts: list[str], value) -> str:
    """``text`` with ``parts[-1] = value`` set inside table ``parts[:-1]``, other lines (comments included)
    untouched: the key's line replaced, or a line added at the end of its table, or a new table appended."""
    key, table = parts[-1], ".".join(parts[:-1])
    line_text = tomli_w.dumps({key: value}).strip()
    lines = text.splitlines()
    header = re.compile(_HEADER.format(re.escape(table))) if table else None
    start = 0
    if header is not None:
        start = next((i + 1 for i, ln in enumerate(lines) if header.match(ln)), None)
        if start is None:
            return text.rstrip("\n") + ("\n\n" if text.strip() else "") + f"[{table}]\n{line_text}\n"
    end = next((i for i in range(start, len(lines)) if re.match(r"^\s*\[", lines[i])), len(lines))
    keyre = re.compile(rf"^\s*(\"{re.escape(key)}\"|{re.escape(key)})\s*=")
    for i in range(start, end):
        if keyre.match(lines[i]):
            j = i  # the value may span lines (a multi-line array): find where it ends
            while j < end:
                try:
                    tomllib.loads("\n".join(lines[i:j + 1]))
                    break
                except tomllib.TOMLDecodeError:
                    j += 1
            lines[i:j + 1] = [line_text + _inline_comment(lines[i:j + 1])]
            return "\n".join(lines) + "\n"
    last = max((i for i in range(start, end) if lines[i].strip()), default=start - 1)
    lines.insert(last + 1, line_text)
    return "\n".join(lines) + "\n"


def _inline_comment(value_lines: list[str]) -> str:
    """The comment that ends a key's (last) value line (``workers = 32  # per host``: ``"  # per host"``), kept
    when the value is replaced; ``""`` when there is none. A ``#`` inside a string is not a comment: the cut is
    the first one after which the line still reads as the same value."""
    *head, last = value_lines
    try:
        whole = tomllib.loads("\n".join(value_lines))
    except tomllib.TOMLDecodeError:
        return ""
    for pos in (i for i, ch in enumerate(last) if ch == "#"):
        try:
            if tomllib.loads("\n".join([*head, last[:pos]])) == whole:
                return "  " + last[pos:].strip()
        except tomllib.TOMLDecodeError:
            continue
    return ""


def set_config_file_value(path: Path, dotted: str, raw: str, *, add: bool = False) -> dict:
    """Set ``section.key`` in the ``cultura.toml`` at ``path`` from a command-line VALUE (:func:`parse_value`),
    validated exactly like the file (the same error for a mistyped key or a bad value, and nothing written);
    ``add``: append VALUE to a list key instead. The file's other lines and comments are kept (when an edit in
    place cannot be read back identically — a multi-line value — the file is rewritten from the data). Returns
    ``{"key", "old", "value"}``."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    cfg = load_config(path)
    parts = [p for p in dotted.split(".") if p]
    if len(parts) < 2:
        raise ConfigError(f"'{dotted}' is a section, not a key; give SECTION.KEY (e.g. download.allow_hosts).")
    annotation = _walk_model(dotted)
    old = get_config_value(cfg, ".".join(parts[:-1])).get(parts[-1])
    value = parse_value(raw)
    if add:
        if not isinstance(old, list):
            raise ConfigError(f"'{dotted}' is not a list, so --add does not apply; set it with 'cultura config set "
                              f"{dotted} VALUE'.")
        value = [*old, *(value if isinstance(value, list) else [value])]
    elif isinstance(value, str) and getattr(annotation, "__origin__", None) is list:
        value = [value]  # one item for a list key: 'config set download.allow_hosts 127.0.0.1:8000'
    data = tomllib.loads(text)
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value
    try:
        new_cfg = parse_config(data, "cultura.toml")
    except ConfigError as e:
        raise ConfigError(str(e).replace("Fix the file and rerun.", f"Nothing was written; give a valid value for "
                                         f"{dotted}.")) from None
    new_text = _edit_text(text, parts, value)
    try:
        same = tomllib.loads(new_text) == data
    except tomllib.TOMLDecodeError:
        same = False
    if not same:
        new_text = tomli_w.dumps(data)
    write_atomic(path, new_text)
    return {"key": dotted, "old": old, "value": get_config_value(new_cfg, dotted)}

"""Culture labels (seed 004, CAIRe desideratum 1): any free-text label a user rates images against — a country,
a religion ("Shinto"), an ethnic group ("Yoruba"), a state ("Kerala") — beside the country registry.

A label has a key (what tables store in their ``country`` column: an ISO country code, or the label's own
text), a display name (what the judge and the annotators read), and optionally a country, a language and a
description. Labels come from three places, in this order:

1. a country code of the registry (``JP`` → "Japan", country JP, language ja);
2. a registered label: the ``culture_labels`` table (``cultura culture add``) or ``[culture_labels.KEY]`` in
   cultura.toml (``name``, ``country``, ``language``, ``description``); matched case-insensitively on key
   or display name;
3. otherwise any other free text is a label of its own (display name = the text) when ``free_text`` is
   allowed; :func:`ensure_labels` then registers it so annotation and evaluation see the same key.

Two-letter upper-case text that is not a registry code is rejected (``XX`` is a typo for a code, not a
culture).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .db import now, transaction
from .errors import CulturaError, UnknownName

if TYPE_CHECKING:
    from .project import Project

TABLE = "culture_labels"


@dataclass(frozen=True)
class CultureLabel:
    key: str                      # stored in the tables' country/culture column
    name: str                     # display name given to the judge and to annotators
    country: str | None = None    # ISO code when the label belongs to one country
    language: str | None = None
    description: str = ""
    kind: str = "label"           # country | label

    @property
    def prompt_name(self) -> str:
        """The name with its description, for prompts ("Shinto (a Japanese religion)")."""
        return f"{self.name} ({self.description})" if self.description else self.name


def _config_labels(project: Project) -> dict[str, dict]:
    cfg = getattr(project.config, "culture_labels", None) or {}
    return {str(k): dict(v or {}) for k, v in cfg.items()}


def registered_labels(project: Project) -> list[CultureLabel]:
    """The non-country culture labels of the project (config first, then the table), by key."""
    out: dict[str, CultureLabel] = {}
    db = project.db
    if TABLE in db.table_names():
        for r in db.query(f"SELECT * FROM {TABLE} ORDER BY label"):
            out[r["label"]] = CultureLabel(r["label"], r["name"] or r["label"], r["country"], r["language"],
                                           r["description"] or "")
    for k, d in _config_labels(project).items():
        out[k] = CultureLabel(k, d.get("name") or k, (d.get("country") or "").upper() or None,
                              d.get("language") or None, d.get("description") or "")
    return [out[k] for k in sorted(out)]


def resolve_culture(project: Project, label: str, *, free_text: bool = True) -> CultureLabel:
    """The :class:`CultureLabel` for a country code, a registered label (key or name, any case) or — when
    ``free_text`` — any other text."""
    text = str(label or "").strip()
    if not text:
        raise CulturaError("A culture label cannot be empty.")
    reg = project.registry
    if text.upper() in reg.countries and len(text) <= 3:
        c = reg.country(text)
        return CultureLabel(c.code, c.name, c.code, c.language, kind="country")
    fold = text.casefold()
    for lab in registered_labels(project):
        if fold in (lab.key.casefold(), lab.name.casefold()):
            return lab
    if re.fullmatch(r"[A-Z]{2}", text):
        reg.country(text)  # raises "Unknown country code 'XX'. Did you mean …"
    if not free_text:
        raise UnknownName(f"Unknown culture label {text!r}. Register it with 'cultura culture add {text}' (or "
                          f"[culture_labels.\"{text}\"] in cultura.toml), or use a country code.")
    return CultureLabel(text, text)


def resolve_cultures(project: Project, labels, *, free_text: bool = True) -> list[CultureLabel]:
    """Resolve a list (or comma-separated string) of labels, without duplicates, in order."""
    if isinstance(labels, str):
        labels = [x for x in labels.split(",") if x.strip()]
    out, seen = [], set()
    for lab in labels:
        c = resolve_culture(project, lab, free_text=free_text)
        if c.key not in seen:
            seen.add(c.key)
            out.append(c)
    return out


def add_culture_label(project: Project, label: str, *, name: str | None = None, country: str | None = None,
                      language: str | None = None, description: str | None = None, source: str = "manual") -> dict:
    """Register (or update) a culture label in the ``culture_labels`` table; returns its row."""
    key = str(label or "").strip()
    if not key:
        raise CulturaError("A culture label cannot be empty.")
    if key.upper() in project.registry.countries and len(key) <= 3:
        raise CulturaError(f"{key!r} is a country code; countries are culture labels already.")
    if country:
        country = project.registry.country(country).code
    if language is not None and not re.fullmatch(r"[a-z]{2,3}(-[A-Za-z0-9]+)?", language):
        raise CulturaError(f"language must be an ISO 639 code such as 'ja', got {language!r}.")
    row = {"label": key, "name": (name or key).strip(), "country": country or None, "language": language or None,
           "description": (description or "").strip() or None, "source": source, "created_at": now()}
    with transaction(project.db):
        project.db[TABLE].upsert(row, pk="label")
    return row


def ensure_labels(project: Project, labels: list[CultureLabel]) -> None:
    """Register the free-text labels among ``labels`` (so annotation and evaluation share their keys)."""
    known = {lab.key for lab in registered_labels(project)}
    for lab in labels:
        if lab.kind != "country" and lab.key not in known:
            add_culture_label(project, lab.key, name=lab.name, country=lab.country, language=lab.language,
                              description=lab.description, source="free-text")

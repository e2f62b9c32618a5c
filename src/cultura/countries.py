"""The built-in country registry (``data/countries.toml``): countries → languages, native names, region,
Western flag, script, resource tier, DuckDuckGo region; and the seeds' country presets.

The registry is data, not code: grouping (Western / non-Western, region, income, tier) is read from it or
from a user file, never hard-coded in a metric.
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .errors import unknown


@dataclass(frozen=True)
class Language:
    code: str
    name: str
    native_name: str = ""
    script: str = ""
    cc_share: float | None = None
    resource_tier: str = ""


@dataclass(frozen=True)
class Country:
    code: str
    name: str
    native_name: str
    languages: tuple[str, ...]
    region: str = ""
    western: bool = False
    ddg_region: str = "wt-wt"
    income: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def language(self) -> str:
        """The primary language (ISO 639-1)."""
        return self.languages[0]

    def attribute(self, name: str):
        """Any attribute by name (for grouping): western, region, income, language, script, resource_tier."""
        if hasattr(self, name):
            return getattr(self, name)
        if name in self.extra:
            return self.extra[name]
        lang = registry().languages.get(self.language)
        if lang is not None and hasattr(lang, name):
            return getattr(lang, name)
        raise unknown("country attribute", name, ["western", "region", "income", "language", "script",
                                                  "resource_tier", *self.extra])


@dataclass(frozen=True)
class Registry:
    countries: dict[str, Country]
    languages: dict[str, Language]
    presets: dict[str, dict]

    def country(self, code: str) -> Country:
        code_u = code.strip().upper()
        if code_u not in self.countries:
            raise unknown("country code", code, self.countries,
                          hint="Use ISO 3166-1 alpha-2 codes. A country missing here is added to the registry "
                               f"file {registry_file()} as a [countries.{code_u[:2] or 'XX'}] table (name, "
                               "native_name, languages, region, western, ddg_region), like the others there.")
        return self.countries[code_u]

    def resolve(self, codes) -> list[Country]:
        """Countries for a list or comma-separated string of codes; every unknown code is one error."""
        if isinstance(codes, str):
            codes = [c for c in codes.split(",") if c.strip()]
        out, bad = [], []
        for c in codes:
            try:
                out.append(self.country(c))
            except KeyError:
                bad.append(c)
        if bad:
            if len(bad) == 1:
                self.country(bad[0])  # raises the single-code message
            raise unknown("country codes", ", ".join(bad), self.countries,
                          hint="Use ISO 3166-1 alpha-2 codes.")
        seen, uniq = set(), []
        for c in out:
            if c.code not in seen:
                seen.add(c.code)
                uniq.append(c)
        return uniq

    def preset(self, name: str) -> list[Country]:
        if name not in self.presets:
            raise unknown("preset", name, self.presets)
        return self.resolve(self.presets[name]["countries"])


def _build(data: dict) -> Registry:
    languages = {}
    for code, d in data.get("languages", {}).items():
        languages[code] = Language(code=code, name=d["name"], native_name=d.get("native_name", ""),
                                   script=d.get("script", ""), cc_share=d.get("cc_share"),
                                   resource_tier=d.get("resource_tier", ""))
    countries = {}
    known = {"name", "native_name", "languages", "region", "western", "ddg_region", "income"}
    for code, d in data.get("countries", {}).items():
        countries[code] = Country(
            code=code, name=d["name"], native_name=d.get("native_name", d["name"]),
            languages=tuple(d["languages"]), region=d.get("region", ""), western=bool(d.get("western", False)),
            ddg_region=d.get("ddg_region", "wt-wt"), income=d.get("income", ""),
            extra={k: v for k, v in d.items() if k not in known})
    return Registry(countries=countries, languages=languages, presets=data.get("presets", {}))


def registry_file() -> Path:
    """The built-in registry's file (``cultura/data/countries.toml``)."""
    return Path(str(resources.files("cultura.data").joinpath("countries.toml")))


@functools.lru_cache(maxsize=None)
def registry(path: str | None = None) -> Registry:
    """The built-in registry, or one read from ``path`` (same TOML layout), merged over the built-in."""
    base = tomllib.loads(resources.files("cultura.data").joinpath("countries.toml").read_text("utf-8"))
    if path:
        user = tomllib.loads(Path(path).read_text("utf-8"))
        for section in ("languages", "countries", "presets"):
            for k, v in user.get(section, {}).items():
                base.setdefault(section, {})[k] = {**base.get(section, {}).get(k, {}), **v}
    return _build(base)

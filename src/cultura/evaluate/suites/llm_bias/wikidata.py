"""Collect candidate entities from Wikidata by class (seed 001 §3.1, App. A Table 4; classes are data in
``data/wikidata_classes.toml``).

One SPARQL query per entity type and country, with the item's label in the language and in English. How an
item matches its type is part of the data (``match``):

- ``instance`` (food, beverage, location, sports clubs): an instance of (a subclass of) the type's classes
  (``wdt:P31/wdt:P279*``), tied to the country by the type's ``country`` properties (``P495`` country of
  origin, ``P17`` country);
- ``occupation`` (authors): a human (``wdt:P31 wd:Q5``) whose occupation (``wdt:P106``) is one of the classes
  (writer ``Q36180``, novelist ``Q6625963``), tied to the country by citizenship (``P27``) — writers are
  people, not instances of "writer";
- ``name`` (given names): no country; the name's language (``P407``) is the label language.

Countries are matched by ISO code (``P297``), so no QID table is needed. Collected rows are ``candidate``
entities (``source = wikidata:<QID>``) for annotation.

Western entities (§3.1 "Parallelizing Western Entities") come from :func:`collect_western_wikidata`: every
Western country (``[western].countries``) in one query per type, labels in all the study's languages at once,
and for authors, locations and sports clubs only the entities written in at least ``min_languages`` (6) of
them. Each entity is stored once per language it has a label in, with the same QID, so the Western sets are
parallel across languages.

The endpoint is the public ``https://query.wikidata.org/sparql`` or any SPARQL server answering
``application/sparql-results+json`` (tests run the queries on a recorded graph and serve a recorded answer).
"""
from __future__ import annotations

import tomllib
from importlib import resources
from typing import TYPE_CHECKING

import httpx

from ....bounds import Bound
from ....errors import CulturaError, unknown
from ....curate.entities import add_entities, normalise_entity

if TYPE_CHECKING:
    from ....project import Project

DEFAULT_ENDPOINT = "https://query.wikidata.org/sparql"
USER_AGENT = "cultura/0.1 (https://github.com/; cultural-bias benchmark builder)"
NAME_TYPES = ("names_female", "names_male")


def _classes_file() -> dict:
    return tomllib.loads(resources.files("cultura.data").joinpath("wikidata_classes.toml").read_text("utf-8"))


def wikidata_classes() -> dict:
    """The entity types of ``data/wikidata_classes.toml``."""
    return _classes_file()["types"]


def western_settings() -> dict:
    """``[western]`` of ``data/wikidata_classes.toml``: countries, languages, min_languages(_types)."""
    return _classes_file()["western"]


def _type_spec(type_: str) -> dict:
    types = wikidata_classes()
    if type_ not in types:
        raise unknown("entity type", type_, types)
    return types[type_]


def _match(spec: dict) -> str:
    values = " ".join(f"wd:{q}" for q in spec["qids"])
    if spec.get("match") == "occupation":
        return f"VALUES ?class {{ {values} }}\n  ?item wdt:P31 wd:Q5 ; wdt:P106 ?class ."
    return f"VALUES ?class {{ {values} }}\n  ?item wdt:P31/wdt:P279* ?class ."


def _country_path(spec: dict) -> str:
    props = spec.get("country") or ["P17", "P27", "P495"]
    path = "|".join(f"wdt:{p}" for p in props)
    return f"({path})" if len(props) > 1 else path


def _lit(value: str) -> str:
    if not str(value).replace("-", "").isalnum():
        raise CulturaError(f"{value!r} is not a language or country code.")
    return f'"{value}"'


def build_query(type_: str, country: str, language: str, *, limit: int = 500) -> str:
    """The SPARQL query for one entity type, country (ISO 3166-1) and label language (ISO 639-1)."""
    spec = _type_spec(type_)
    if spec.get("match") == "name":
        scope = f"?item wdt:P407 ?lang . ?lang wdt:P218 {_lit(language)} ."
    else:
        scope = f"?item {_country_path(spec)} ?country . ?country wdt:P297 {_lit(country.upper())} ."
    return f"""SELECT DISTINCT ?item ?native ?english WHERE {{
  {_match(spec)}
  {scope}
  ?item rdfs:label ?native . FILTER(LANG(?native) = {_lit(language)})
  OPTIONAL {{ ?item rdfs:label ?english . FILTER(LANG(?english) = "en") }}
}} LIMIT {int(limit)}"""


def build_western_query(type_: str, *, countries=None, languages=None, min_languages: int | None = None,
                        limit: int = 5000) -> str:
    """One query for the Western entities of a type across all Western countries: one result row per item
    and label language (``?item ?lang ?native ?english ?code``), keeping items labelled in at least
    ``min_languages`` of ``languages`` (default: ``[western]`` of the classes file, 6 of the 9 Camellia
    languages for authors / locations / sports clubs, 1 for the other types)."""
    spec = _type_spec(type_)
    if spec.get("match") == "name":
        raise CulturaError(f"{type_} has no country in Wikidata; collect Western names from a corpus "
                           "(cultura entities extract) or import them.")
    w = western_settings()
    countries = [c.upper() for c in (countries or w["countries"])]
    languages = list(languages or w["languages"])
    if min_languages is None:
        min_languages = int(w["min_languages"]) if type_ in w.get("min_languages_types", []) else 1
    langs = ", ".join(_lit(x) for x in languages)
    codes = " ".join(_lit(c) for c in countries)
    return f"""SELECT ?item ?lang ?native ?english ?code WHERE {{
  {{ SELECT ?item (SAMPLE(?cc) AS ?code) WHERE {{
      {_match(spec)}
      VALUES ?cc {{ {codes} }}
      ?item {_country_path(spec)} ?country . ?country wdt:P297 ?cc .
      ?item rdfs:label ?l . BIND(LANG(?l) AS ?ll) FILTER(?ll IN ({langs}))
    }} GROUP BY ?item HAVING (COUNT(DISTINCT ?ll) >= {int(min_languages)}) LIMIT {int(limit)} }}
  ?item rdfs:label ?native . BIND(LANG(?native) AS ?lang) FILTER(?lang IN ({langs}))
  OPTIONAL {{ ?item rdfs:label ?english . FILTER(LANG(?english) = "en") }}
}}"""


def run_query(query: str, *, endpoint: str = DEFAULT_ENDPOINT, timeout: float = 60.0) -> list[dict]:
    """Bindings of a SPARQL SELECT as ``[{var: value}]``."""

    try:
        resp = httpx.get(endpoint, params={"query": query, "format": "json"}, timeout=timeout,
                         headers={"Accept": "application/sparql-results+json", "User-Agent": USER_AGENT})
        resp.raise_for_status()
        data = resp.json()
    except httpx.HTTPError as e:
        raise CulturaError(f"The SPARQL endpoint {endpoint} failed ({type(e).__name__}: {e}); check the endpoint "
                           "and your network, or import entities from a file instead.") from None
    except ValueError:
        raise CulturaError(f"The SPARQL endpoint {endpoint} did not answer JSON; is it a SPARQL endpoint?") from None
    return [{k: v.get("value") for k, v in b.items()} for b in data.get("results", {}).get("bindings", [])]


#: Entities asked of Wikidata per type (the query's LIMIT).
LIMIT = Bound(1, 1_000_000)
#: Languages a Western entity must be written in to be kept.
MIN_LANGUAGES = Bound(1, 1000)


def collect_wikidata(project: Project, country: str, *, language: str | None = None, types=None, side: str = "local",
                     limit: int = 500, endpoint: str = DEFAULT_ENDPOINT) -> dict:
    """Query every type and store the results as candidate entities; returns per-type counts."""
    limit = LIMIT.check(limit, "limit")
    c = project.registry.country(country)
    lang = language or c.language
    out: dict = {}
    for t in types or list(wikidata_classes()):
        rows = []
        for b in run_query(build_query(t, c.code, lang, limit=limit), endpoint=endpoint):
            qid = (b.get("item") or "").rsplit("/", 1)[-1]
            if not b.get("native"):
                continue
            rows.append(normalise_entity({"language": lang, "type": t, "side": side, "native": b["native"],
                                          "english": b.get("english"), "country": c.code, "qid": qid,
                                          "status": "candidate", "source": f"wikidata:{qid}"}))
        out[t] = add_entities(project, rows, source="wikidata")["inserted"] if rows else 0
    return {"country": c.code, "language": lang, **out}


def collect_western_wikidata(project: Project, *, types=None, languages=None, countries=None,
                             min_languages: int | None = None, limit: int = 5000,
                             endpoint: str = DEFAULT_ENDPOINT) -> dict:
    """Western entities of every Western country in one pass per type (:func:`build_western_query`), stored
    as candidate ``western`` entities once per language they are written in (same QID across languages: the
    parallel Western set). Returns per-type ``{"entities": distinct items, "inserted": rows}``."""
    limit, min_languages = LIMIT.check(limit, "limit"), MIN_LANGUAGES.check_optional(min_languages, "min_languages")
    out: dict = {}
    for t in types or [t for t, spec in wikidata_classes().items() if spec.get("match") != "name"]:
        q = build_western_query(t, countries=countries, languages=languages, min_languages=min_languages,
                                limit=limit)
        rows, items = [], set()
        for b in run_query(q, endpoint=endpoint):
            qid = (b.get("item") or "").rsplit("/", 1)[-1]
            if not b.get("native") or not b.get("lang"):
                continue
            items.add(qid)
            rows.append(normalise_entity({"language": b["lang"], "type": t, "side": "western",
                                          "native": b["native"], "english": b.get("english"),
                                          "country": b.get("code"), "qid": qid, "status": "candidate",
                                          "source": f"wikidata:{qid}"}))
        out[t] = {"entities": len(items), "inserted": add_entities(project, rows, source="wikidata")["inserted"]
                  if rows else 0}
    return out

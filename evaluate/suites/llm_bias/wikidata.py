"""Collect candidate entities from Wikidata by class (seed 001 §3.1, App. A Table 4; classes are data in
``data/wikidata_classes.toml``).

One SPARQL query per entity type: items that are instances of (a subclass of) the type's classes and belong
to the country (``P17`` country, ``P27`` citizenship, ``P495`` country of origin; the country is matched by its
ISO code ``P297``, so no QID table is needed), with their label in the language and in English. Given-name
types have no country: they are matched by ``P407`` (language of work or name) = the language (by ISO code
``P218``). Collected rows are ``candidate`` entities (``source = wikidata:<QID>``) for annotation.

The endpoint is the public ``https://query.wikidata.org/sparql`` or any SPARQL server answering
``application/sparql-results+json`` (tests use a local one).
"""
from __future__ import annotations

import tomllib
from importlib import resources

from ....errors import CulturaError, unknown
from .entities import add_entities, normalise_entity

DEFAULT_ENDPOINT = "https://query.wikidata.org/sparql"
USER_AGENT = "cultura/0.1 (https://github.com/; cultural-bias benchmark builder)"
NAME_TYPES = ("names_female", "names_male")


def wikidata_classes() -> dict:
    """The entity types of ``data/wikidata_classes.toml``."""
    return tomllib.loads(resources.files("cultura.data").joinpath("wikidata_classes.toml")
                         .read_text("utf-8"))["types"]


def build_query(type_: str, country: str, language: str, *, limit: int = 500) -> str:
    """The SPARQL query for one entity type, country (ISO 3166-1) and label language (ISO 639-1)."""
    types = wikidata_classes()
    if type_ not in types:
        raise unknown("entity type", type_, types)
    values = " ".join(f"wd:{q}" for q in types[type_]["qids"])
    if type_ in NAME_TYPES:
        scope = f'?item wdt:P407 ?lang . ?lang wdt:P218 "{language}" .'
    else:
        scope = f'?item (wdt:P17|wdt:P27|wdt:P495) ?country . ?country wdt:P297 "{country.upper()}" .'
    return f"""SELECT DISTINCT ?item ?native ?english WHERE {{
  VALUES ?class {{ {values} }}
  ?item wdt:P31/wdt:P279* ?class .
  {scope}
  ?item rdfs:label ?native . FILTER(LANG(?native) = "{language}")
  OPTIONAL {{ ?item rdfs:label ?english . FILTER(LANG(?english) = "en") }}
}} LIMIT {int(limit)}"""


def run_query(query: str, *, endpoint: str = DEFAULT_ENDPOINT, timeout: float = 60.0) -> list[dict]:
    """Bindings of a SPARQL SELECT as ``[{var: value}]``."""
    import httpx

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


def collect_wikidata(project, country: str, *, language: str | None = None, types=None, side: str = "local",
                     limit: int = 500, endpoint: str = DEFAULT_ENDPOINT) -> dict:
    """Query every type and store the results as candidate entities; returns per-type counts."""
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

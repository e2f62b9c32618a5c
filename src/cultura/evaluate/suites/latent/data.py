"""What the latent suite reads: a concept's images, each with one country and that country's group.

Images come from the ``image_links`` view (the project's searched images and imported sets such as GlobalRG
alike) or, with ``benchmark``, from one benchmark's candidates. Kept: active concepts, ``images.status = 'ok'``,
in the reviewed pool (:mod:`cultura.annotate.pool`: not excluded, no open culture conflict, not a duplicate reviewers
dropped, not removed by the filter review). An image found for several countries of one concept is left
out of that concept (its culture is ambiguous) and counted, never silently dropped.

The grouping (Western / non-Western, or any other split) is data: a country attribute of the registry
(``Country.attribute(name)``: western, region, income, resource_tier, …) or a user file (CSV ``country,group``
or TOML ``[groups] US = "western"``), never code.
"""
from __future__ import annotations

import csv
import hashlib
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ....annotate.pool import EXCLUSION_REASONS as POOL_REASONS
from ....annotate.pool import image_exclusions
from ....benchmark.store import images as bench_images
from ....curate.concepts import common_term, concept_names
from ....curate.images import active_ok_links
from ....errors import CulturaError
from ...data import resolve_benchmark
from ..registry import SuiteSkipped

if TYPE_CHECKING:
    from ....project import Project

_TRUE = {"true", "yes", "1", "y"}
_FALSE = {"false", "no", "0", "n"}


@dataclass
class Grouping:
    """Country → group value, and the value that forms G (the in-group)."""

    name: str
    values: dict[str, object]
    in_group: object

    def is_in(self, country: str) -> bool | None:
        v = self.values.get(country)
        return None if v is None else v == self.in_group

    @property
    def label(self) -> str:
        if isinstance(self.in_group, bool):
            return self.name if self.in_group else f"not {self.name}"
        return f"{self.name}={self.in_group}"


def _coerce(v):
    if isinstance(v, bool) or v is None:
        return v
    s = str(v).strip()
    if s.lower() in _TRUE:
        return True
    if s.lower() in _FALSE:
        return False
    return s or None


def read_groups_file(path) -> dict[str, object]:
    """country code → group value from a CSV (columns ``country,group``) or TOML (``[groups]`` table or a flat
    table of codes)."""
    p = Path(path)
    if not p.is_file():
        raise CulturaError(f"Groups file {p} does not exist. Give a CSV with columns country,group or a TOML "
                           "file with a [groups] table.")
    if p.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(p.read_text("utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise CulturaError(f"{p} is not valid TOML ({e}).") from None
        data = data.get("groups", data)
        return {str(k).upper(): _coerce(v) for k, v in data.items() if not isinstance(v, dict)}
    with open(p, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    if not rows or not {"country", "group"} <= {c.lower() for c in rows[0]}:
        raise CulturaError(f"{p} needs the columns country,group (one row per country code).")
    low = {c.lower(): c for c in rows[0]}
    return {r[low["country"]].strip().upper(): _coerce(r[low["group"]]) for r in rows if r[low["country"]].strip()}


def make_grouping(project: Project, countries, *, attribute: str = "western", in_group=None,
                  groups_file: str | None = None) -> Grouping:
    """The grouping of ``countries`` from ``groups_file`` or the registry attribute ``attribute``.

    ``in_group`` defaults to True for a yes/no attribute; for any other attribute name the value (e.g.
    ``in_group="Europe"`` with ``attribute="region"``)."""
    if groups_file:
        values = read_groups_file(groups_file)
        name = Path(groups_file).stem if attribute == "western" else attribute
    else:
        values = {}
        for cc in countries:
            try:
                values[cc] = _coerce(project.registry.country(cc).attribute(attribute))
            except KeyError:
                values[cc] = None
        name = attribute
    present = {v for cc, v in values.items() if cc in set(countries) and v is not None}
    if in_group is None:
        if present <= {True, False}:
            in_group = True
        else:
            raise CulturaError(f"Grouping {name!r} has the values {', '.join(sorted(map(str, present)))}; say "
                               "which one is the in-group G with the option in_group=VALUE.")
    else:
        in_group = _coerce(in_group)
    if in_group not in present:
        raise CulturaError(f"No country of this data has {name} = {in_group!r} (values present: "
                           f"{', '.join(sorted(map(str, present))) or 'none'}).")
    return Grouping(name=name, values=values, in_group=in_group)


@dataclass
class ConceptSet:
    """The images of one concept: sha256, country and in-group flag per image (parallel, fixed order)."""

    concept_id: int
    concept: str
    sha256: list[str]
    countries: list[str]
    in_group: np.ndarray
    excluded: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.sha256)


def load_concept_sets(project: Project, *, benchmark: str | None = None, grouping_attribute: str = "western",
                      in_group=None, groups_file: str | None = None, concepts=None,
                      query_kinds=None) -> tuple[list[ConceptSet], Grouping, dict]:
    """Concept sets, the grouping and the provenance (a content hash over concept, country and image)."""
    db = project.db
    if benchmark:

        bench = resolve_benchmark(project, benchmark)
        concept_name = concept_names(db)
        raw = [(sha, cid, concept_name[cid], cc, "benchmark") for sha, cid, cc in bench_images(db, bench.id)
               if cid in concept_name]
        prov = bench.provenance()
    else:
        raw = active_ok_links(db)
        prov = None
    removed = image_exclusions(db)  # the reviewed pool (cultura.annotate.pool): one definition with build
    wanted = set(concepts) if concepts else None
    kinds = set(query_kinds) if query_kinds else None
    links: dict[tuple[int, str], set[str]] = defaultdict(set)
    names: dict[int, str] = {}
    excluded = {**{r: 0 for r in POOL_REASONS if r != "unreviewed"}, "multi_country": 0, "no_group": 0}
    for sha, cid, name, cc, kind in raw:
        if (wanted and name not in wanted) or (kinds and kind not in kinds and kind != "benchmark"):
            continue
        if sha in removed:
            excluded[removed[sha]] += 1
            continue
        names[cid] = name
        links[(cid, sha)].add(cc)
    if not links:
        raise SuiteSkipped("No images linked to concepts and countries in this project (searched, downloaded or "
                           "imported with 'cultura import globalrg'), so the latent probes have nothing to read.")
    countries = sorted({cc for ccs in links.values() for cc in ccs})
    grouping = make_grouping(project, countries, attribute=grouping_attribute, in_group=in_group,
                             groups_file=groups_file)
    per: dict[int, list[tuple[str, str]]] = defaultdict(list)
    per_excl: dict[int, dict] = defaultdict(lambda: {"multi_country": 0, "no_group": 0})
    for (cid, sha), ccs in sorted(links.items(), key=lambda kv: (names[kv[0][0]], kv[0][1])):
        if len(ccs) > 1:
            excluded["multi_country"] += 1
            per_excl[cid]["multi_country"] += 1
            continue
        cc = next(iter(ccs))
        if grouping.is_in(cc) is None:
            excluded["no_group"] += 1
            per_excl[cid]["no_group"] += 1
            continue
        per[cid].append((sha, cc))
    sets = []
    h = hashlib.sha256()
    for cid in sorted(per, key=lambda c: names[c]):
        items = per[cid]
        for sha, cc in items:
            h.update(f"{names[cid]}\t{cc}\t{sha}\n".encode())
        sets.append(ConceptSet(cid, names[cid], [s for s, _ in items], [c for _, c in items],
                               np.array([bool(grouping.is_in(c)) for _, c in items]), dict(per_excl[cid])))
    if prov is None:
        prov = {"benchmark": "images" + (f":{','.join(sorted(wanted))}" if wanted else ""),
                "benchmark_version": None, "benchmark_hash": h.hexdigest()}
    return sets, grouping, {"provenance": prov, "excluded": excluded}


def term_for(project: Project, concept_id: int, language: str) -> str | None:
    """The concept's native term in ``language`` (the most common one across countries), or None."""
    return common_term(project.db, concept_id, language)

"""Reading what the suites evaluate: benchmarks, their trials and query texts, caption pools.

Everything is keyed by stable ids (benchmark item ids, image sha256, concept ids), never by list positions.
A trial is one benchmark item with one image per candidate role; a trial whose query text is missing or
invalid is left out and counted (``excluded`` in the suite's details), never silently dropped.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..benchmark import store
from ..curate.benchmark_queries import live_queries
from ..curate.concepts import concept_names
from ..curate.images import has_captions, iter_captions
from ..errors import CulturaError, SuiteSkipped

if TYPE_CHECKING:
    from ..project import Project

ASSOCIATION_ROLES = ("cr", "lb", "ti")
DESCRIPTOR_ROLES = ("cr", "orlb", "or", "cdr", "lb", "ti")


@dataclass(frozen=True)
class Benchmark:
    """A ready benchmark: the provenance every result row carries."""

    id: int
    name: str
    version: int
    kind: str
    content_hash: str | None
    n_items: int | None = None

    @property
    def ref(self) -> str:
        """``NAME@VERSION``, the form the runner passes to suites."""
        return f"{self.name}@{self.version}"

    def provenance(self) -> dict:
        return {"benchmark": self.name, "benchmark_version": self.version, "benchmark_hash": self.content_hash}


def resolve_benchmark(project: Project, spec: str | None, kind: str | None = None) -> Benchmark:
    """The benchmark named ``spec`` (``NAME`` = latest ready version, or ``NAME@VERSION``); with ``spec`` None,
    the latest ready benchmark of ``kind``. Raises :class:`SuiteSkipped` when there is none of that kind."""
    db = project.db
    if spec:
        name, _, version = str(spec).partition("@")
        if version and not version.isdigit():
            raise CulturaError(f"Benchmark version in {spec!r} must be an integer, e.g. '{name}@2'.")
        r = store.latest_ready(db, name=name, version=int(version) if version else None)
    else:
        r = store.latest_ready(db, kind=kind or None)
    if r is None:
        if spec:
            names = store.ready_names(db)
            raise CulturaError(f"No ready benchmark {spec!r}. Ready benchmarks: {', '.join(names) or 'none'}; "
                               "build one with 'cultura build association' or 'cultura build descriptor'.")
        raise SuiteSkipped(f"No ready {kind} benchmark in this project. Build one with 'cultura build {kind}' "
                           "(or pass --benchmark NAME).")
    if kind and spec and r["kind"] != kind:
        raise CulturaError(f"Benchmark {spec!r} is a {r['kind']} benchmark, not {kind}. Give a {kind} benchmark, "
                           f"or run the suite that reads {r['kind']} benchmarks.", param="benchmark")
    return Benchmark(id=r["id"], name=r["name"], version=r["version"], kind=r["kind"],
                     content_hash=r["content_hash"], n_items=r["n_items"])


@dataclass
class Trials:
    """The trials of one benchmark for one query variant.

    ``sha256`` is a (trials × roles) array of image hashes, ``countries`` the same shape with each image's
    culture; ``texts`` the query text per trial; the remaining arrays are per trial.
    """

    roles: tuple[str, ...]
    item_ids: np.ndarray
    item_keys: np.ndarray         # the export's item_key: what a sample joins the published dataset on
    concepts: np.ndarray          # concept names
    concept_ids: np.ndarray
    query_country: np.ndarray
    query_language: np.ndarray
    descriptor_country: np.ndarray
    texts: list[str]
    sha256: np.ndarray
    countries: np.ndarray
    positions: np.ndarray         # (trials × roles) each candidate's position as shown (the export's)
    excluded: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.texts)

    def column(self, role: str) -> int:
        return self.roles.index(role)


def _queries(project: Project, bench: Benchmark) -> dict[tuple, str]:
    """(concept_id, country, language, variant) → text: the benchmark's frozen snapshot when it has one,
    else the live ``benchmark_queries`` rows with status ok."""
    rows = store.snapshot(project.db, bench.id) or live_queries(project.db)
    return {(r["concept_id"], r["country"], r["language"], r["variant"]): r["text"] for r in rows}


def query_variants(project: Project, bench: Benchmark, *, descriptor: bool) -> list[str]:
    """The query variants present for a benchmark: ``short``/``task``/``casual`` for association; for
    descriptor benchmarks the descriptor-free prefixes (``mention`` for the short form, ``task_mention``…)."""
    found = {k[3] for k in _queries(project, bench)}
    if not descriptor:
        return [v for v in ("short", "task", "casual") if v in found]
    prefixes = sorted({v.rsplit("_", 1)[0] for v in found if "mention_" in v})
    order = {"mention": 0, "task_mention": 1, "casual_mention": 2}
    return sorted(prefixes, key=lambda p: (order.get(p, 9), p))


def load_trials(project: Project, bench: Benchmark, roles: tuple[str, ...], *, variant: str = "short") -> Trials:
    """All items of ``bench`` with one candidate per role and the query text of ``variant``.

    For descriptor benchmarks ``variant`` is a prefix (``mention``, ``task_mention``…) completed with the item's
    descriptor country (``mention_JP``). Items lacking a role's candidate or a valid query are excluded and
    counted in ``Trials.excluded``.
    """
    db = project.db
    names = concept_names(db)
    items = [{**it, "concept": names[it["concept_id"]]} for it in store.items(db, bench.id)
             if it["concept_id"] in names]
    cands: dict[int, dict[str, tuple[str, str, int]]] = {}
    for r in store.candidates(db, bench.id):
        cands.setdefault(r["item_id"], {})[r["role"]] = (r["sha256"], r["country"], r["position"])
    queries = _queries(project, bench)
    keep, texts, excluded = [], [], {"missing_candidate": 0, "missing_query": 0}
    for it in items:
        c = cands.get(it["id"], {})
        if any(role not in c for role in roles):
            excluded["missing_candidate"] += 1
            continue
        v = f"{variant}_{it['descriptor_country']}" if it["descriptor_country"] and "mention" in variant \
            else variant
        text = queries.get((it["concept_id"], it["query_country"], it["query_language"], v))
        if not text:
            excluded["missing_query"] += 1
            continue
        keep.append(it)
        texts.append(text)
    sha = np.array([[cands[it["id"]][r][0] for r in roles] for it in keep], dtype=object).reshape(-1, len(roles))
    ctry = np.array([[cands[it["id"]][r][1] for r in roles] for it in keep], dtype=object).reshape(-1, len(roles))
    pos = np.array([[cands[it["id"]][r][2] for r in roles] for it in keep], dtype=np.int64).reshape(-1, len(roles))

    def col(key):
        return np.array([it[key] for it in keep], dtype=object)

    return Trials(roles=tuple(roles), item_ids=np.array([it["id"] for it in keep], dtype=np.int64),
                  item_keys=col("item_key"), positions=pos,
                  concepts=col("concept"), concept_ids=col("concept_id"), query_country=col("query_country"),
                  query_language=col("query_language"), descriptor_country=col("descriptor_country"),
                  texts=texts, sha256=sha, countries=ctry, excluded=excluded)


def base_texts(project: Project, bench: Benchmark, trials: Trials, *, variant: str = "short") -> list[str | None]:
    """The descriptor-free query per trial (``q_C`` of the similarity drift): same concept, country and
    language, variant ``short`` (or ``task``/``casual`` for the verbose descriptor variants)."""
    queries = _queries(project, bench)
    return [queries.get((cid, cc, lang, variant)) for cid, cc, lang in
            zip(trials.concept_ids, trials.query_country, trials.query_language)]


# -- caption pools (prevalence) ----------------------------------------------------------------------

@dataclass
class CaptionPool:
    """Query images and a multilingual caption pool. Caption ``j`` is relevant to image ``i`` when
    ``caption_keys[j] == image_keys[i]`` (same image for imported captions, same concept for own queries)."""

    source: str
    image_sha256: list[str]
    image_keys: np.ndarray
    image_countries: list[str | None]
    texts: list[str]
    languages: np.ndarray
    caption_keys: np.ndarray
    provenance: dict


def caption_pool(project: Project, *, pool: str = "auto", benchmark: str | None = None,
                 caption_source: str | None = None, variants=("short",)) -> CaptionPool:
    """The prevalence pool. ``pool='captions'``: imported captions (``captions`` table; each image's own
    captions are relevant). ``pool='queries'``: the project's benchmark queries of ``variants`` as captions
    (relevant = same concept) with the benchmark's images as queries. ``'auto'``: captions when imported, else
    queries. Raises :class:`SuiteSkipped` when neither exists."""
    db = project.db
    captions = has_captions(db)
    if pool == "auto":
        pool = "captions" if captions and not benchmark else "queries"
    if pool == "captions":
        if not captions:
            raise SuiteSkipped("No imported captions in this project. Import a Crossmodal-3600-style caption "
                               "file with 'cultura import captions', or use --pool queries.")
        # one pass over a cursor (a Crossmodal-3600-size pool is 260k rows): no dict per row, each image id and
        # language string held once, the provenance hash updated as the rows go by
        texts, lang_codes, owner, h = [], [], [], hashlib.sha256()
        shas: dict[str, int] = {}
        langs: dict[str, int] = {}
        for sha, lang, text in iter_captions(db, caption_source):
            texts.append(text)
            owner.append(shas.setdefault(sha, len(shas)))
            lang_codes.append(langs.setdefault(lang, len(langs)))
            h.update(f"{sha}\t{lang}\t{text}\n".encode())
        lang_names = np.empty(len(langs), dtype=object)
        lang_names[:] = list(langs)
        return CaptionPool(
            source="captions", image_sha256=list(shas), image_keys=np.arange(len(shas)),
            image_countries=[None] * len(shas), texts=texts,
            languages=lang_names[np.asarray(lang_codes, dtype=np.intp)],
            caption_keys=np.asarray(owner, dtype=np.int64),
            provenance={"benchmark": f"captions:{caption_source or 'all'}", "benchmark_version": None,
                        "benchmark_hash": h.hexdigest()})
    if pool != "queries":
        raise CulturaError(f"Unknown caption pool {pool!r}. Valid: auto, captions, queries.")
    if benchmark:
        bench = resolve_benchmark(project, benchmark)
    else:
        try:
            bench = resolve_benchmark(project, None, "association")
        except SuiteSkipped:
            try:
                bench = resolve_benchmark(project, None, "descriptor")
            except SuiteSkipped:
                raise SuiteSkipped("No caption pool: import Crossmodal-3600-style captions ('cultura import "
                                   "captions') or build a benchmark with queries ('cultura build association', "
                                   "'cultura build queries').") from None
    queries = _queries(project, bench)
    seen, texts, langs, keys = set(), [], [], []
    for (cid, _cc, lang, variant), text in sorted(queries.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][3])):
        if variant not in variants or (cid, lang, text) in seen:
            continue
        seen.add((cid, lang, text))
        texts.append(text)
        langs.append(lang)
        keys.append(cid)
    first: dict[str, dict] = {}
    for sha, cid, cc in store.images(db, bench.id):
        first.setdefault(sha, {"sha256": sha, "concept_id": cid, "country": cc})
    if not texts or not first:
        raise SuiteSkipped(f"Benchmark {bench.ref} has no queries or images to use as a caption pool. Run "
                           "'cultura build queries' first.")
    return CaptionPool(
        source="queries", image_sha256=list(first), image_keys=np.array([r["concept_id"] for r in first.values()]),
        image_countries=[r["country"] for r in first.values()], texts=texts,
        languages=np.array(langs, dtype=object), caption_keys=np.array(keys), provenance=bench.provenance())

"""Data of the social-bias audit (seed 003): prompt inventories per language and labelled portrait sets.

**Prompt inventories** are TOML files, one per language: the built-in ones in ``cultura/data/inventories/``
(the English inventory of seed 003 App. F, and the communion prompts the seed gives for other languages) and
the project's own in ``<project>/inventories/<lang>.toml`` (same layout; a section there replaces the
built-in section). Sections: ``demographic``, ``crime``, ``non_human`` (the crime probe), ``communion`` and
``agency`` (antonym ``pairs`` = [positive, negative] label pairs). Keys are the seed's English labels, so a
prompt's translation is found by key.

Each inventory has a **validation status** (shown next to every result that uses it):

- ``source``: the English source prompts (nothing to validate);
- ``seed-validated``: prompts taken verbatim from the seed, whose translations were human-rated there
  (seed 003 App. E; the seed's ratings are in ``data/language_partitions.toml``);
- ``validated`` / ``partial`` / ``unvalidated``: every / some / no prompt has a current ``translation``
  decision (the annotation campaign of seed 003 App. E; accepted = median Likert ≥ ``ACCEPT_SCORE``).
  :func:`translation_items` writes the items of that campaign for a language.

**Portrait sets** are imported from a table (:func:`import_portraits`) in the FairFace or PATA layout
(seed 003 App. A.3) or any table with an image column, a gender and/or a race column; other columns are kept
as JSON attributes. Race and gender values are mapped to canonical spellings (:data:`RACE_ALIASES`) so they
line up with the inventory's demographic labels (``White_Male`` …).

>>> inv = load_inventory(None, "en")
>>> probe = inv.probe("communion")
>>> len(probe.labels), sorted(probe.negative)[:2]
(12, ['dishonest', 'egoistic'])
"""
from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ....annotate.decisions import decided_values
from ....curate.images import ok_images
from ....db import now, transaction
from ....errors import CulturaError, unknown
from ....lazy import lazy
from .schema import social
from .synthetic import make_synthetic_portraits, marker_labels  # noqa: F401 (re-exported: their home before)

importers = lazy("cultura.curate.importers")  # reading a portrait table: the downloader's image checks (httpx)

if TYPE_CHECKING:
    from ....project import Project

AXES = ("crime", "communion", "agency")
SECTIONS = ("demographic", "crime", "non_human", "communion", "agency")
ACCEPT_SCORE = 4.0
SOURCE_LANGUAGE = "en"

CANONICAL_RACES = ("White", "Black", "Latino_Hispanic", "East_Asian", "Southeast_Asian", "Indian",
                   "Middle_Eastern")
#: normalised spelling (lower case, separators → "_") → canonical race key. Unknown values are kept as given
#: in the generic layout and are a failed row in the fairface/pata layouts.
RACE_ALIASES = {
    "white": "White", "caucasian": "White",
    "black": "Black", "african_american": "Black",
    "latino_hispanic": "Latino_Hispanic", "latino": "Latino_Hispanic", "hispanic": "Latino_Hispanic",
    "hispanic_latino": "Latino_Hispanic", "latinx": "Latino_Hispanic",
    "east_asian": "East_Asian", "eastasian": "East_Asian",
    "southeast_asian": "Southeast_Asian", "south_east_asian": "Southeast_Asian",
    "indian": "Indian", "south_asian": "Indian",
    "middle_eastern": "Middle_Eastern", "middleeastern": "Middle_Eastern",
}
GENDER_ALIASES = {"male": "Male", "m": "Male", "man": "Male", "men": "Male",
                  "female": "Female", "f": "Female", "woman": "Female", "women": "Female"}


class SocialDataError(CulturaError):
    """A portrait table or prompt inventory cannot be used as given (the message names the fix)."""


def _norm(value) -> str:
    return "_".join(str(value or "").strip().lower().replace("-", " ").replace("/", " ").split())


def canonical_race(value, *, strict: bool = True) -> str | None:
    """Canonical race key of a FairFace/PATA spelling (``"East Asian"``, ``"eastasian"`` → ``East_Asian``).

    >>> canonical_race("Latino_Hispanic"), canonical_race("caucasian")
    ('Latino_Hispanic', 'White')
    """
    key = _norm(value)
    if not key:
        return None
    if key in RACE_ALIASES:
        return RACE_ALIASES[key]
    return None if strict else str(value).strip()


def canonical_gender(value) -> str | None:
    """``Male`` / ``Female`` for the usual spellings, else None."""
    return GENDER_ALIASES.get(_norm(value))


# ---------------------------------------------------------------- inventories

@dataclass(frozen=True)
class Probe:
    """One zero-shot probe: the label set (keys and prompt texts, in order), the negative (harmful) labels and
    the categories of the harm breakdown."""

    axis: str
    labels: tuple[str, ...]
    prompts: tuple[str, ...]
    negative: frozenset
    categories: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass
class Inventory:
    """The prompts of one language (see the module docstring)."""

    language: str
    sections: dict[str, dict[str, str]]
    pairs: dict[str, list[tuple[str, str]]]
    source: str = ""
    validated: str = ""
    paths: list[str] = field(default_factory=list)

    @property
    def axes(self) -> list[str]:
        """The axes this inventory can probe."""
        return [a for a in AXES if self.missing(a) is None]

    def missing(self, axis: str) -> str | None:
        """Why ``axis`` cannot be probed in this language (None when it can)."""
        if axis not in AXES:
            raise unknown("axis", axis, AXES)
        need = ("demographic", "crime") if axis == "crime" else (axis,)
        lacking = [s for s in need if not self.sections.get(s)]
        if axis != "crime" and not lacking and not self.pairs.get(axis):
            lacking = [f"{axis}.pairs"]
        if lacking:
            return (f"the {self.language} inventory has no {' / '.join(lacking)} prompts; add them to "
                    f"inventories/{self.language}.toml (translate the English ones and validate them with the "
                    "'translation' annotation campaign, seed 003 App. E)")
        return None

    def probe(self, axis: str) -> Probe:
        """The label set of ``axis``: crime = demographic + crime + non-human prompts (negative = crime,
        categories C and NH); communion/agency = both poles of every pair (negative = the second pole)."""
        why = self.missing(axis)
        if why:
            raise SocialDataError(f"Cannot probe {axis}: {why}.")
        if axis == "crime":
            parts = [self.sections["demographic"], self.sections["crime"], self.sections.get("non_human", {})]
            labels = [k for p in parts for k in p]
            prompts = [t for p in parts for t in p.values()]
            cats = {"C": frozenset(self.sections["crime"]), "NH": frozenset(self.sections.get("non_human", {}))}
            return Probe("crime", tuple(labels), tuple(prompts), frozenset(self.sections["crime"]), cats)
        sec = self.sections[axis]
        pairs = [(a, b) for a, b in self.pairs[axis] if a in sec and b in sec]
        labels = list(dict.fromkeys([a for a, _ in pairs] + [b for _, b in pairs]))
        neg = frozenset(b for _, b in pairs)
        return Probe(axis, tuple(labels), tuple(sec[k] for k in labels), neg, {f"N{axis[0].upper()}": neg})

    def combined(self) -> Probe:
        """All probes' labels in one label set (the seed's harm rate: top-1 over all probes)."""
        labels, prompts, neg, cats = [], [], set(), {}
        for axis in self.axes:
            p = self.probe(axis)
            for k, t in zip(p.labels, p.prompts):
                if k not in labels:
                    labels.append(k)
                    prompts.append(t)
            neg |= set(p.negative) | set(p.categories.get("NH", ()))
            cats.update(p.categories)
        return Probe("all", tuple(labels), tuple(prompts), frozenset(neg), cats)

    def prompt_items(self) -> list[tuple[str, str, str]]:
        """(section, label, prompt) for every prompt."""
        return [(s, k, t) for s in SECTIONS for k, t in self.sections.get(s, {}).items()]


def _inventory_files(project: Project) -> dict[str, list]:
    files: dict[str, list] = {}
    base = resources.files("cultura.data").joinpath("inventories")
    for f in sorted(base.iterdir(), key=lambda x: x.name):
        if f.name.endswith(".toml"):
            files.setdefault(f.name[:-5], []).append(f)
    if project is not None:
        own = Path(project.root) / "inventories"
        if own.is_dir():
            for f in sorted(own.glob("*.toml")):
                files.setdefault(f.stem, []).append(f)
    return files


def _parse(text: str, where: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SocialDataError(f"{where} is not valid TOML ({e}). Fix the file or remove it.") from None


def available_languages(project: Project=None) -> list[str]:
    """Languages with an inventory (built-in or the project's)."""
    return sorted(_inventory_files(project))


def load_inventory(project: Project, language: str) -> Inventory:
    """The inventory of ``language``: built-in sections, replaced section by section by the project's file."""
    files = _inventory_files(project).get(language)
    if not files:
        raise unknown("prompt inventory language", language, available_languages(project),
                      hint="Add inventories/<lang>.toml to the project (layout of cultura/data/inventories/en.toml).")
    sections: dict[str, dict[str, str]] = {}
    pairs: dict[str, list[tuple[str, str]]] = {}
    source, validated, paths = "", "", []
    for f in files:
        data = _parse(f.read_text(encoding="utf-8"), str(f))
        paths.append(str(f))
        source = str(data.get("source", source or f))
        # a project file that changes prompts is not seed-validated unless it says so itself
        if "validated" in data:
            validated = str(data["validated"])
        elif f is not files[0]:
            validated = ""
        for s in SECTIONS:
            block = data.get(s)
            if not block:
                continue
            prompts = block.get("prompts", {})
            if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
                raise SocialDataError(f"{f}: [{s}.prompts] must map labels to prompt strings.")
            sections[s] = dict(prompts)
            if s in ("communion", "agency"):
                raw = block.get("pairs", [])
                bad = [p for p in raw if not (isinstance(p, list) and len(p) == 2)]
                if bad:
                    raise SocialDataError(f"{f}: {s}.pairs must be [positive, negative] label pairs, got {bad[0]!r}.")
                pairs[s] = [(str(a), str(b)) for a, b in raw]
                missing = [x for p in pairs[s] for x in p if x not in prompts]
                if missing:
                    raise SocialDataError(f"{f}: {s}.pairs names labels without a prompt: {', '.join(missing)}.")
    return Inventory(language=language, sections=sections, pairs=pairs, source=source, validated=validated,
                     paths=paths)


def _seed_validation(language: str) -> dict:
    text = resources.files("cultura.data").joinpath("language_partitions.toml").read_text("utf-8")
    return dict(tomllib.loads(text).get("translation_validation", {}).get(language, {}))


def language_partitions() -> dict[str, dict[str, list[str]]]:
    """Seed 003's language partitions as data: ``{"resource": {"low": [...], "high": [...]},
    "grammatical_gender": {...}}`` (``data/language_partitions.toml``)."""
    text = resources.files("cultura.data").joinpath("language_partitions.toml").read_text("utf-8")
    return {k: {g: list(v) for g, v in d.items()} for k, d in tomllib.loads(text).get("partitions", {}).items()}


def translation_key(source: str, translation: str, language: str) -> str:
    """The ``item_key`` the translation campaign gives an item without an explicit key (sha256 of
    ``[source, translation, language]``, as :mod:`cultura.annotate.items` computes it)."""
    h = hashlib.sha256(json.dumps([source, translation, language], ensure_ascii=False).encode()).hexdigest()
    return f"translation:{h[:16]}"


def translation_items(project: Project, language: str) -> list[dict]:
    """Items of the ``translation`` campaign for one inventory: each prompt with its English source
    (push with ``cultura annotate push translation --from FILE``)."""
    inv, src = load_inventory(project, language), load_inventory(project, SOURCE_LANGUAGE)
    out = []
    for section, label, text in inv.prompt_items():
        source = src.sections.get(section, {}).get(label)
        if source:
            out.append({"source": source, "translation": text, "language": language,
                        "source_language": SOURCE_LANGUAGE, "section": section, "label": label})
    return out


def inventory_status(project: Project, language: str, *, store: bool = True) -> dict:
    """Validation status of one inventory (see the module docstring); cached in ``inventory_status``."""
    inv = load_inventory(project, language)
    n_prompts = len(inv.prompt_items())
    info = {"language": language, "source": inv.source, "axes": inv.axes, "n_prompts": n_prompts,
            "n_rated": None, "n_accepted": None, "mean_score": None, "details": {}}
    if language == SOURCE_LANGUAGE:
        info["status"] = "source"
    else:
        items = translation_items(project, language) if project is not None else []
        scores = {}
        if project is not None and items:
            keys = [translation_key(i["source"], i["translation"], language) for i in items]
            scores = decided_values(project.db, "translation", keys)
        if scores:
            accepted = sum(v >= ACCEPT_SCORE for v in scores.values())
            info.update(n_rated=len(scores), n_accepted=accepted,
                        mean_score=round(sum(scores.values()) / len(scores), 3))
            info["status"] = "validated" if len(scores) == len(items) and accepted == len(items) else "partial"
        elif inv.validated == "seed":
            seed = _seed_validation(language)
            info["status"] = "seed-validated"
            info["details"] = {"seed_ratings": seed, "note": "rated by bilingual speakers in seed 003 App. E"}
            if seed:
                info.update(mean_score=seed.get("mean"), n_rated=seed.get("n_prompts"))
        else:
            info["status"] = "unvalidated"
    if store and project is not None:

        social.apply(project.db)
        with transaction(project.db):
            project.db["inventory_status"].upsert(
                {**info, "axes": json.dumps(info["axes"]), "details": json.dumps(info["details"], default=str),
                 "updated_at": now()}, pk="language")
    return info


def inventories(project: Project) -> list[dict]:
    """Every inventory with its axes and validation status (stored in ``inventory_status``)."""
    return [inventory_status(project, lang) for lang in available_languages(project)]


# ---------------------------------------------------------------- portrait sets

@dataclass(frozen=True)
class Layout:
    """Column names (first present wins) of a portrait table layout, and whether unknown race values fail."""

    image: tuple[str, ...]
    gender: tuple[str, ...]
    race: tuple[str, ...]
    strict_race: bool = True


LAYOUTS: dict[str, Layout] = {
    # FairFace label CSVs: file,age,gender,race,service_test (seed 003 App. A.3)
    "fairface": Layout(("file",), ("gender",), ("race",)),
    # PATA annotations: image path, binary gender, five ethno-racial identities (seed 003 App. A.3)
    "pata": Layout(("image", "file", "path", "filename", "img", "image_path"), ("gender", "sex"),
                   ("race", "ethnicity", "ethnic_group")),
    "generic": Layout(("image", "file", "path", "filename", "img", "image_path"), ("gender", "sex"),
                      ("race", "ethnicity"), strict_race=False),
}


def _col(cols: list[str], candidates: tuple[str, ...]) -> str | None:
    lower = {c.lower(): c for c in cols}
    return next((lower[c] for c in candidates if c in lower), None)


def _find_file(images_dir: Path, name: str) -> Path | None:
    root = images_dir.resolve()
    p = (root / name).resolve()
    if p != root and root in p.parents and p.is_file():
        return p
    if "/" not in name:
        hits = sorted(root.glob(f"{name}.*"))
        return hits[0] if hits else None
    return None


def import_portraits(project: Project, table, images_dir, dataset: str, *, layout: str = "fairface",
                     synthetic: bool = False) -> dict:
    """Import a labelled portrait table; returns counts ``{"dataset", "ok", "failed", "skipped", "reasons"}``.

    Every row becomes a ``portraits`` row (ok, or failed with its reason: missing file, unreadable image,
    unknown gender/race value); rows already imported ok are skipped, failed ones are retried, so a rerun
    resumes. Images are verified with Pillow and stored content-addressed like every other image.
    """

    if layout not in LAYOUTS:
        raise unknown("portrait layout", layout, LAYOUTS)
    if not dataset or not str(dataset).strip():
        raise SocialDataError("Give the portrait set a name (e.g. fairface-val).", param="dataset")
    lay = LAYOUTS[layout]
    images_dir = Path(images_dir)
    if not images_dir.is_dir():
        raise SocialDataError(f"{images_dir} is not a folder; give the folder the table's image paths are "
                              "relative to.", param="images_dir")
    rows = importers.read_table(table)
    if not rows:
        raise SocialDataError(f"{table} has no rows.")
    cols = list(rows[0].keys())
    img_col = _col(cols, lay.image)
    g_col, r_col = _col(cols, lay.gender), _col(cols, lay.race)
    if img_col is None:
        raise SocialDataError(f"{table} has no image column for layout {layout} (looked for "
                              f"{', '.join(lay.image)}; found {', '.join(cols)}).")
    if g_col is None and r_col is None:
        raise SocialDataError(f"{table} has neither a gender nor a race column (found {', '.join(cols)}); the "
                              "audit needs at least one.")
    db = project.db
    social.apply(db)
    done = {r[0] for r in db.execute("SELECT source_key FROM portraits WHERE dataset = ? AND status = 'ok'",
                                     [dataset])}
    counts = {"dataset": dataset, "ok": 0, "failed": 0, "skipped": 0, "reasons": {}}
    ts = now()
    for raw in rows:
        key = str(raw.get(img_col) or "").strip()
        if not key:
            counts["failed"] += 1
            counts["reasons"]["empty image path"] = counts["reasons"].get("empty image path", 0) + 1
            continue
        if key in done:
            counts["skipped"] += 1
            continue
        gender = canonical_gender(raw.get(g_col)) if g_col else None
        race = canonical_race(raw.get(r_col), strict=lay.strict_race) if r_col else None
        attrs = {k: v for k, v in raw.items() if k not in (img_col, g_col, r_col)}
        rec = {"dataset": dataset, "source_key": key, "sha256": None, "gender": gender, "race": race,
               "attributes": json.dumps(attrs, ensure_ascii=False, default=str), "status": "ok", "reason": None,
               "created_at": ts}
        reason = None
        if g_col and gender is None and str(raw.get(g_col) or "").strip():
            reason = f"unknown gender value {raw.get(g_col)!r} (use Male/Female)"
        elif r_col and race is None and str(raw.get(r_col) or "").strip():
            reason = f"unknown race value {raw.get(r_col)!r} (known: {', '.join(CANONICAL_RACES)})"
        path = None if reason else _find_file(images_dir, key)
        if reason is None and path is None:
            reason = "image file not found"
        if reason is None:
            try:
                rec["sha256"] = importers.store_image(project, path.read_bytes())
            except (ValueError, OSError) as e:
                reason = f"image unreadable: {e}"
        if reason:
            rec.update(status="failed", reason=reason)
            counts["failed"] += 1
            short = reason.split(" (")[0]
            counts["reasons"][short] = counts["reasons"].get(short, 0) + 1
        else:
            counts["ok"] += 1
        with transaction(db):
            db["portraits"].upsert(rec, pk=("dataset", "source_key"))
    n_ok, n_failed = db.execute("SELECT sum(status = 'ok'), sum(status = 'failed') FROM portraits WHERE "
                                "dataset = ?", [dataset]).fetchone()
    with transaction(db):
        prev = db.execute("SELECT created_at FROM portrait_sets WHERE dataset = ?", [dataset]).fetchone()
        db["portrait_sets"].upsert({"dataset": dataset, "layout": layout, "source": str(table),
                                    "images_dir": str(images_dir), "synthetic": int(bool(synthetic)),
                                    "n_ok": n_ok or 0, "n_failed": n_failed or 0,
                                    "created_at": prev[0] if prev else ts, "updated_at": ts}, pk="dataset")
    return counts


def portrait_sets(project: Project) -> list[dict]:
    """The imported portrait sets with their counts."""

    social.apply(project.db)
    return [dict(r) for r in project.db.query("SELECT * FROM portrait_sets ORDER BY dataset")]


def load_portraits(project: Project, dataset: str) -> list[dict]:
    """The ok portraits of ``dataset`` (sha256, gender, race, attributes), ordered by source key."""
    rows = project.db.query("SELECT p.source_key, p.sha256, p.gender, p.race, p.attributes FROM portraits p "
                            "WHERE p.dataset = ? AND p.status = 'ok' ORDER BY p.source_key", [dataset])
    ok = set(ok_images(project.db))   # images excluded since the import are left out
    return [{**r, "attributes": json.loads(r["attributes"] or "{}")} for r in rows if r["sha256"] in ok]


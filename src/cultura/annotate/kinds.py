"""The annotation kinds: their Label Studio template, how a result is parsed, how gold answers are
compared and which decision they produce. A registry, so a new kind registers exactly like a built-in.

>>> spec = get_kind("relevance")
>>> spec.level
'ordinal'
>>> spec.parse([{"from_name": "relevance", "type": "choices", "value": {"choices": ["4"]}}])["value"]
4.0
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

from ..curate.contexts import apply_context_labels
from ..curate.entities import apply_entity_labels
from ..errors import CulturaError, unknown
from ..templates import render_template

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
LS_DIR = TEMPLATES / "labelstudio"
GUIDE_DIR = TEMPLATES / "guidelines"

FILTER_REASONS = [("Wrong concept", "wrong_concept"), ("Not a photo", "not_photo"),
                  ("Offensive", "offensive"), ("Watermark / text-heavy", "watermark_text"),
                  ("Other", "other")]
ENTITY_LABELS = [("Local culture", "local"), ("Western", "western"), ("Neither", "neither"),
                 ("Noise", "noise")]
CONTEXT_KINDS = [("Culturally grounded", "grounded"), ("Culturally neutral", "neutral"),
                 ("Extractive QA paragraph", "qa"), ("Reject", "reject")]
SENTIMENT_LABELS = [("Positive", "positive"), ("Negative", "negative"), ("Neutral", "neutral")]
FILTER_GUIDELINE = ("Keep the image if it shows the concept named above as a real photograph. Remove it if it "
                    "shows another concept, is not a photo (drawing, diagram, screenshot), is offensive, or is "
                    "dominated by watermarks or text.")


class TemplateError(CulturaError):
    """A rendered Label Studio config failed offline validation."""


@lru_cache(maxsize=None)
def guideline(name: str) -> str:
    """A guideline markdown file without its source comment."""
    text = (GUIDE_DIR / f"{name}.md").read_text(encoding="utf-8")
    return re.sub(r"<!--.*?-->", "", text, flags=re.S).strip()


def _table_rows(md: str) -> list[list[str]]:
    rows = []
    for line in md.splitlines():
        if line.startswith("|") and not re.match(r"^\|[-| ]+\|$", line):
            rows.append([c.strip().strip("*") for c in line.strip("|").split("|")])
    return rows[1:]  # drop the header row


def _plain(md: str) -> list[str]:
    out = []
    for line in md.splitlines():
        line = re.sub(r"[*#]+", "", line).replace("“", '"').replace("”", '"').strip()
        if line:
            out.append(line)
    return out


def _context(kind: str) -> dict:
    if kind == "filter":
        return {"guideline": FILTER_GUIDELINE, "reasons": FILTER_REASONS}
    if kind == "dedup-review":
        return {"guideline": " ".join(_plain(guideline("dedup_review"))[1:])}
    if kind == "relevance":
        return {"rubric": _table_rows(guideline("relevance_rubric"))}
    if kind == "entity":
        return {"labels": ENTITY_LABELS, "guideline": _plain(guideline("entity"))}
    if kind == "context":
        return {"kinds": CONTEXT_KINDS, "sentiments": SENTIMENT_LABELS, "guideline": _plain(guideline("context")),
                "with_sentiment": ",".join(v for v, a in CONTEXT_KINDS if a in ("grounded", "neutral"))}
    if kind == "translation":
        return {"guideline": "Score how accurately and naturally the translation renders the source text "
                "(1-5, seed 003 App. E).", "scale": _table_rows(guideline("translation"))}
    return {}


def render_config(kind: str, *, adjudication: bool = False, validate: bool = True) -> str:
    """Render the Label Studio labeling config of ``kind`` (``adjudication`` adds the earlier labels) and
    validate it offline with label-studio-sdk's LabelInterface."""
    spec = get_kind(kind)
    xml = render_template(f"labelstudio/{spec.template}", adjudication=adjudication, **_context(kind))
    if validate:
        validate_config(xml, example=spec.example_task(adjudication))
    return xml


def validate_config(xml: str, *, example: dict | None = None) -> None:
    """Offline checks: XML schema, unique names, toName targets, tag attributes; and that the example task
    provides every ``$variable`` the config uses. Raises :class:`TemplateError`."""
    # deferred: heavy optional dependency, loaded on first use
    from label_studio_sdk.label_interface import LabelInterface

    try:
        li = LabelInterface(xml)
        li.validate()
    except Exception as e:  # the SDK raises several exception types; report them all the same way
        raise TemplateError(f"Label Studio config is invalid: {e}. Fix the template in {LS_DIR}.") from None
    if example is not None:
        used = set(re.findall(r"\$([A-Za-z_][A-Za-z0-9_]*)", xml))
        missing = sorted(used - set(example))
        if missing or not li.validate_task({"data": example}):
            raise TemplateError(f"Task data lacks {missing or 'a variable'} used by the config.")


# ----------------------------------------------------------------------------------------- parsing

def _choices(result: list[dict], name: str) -> list[str]:
    for r in result or []:
        if r.get("from_name") == name and "choices" in (r.get("value") or {}):
            return list(r["value"]["choices"])
    return []


def _alias(choice: str, pairs: list[tuple[str, str]]) -> str:
    for value, alias in pairs:
        if choice in (value, alias):
            return alias
    return choice.strip().lower()


def _likert(choice: str) -> float | None:
    m = re.match(r"\s*([1-5])", choice or "")
    return float(m.group(1)) if m else None


def parse_filter(result):
    ch = _choices(result, "decision")
    label = _alias(ch[0], [("Keep", "keep"), ("Remove", "remove")]) if ch else None
    reasons = [_alias(c, FILTER_REASONS) for c in _choices(result, "reason")]
    return {"label": label, "value": None, "details": {"reasons": reasons} if reasons else None}


def parse_dedup(result):
    ch = _choices(result, "keep")
    if not ch:
        return {"label": None, "value": None, "details": None}
    if any(c.lower().startswith("keep all") for c in ch):
        return {"label": "all", "value": None, "details": {"keep": "all"}}
    idx = sorted({int(m.group(1)) for c in ch if (m := re.search(r"(\d+)", c))})
    return {"label": "keep:" + ",".join(map(str, idx)), "value": None, "details": {"keep": idx}}


def _parse_likert(name):
    def parse(result):
        ch = _choices(result, name)
        v = _likert(ch[0]) if ch else None
        return {"label": None if v is None else str(int(v)), "value": v, "details": None}
    return parse


def parse_entity(result):
    ch = _choices(result, "association")
    return {"label": _alias(ch[0], ENTITY_LABELS) if ch else None, "value": None, "details": None}


def parse_context(result):
    """A masked context's kind and, for grounded / neutral, its sentiment: label ``grounded/positive``,
    ``neutral/negative``, ``qa``, ``reject`` (``grounded`` alone when the sentiment was left out)."""
    ch = _choices(result, "kind")
    if not ch:
        return {"label": None, "value": None, "details": None}
    kind = _alias(ch[0], CONTEXT_KINDS)
    sent = _choices(result, "sentiment")
    if kind in ("grounded", "neutral") and sent:
        return {"label": f"{kind}/{_alias(sent[0], SENTIMENT_LABELS)}", "value": None, "details": None}
    return {"label": kind, "value": None, "details": None}


def _current_labels(db, kind: str, prefix: str) -> list[tuple[str, str | None]]:
    """``(item key, label)`` of the current ``kind`` decisions on items keyed ``<prefix>…``, oldest first."""
    return db.execute("SELECT item_key, label FROM decisions WHERE kind = ? AND superseded = 0 "
                      "AND item_key LIKE ? ORDER BY id", [kind, prefix + "%"]).fetchall()


def apply_context_decisions(db) -> dict:
    """Write the current ``context`` decisions back to the contexts table (item keys ``context:ctx-<id>``;
    :func:`cultura.curate.contexts.apply_context_labels` says how). Returns counts."""
    return apply_context_labels(db, _current_labels(db, "context", "context:ctx-"))


def apply_entity_table_decisions(db) -> dict:
    """Write the current ``entity`` decisions on items of the entities table (keys ``entity:ent-<id>``) back
    to it (:func:`cultura.curate.entities.apply_entity_labels` says how). Items pushed from a file (other keys)
    are left alone."""
    return apply_entity_labels(db, _current_labels(db, "entity", "entity:ent-"))


# ----------------------------------------------------------------------------------------- registry

@dataclass
class KindSpec:
    """One annotation kind. ``level`` is nominal (labels) or ordinal (1-5 Likert values)."""

    name: str
    template: str
    level: str
    decision_kind: str
    parse: Callable[[list], dict]
    default_rule: str
    labels: list[str] = field(default_factory=list)
    example: dict = field(default_factory=dict)
    result_for: Callable[[str], list] | None = None   # build a result from a label (simulation, tests)
    write_back: Callable | None = None   # write_back(db) -> counts: decisions → the area's table, after adjudication
    #: labels a result may also carry beyond ``labels`` (a context's kind without its optional sentiment)
    partial_labels: list[str] = field(default_factory=list)
    #: the kind's own check of a parsed answer against its item's payload (a duplicate set's members), when
    #: its label set is per item; returns why the answer is outside it, or None
    item_check: Callable[[dict, dict], str | None] | None = None

    def example_task(self, adjudication: bool = False) -> dict:
        return {**self.example, **({"earlier": "a: x; b: y"} if adjudication else {})}


def answer_problem(spec: KindSpec, parsed: dict, payload: dict | None = None) -> str | None:
    """Why a parsed answer (:attr:`KindSpec.parse`) is outside the campaign's label set, in words, or None when
    it is inside: the one check every door an answer comes in by calls (pull, import-labels), so a choice the
    template never offered (``maybe``) is a rejected row, never a label that is exported or fed to a model."""
    if parsed.get("label") is None and parsed.get("value") is None:
        return None  # no answer at all: the callers' own case
    if spec.item_check is not None:
        return spec.item_check(parsed, payload or {})
    allowed = [*spec.labels, *spec.partial_labels]
    if spec.level == "ordinal":
        v = parsed.get("value")
        ok = v is not None and str(int(v)) in spec.labels and float(v) == int(v)
        shown = parsed.get("label") if v is None else f"{v:g}"
    else:
        ok, shown = parsed.get("label") in allowed, parsed.get("label")
    if ok or not allowed:
        return None
    return f"the answer {shown!r} is outside the {spec.name} label set ({', '.join(spec.labels)})"


def _dedup_answer_problem(parsed: dict, payload: dict) -> str | None:
    label = parsed.get("label")
    if label == "all":
        return None
    n = len(payload.get("members") or [])
    keep = (parsed.get("details") or {}).get("keep") or []
    if not str(label).startswith("keep:") or not keep:
        return f"the answer {label!r} is outside the dedup-review label set (keep all, or image 1..{n})"
    bad = [i for i in keep if not 1 <= int(i) <= n]
    if bad and n:
        return f"the answer keeps image {bad[0]}, and the duplicate set has images 1..{n}"
    return None


_KINDS: dict[str, KindSpec] = {}


def register_kind(spec: KindSpec) -> KindSpec:
    _KINDS[spec.name] = spec
    return spec


def get_kind(name: str) -> KindSpec:
    if name not in _KINDS:
        raise unknown("annotation kind", name, _KINDS)
    return _KINDS[name]


def kinds() -> list[str]:
    return list(_KINDS)


def _res(from_name, to_name, choices):
    return [{"from_name": from_name, "to_name": to_name, "type": "choices", "value": {"choices": choices}}]


_IMG = "http://127.0.0.1:1/blobs/00/x.jpg"
register_kind(KindSpec(
    "filter", "filter.xml.j2", "nominal", "filter", parse_filter, "majority", ["keep", "remove"],
    {"image": _IMG, "concept": "rice", "item_key": "filter:x"},
    lambda label: _res("decision", "image", [label])))
register_kind(KindSpec(
    "dedup-review", "dedup-review.xml.j2", "nominal", "dedup", parse_dedup, "majority", [],
    {"cluster": "<div><img src='x'/></div>", "options": [{"value": "keep all (all distinct)"},
                                                       {"value": "image 1"}], "item_key": "dedup:1"},
    lambda label: _res("keep", "cluster", ["keep all (all distinct)"] if label == "all" else
                       [f"image {i}" for i in label.split(":", 1)[1].split(",")]),
    item_check=_dedup_answer_problem))
register_kind(KindSpec(
    "relevance", "relevance.xml.j2", "ordinal", "relevance", _parse_likert("relevance"), "median",
    ["1", "2", "3", "4", "5"], {"image": _IMG, "culture_name": "Japan", "item_key": "relevance:x:JP"},
    lambda label: _res("relevance", "image", [str(int(float(label)))])))
register_kind(KindSpec(
    "entity", "entity.xml.j2", "nominal", "entity", parse_entity, "majority",
    [a for _, a in ENTITY_LABELS],
    {"entity": "dosa", "category": "food", "culture_name": "India", "item_key": "entity:x"},
    lambda label: _res("association", "entity", [label]), apply_entity_table_decisions))
register_kind(KindSpec(
    "translation", "translation.xml.j2", "ordinal", "translation", _parse_likert("score"), "median",
    ["1", "2", "3", "4", "5"],
    {"source": "a photo of rice", "translation": "ご飯の写真", "source_language": "en", "language": "ja",
     "item_key": "translation:x"},
    lambda label: _res("score", "translation", [str(int(float(label)))])))

CONTEXT_LABELS = [f"{k}/{s}" for k in ("grounded", "neutral") for _, s in SENTIMENT_LABELS] + ["qa", "reject"]


def _context_result(label: str) -> list:
    kind, _, sent = label.partition("/")
    return _res("kind", "context", [kind]) + (_res("sentiment", "context", [sent]) if sent else [])


register_kind(KindSpec(
    "context", "context.xml.j2", "nominal", "context", parse_context, "majority", CONTEXT_LABELS,
    {"text": "京都で[MASK]を食べた。美味しかった！", "english": "I ate [MASK] in Kyoto. It was delicious!",
     "type": "food", "language_name": "Japanese", "item_key": "context:ctx-1"},
    _context_result, apply_context_decisions, partial_labels=["grounded", "neutral"]))

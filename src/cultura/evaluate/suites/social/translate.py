"""cultura's own translation step for the prompt inventories of the social-bias audit (seed 003).

Seed 003 App. F gives the English inventory in full but other languages only in part (the communion prompts
of a few languages; see ``cultura/data/inventories/``). :func:`translate_inventory` fills the gaps: every
section of the English inventory that a language lacks is translated by the project's LLM (prompt
``templates/prompts/inventory_translation.j2``, cultura's own), the reply is checked — same labels, same
number of antonym pairs in the same order, every ``{placeholder}`` kept, no empty or identical poles — and
the sections that pass are written to ``<project>/inventories/<lang>.toml`` in the layout of
``data/inventories/en.toml`` with ``validated = "unvalidated"`` and ``source = "llm:<model>"``.
:func:`cultura.evaluate.suites.social.data.load_inventory` picks the file up (a project section replaces the
built-in one) and :func:`~cultura.evaluate.suites.social.data.inventory_status` reports it ``unvalidated`` until the
``translation`` annotation campaign (seed 003 App. E; items from ``cultura social translation-items``) has
rated its prompts.

A section whose reply fails the checks (after the LLM's own retries with the error) is a ``failed`` row with
its reason and the ``llm_calls`` id; it is never written, and a rerun tries it again. Sections already
present are ``skipped`` unless ``overwrite=True``, so a rerun resumes.

>>> sorted(placeholders("photo of a {GXR}/ {criminal} person").elements())
['{GXR}', '{criminal}']
"""
from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import tomli_w
from pydantic import BaseModel, model_validator

from ....db import now
from ....errors import unknown
from ....files import write_atomic
from ....models.llm import LLM, call_outcome
from .data import (SECTIONS, SOURCE_LANGUAGE, SocialDataError, available_languages, inventory_status, load_inventory,
                   translation_items)

if TYPE_CHECKING:
    from ....project import Project

STAGE = "social.translate"
TEMPLATE = "inventory_translation.j2"
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def placeholders(text: str) -> Counter:
    """The ``{…}`` placeholders of a prompt, with their counts (``{}``, ``{group}`` …)."""
    return Counter(_PLACEHOLDER.findall(text or ""))


class InventoryTranslation(BaseModel):
    """The LLM's reply for one section: translated prompts by English label (labels outside any antonym
    pair) and translated ``[positive, negative]`` pairs in the English order. Subclassed per section by
    :func:`reply_schema`, whose checks make the LLM retry with the error."""

    prompts: dict[str, str] = {}
    pairs: list[list[str]] = []

    expected_prompts: ClassVar[dict[str, str]] = {}
    expected_pairs: ClassVar[list[tuple[str, str]]] = []

    @model_validator(mode="after")
    def _check(self):
        problems = check_translation(self.expected_prompts, self.expected_pairs, self.prompts, self.pairs)
        if problems:
            raise ValueError("; ".join(problems))
        return self


def reply_schema(prompts: dict[str, str], pairs: list[tuple[str, str]]) -> type[InventoryTranslation]:
    """A reply model that accepts only a faithful-shape translation of these English prompts and pairs."""
    return type("InventoryTranslation", (InventoryTranslation,),
                {"expected_prompts": dict(prompts), "expected_pairs": list(pairs), "__module__": __name__})


def check_translation(src_prompts: dict[str, str], src_pairs: list[tuple[str, str]],
                      prompts: dict[str, str], pairs: list[list[str]]) -> list[str]:
    """Problems of a translated section (empty list when it can be used): missing or extra labels, a wrong
    number of pairs or poles, an empty caption, a lost or invented placeholder, identical poles.

    >>> check_translation({"a": "photo of {}"}, [], {"a": "foto de"}, [])
    ["'a' lost placeholder(s) {} (translate the words around a placeholder, keep it as written)"]
    """
    problems = []
    missing = [k for k in src_prompts if k not in prompts]
    extra = [k for k in prompts if k not in src_prompts]
    if missing:
        problems.append(f"missing label(s) {', '.join(missing)} in 'prompts'")
    if extra:
        problems.append(f"unexpected label(s) {', '.join(extra)} in 'prompts' (use the English labels as keys)")
    if len(pairs) != len(src_pairs):
        problems.append(f"'pairs' has {len(pairs)} pair(s), expected {len(src_pairs)} in the English order")
    checks = [(repr(k), src_prompts[k], prompts[k]) for k in src_prompts if k in prompts]
    for i, (src, got) in enumerate(zip(src_pairs, pairs), 1):
        if len(got) != 2:
            problems.append(f"pair {i} has {len(got)} caption(s), expected [positive, negative]")
            continue
        if got[0].strip() and got[0].strip() == got[1].strip():
            problems.append(f"pair {i} translates both poles identically ({got[0]!r})")
        checks += [(f"pair {i} positive", src[0], got[0]), (f"pair {i} negative", src[1], got[1])]
    for where, src, got in checks:
        if not str(got).strip():
            problems.append(f"{where} is empty")
            continue
        want, have = placeholders(src), placeholders(got)
        if want - have:
            problems.append(f"{where} lost placeholder(s) {' '.join(sorted((want - have).elements()))} "
                            "(translate the words around a placeholder, keep it as written)")
        if have - want:
            problems.append(f"{where} has placeholder(s) {' '.join(sorted((have - want).elements()))} that the "
                            "English prompt does not have")
    return problems


def _split(prompts: dict[str, str], pairs: list[tuple[str, str]]):
    """English prompts outside any pair, and the pairs as (positive prompt, negative prompt)."""
    paired = {x for p in pairs for x in p}
    return ({k: v for k, v in prompts.items() if k not in paired},
            [(prompts[a], prompts[b]) for a, b in pairs])


def _language(project: Project, language: str):
    langs = project.registry.languages
    if language not in langs:
        raise unknown("language", language, langs,
                      hint="Use an ISO 639-1 code of the country registry, or add the language to a registry file.")
    return langs[language]


def _existing(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise SocialDataError(f"{path} is not valid TOML ({e}). Fix or remove it before translating.") from None


def _write(path: Path, language, data: dict, model: str) -> None:
    header = (f"# Prompt inventory: {language.name} ({language.code}).\n"
              f"# Written by 'cultura social translate-inventory' (model {model}, {now()}): sections translated\n"
              "# from the English inventory (seed 003 App. F) by cultura's own translation step. Unvalidated\n"
              "# until the 'translation' annotation campaign (seed 003 App. E) has rated every prompt:\n"
              f"#   cultura social translation-items {language.code} --out items.jsonl\n\n")
    write_atomic(path, header + tomli_w.dumps(data))


def export_translation_items(project: Project, language: str, path, *, overwrite: bool = False) -> dict:
    """Write the translation campaign's items of ``language`` (:func:`translation_items`) to ``path`` as JSON
    Lines (push them with ``cultura annotate push translation --from FILE``); an existing ``path`` is refused
    unless ``overwrite``. Returns ``{"language", "items", "path"}``."""
    items = translation_items(project, language)
    lines = "".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items)
    write_atomic(path, lines, overwrite=overwrite)
    return {"language": language, "items": len(items), "path": str(path)}


def translate_inventory(project: Project, language: str, *, model: str | None = None, sections=None,
                        overwrite: bool = False, llm=None) -> dict:
    """Translate the English inventory's sections that ``language`` lacks (all of them with ``overwrite``)
    and write them to ``<project>/inventories/<language>.toml``.

    ``sections`` limits the work to some sections (names of :data:`~cultura.evaluate.suites.social.data.SECTIONS`);
    ``llm`` is a :class:`cultura.models.llm.LLM` to use instead of one built from the project's config.
    Returns ``{"language", "model", "path", "written", "sections": [{"section", "status", "reason",
    "n_prompts", "llm_call"}], "counts", "validation"}`` — status ``ok`` / ``failed`` / ``skipped``;
    ``validation`` is the inventory's status afterwards (``unvalidated`` until translation decisions exist;
    ``missing`` when the language still has no inventory because every section failed).
    """

    if language == SOURCE_LANGUAGE:
        raise SocialDataError(f"'{SOURCE_LANGUAGE}' is the source language of the inventories; pass the language "
                              "to translate into (e.g. de).")
    lang = _language(project, language)
    wanted = list(SECTIONS) if not sections else list(dict.fromkeys(sections))
    for s in wanted:
        if s not in SECTIONS:
            raise unknown("inventory section", s, SECTIONS)
    src = load_inventory(project, SOURCE_LANGUAGE)
    have = load_inventory(project, language).sections if language in available_languages(project) else {}
    path = Path(project.root) / "inventories" / f"{language}.toml"
    old = _existing(path)
    english = _english_blocks()
    client = llm if llm is not None else LLM(project, model=model)
    model_name = client.model
    rows, done = [], {}
    for s in wanted:
        row = {"section": s, "status": "skipped", "reason": None, "n_prompts": 0, "llm_call": None}
        rows.append(row)
        en = src.sections.get(s)
        if not en:
            row["reason"] = "the English inventory has no such section"
            continue
        if have.get(s) and not overwrite:
            row.update(reason="already in the inventory (use overwrite to translate it again)", n_prompts=len(have[s]))
            continue
        en_pairs = src.pairs.get(s, [])
        single, pair_texts = _split(en, en_pairs)
        description = str(english.get(s, {}).get("description", ""))
        parsed, call_id = client.json_call(
            stage=STAGE, template=TEMPLATE, schema=reply_schema(single, pair_texts),
            variables={"language": lang, "section": s, "description": description, "prompts": single,
                       "pairs": [list(p) for p in pair_texts]})
        row["llm_call"] = call_id
        if parsed is None:
            err = call_outcome(project.db, call_id)
            why = str(err[0] or "no reply").replace("root: Value error, ", "")
            row.update(status="failed", reason=f"LLM reply rejected after {err[1]} attempt(s): {why}")
            continue
        prompts = {k: v.strip() for k, v in parsed.prompts.items()}
        for (a, b), (pa, pb) in zip(en_pairs, parsed.pairs):
            prompts[a], prompts[b] = pa.strip(), pb.strip()
        block = {"description": description} if description else {}
        block["source"] = f"llm:{model_name}"
        if en_pairs:
            block["pairs"] = [[a, b] for a, b in en_pairs]
        block["prompts"] = {k: prompts[k] for k in en}   # English label order
        done[s] = block
        row.update(status="ok", n_prompts=len(en))
        # written after every section, so an interrupted run keeps what it has
        _write(path, lang, _merge(old, done, language, model_name), model_name)
    counts = dict(Counter(r["status"] for r in rows))
    validation = (inventory_status(project, language) if language in available_languages(project)
                  else {"language": language, "status": "missing", "axes": [], "n_prompts": 0})
    return {"language": language, "model": model_name, "path": str(path), "written": bool(done),
            "sections": rows, "counts": counts, "validation": validation}


def _merge(old: dict, done: dict, language: str, model: str) -> dict:
    """The file's new content: the translated sections, the old file's other sections (each keeping its
    source) and any other tables the old file had, in the layout of ``data/inventories/en.toml``."""
    data = {"language": language, "validated": "unvalidated", "source": f"llm:{model}"}
    old_source = str(old.get("source", ""))
    for s in SECTIONS:
        if s in done:
            data[s] = done[s]
        elif isinstance(old.get(s), dict):
            data[s] = dict(old[s])
            if old_source and "source" not in data[s]:
                data[s]["source"] = old_source   # keep where a kept section came from
    for k, v in old.items():
        if k not in data and k not in ("language", "validated", "source"):
            data[k] = v
    return data


def _english_blocks() -> dict:
    """The built-in English inventory file (for the sections' descriptions)."""
    text = resources.files("cultura.data").joinpath("inventories", f"{SOURCE_LANGUAGE}.toml").read_text("utf-8")
    return tomllib.loads(text)

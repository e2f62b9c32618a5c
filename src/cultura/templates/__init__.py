"""The one Jinja environment of cultura, over this package: ``prompts/`` (LLM prompts), ``labelstudio/``
(Label Studio labeling configs), ``report/`` (the HTML report), ``dataset_card.md.j2`` and ``guidelines/``.

Variables are strict (a missing one is an error); only HTML templates (``*.html.j2``) are autoescaped.
Prompts and Label Studio configs render whitespace exactly as written (a prompt is verbatim text); document
templates (the report, the dataset card) render through an overlay of the same environment that trims block
lines.

"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import CulturaError, unknown
from ..lazy import lazy

jinja2 = lazy("jinja2")  # imported by the first template rendered (start-up: a command that renders none)


def _load(name: str) -> str:
    node = resources.files(__name__)
    for part in name.split("/"):
        node = node.joinpath(part)
    if not node.is_file():
        raise jinja2.TemplateNotFound(name)
    return node.read_text("utf-8")


@lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    """The shared environment (built once)."""
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_load), undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2", "html"), default_for_string=False,
                                            default=False),
    )


@lru_cache(maxsize=None)
def _document_environment() -> jinja2.Environment:
    return environment().overlay(trim_blocks=True, lstrip_blocks=True)


VERBATIM_FOLDERS = ("prompts/", "labelstudio/")


def template_names(folder: str) -> list[str]:
    """The template files in ``folder`` (e.g. ``"prompts"``)."""
    return sorted(p.name for p in resources.files(__name__).joinpath(folder).iterdir() if p.is_file())


def render_template(name: str, **variables: Any) -> str:
    """Render template ``name`` (a path under this package, e.g. ``"prompts/image_tagging.j2"``)."""
    folder, _, base = name.rpartition("/")
    try:
        env = environment() if name.startswith(VERBATIM_FOLDERS) else _document_environment()
        return env.get_template(name).render(**variables)
    except jinja2.TemplateNotFound:
        raise unknown("template", base, template_names(folder or ".")) from None
    except jinja2.UndefinedError as e:
        raise CulturaError(f"Template {name} needs a variable that was not given ({e}).") from None

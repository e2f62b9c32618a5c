"""The front door: open a project and work through it, the command line's groups as handles.

>>> import cultura, tempfile
>>> p = cultura.init(tempfile.mkdtemp() + "/bench", countries=["US", "JP"])
>>> p.concepts.add("street food", "bus")["added"]
2
>>> [c["name"] for c in p.concepts.list(frame=False)]
['bus', 'street food']
>>> p.close()

:func:`init` creates a project, :func:`open` opens one (or the one around the working folder); the
:class:`Project` they return is the library's project (every library function takes it first) with one handle per
command group: ``p.concepts``, ``p.images``, ``p.annotate``, ``p.benchmarks``, ``p.imports``, ``p.evaluate``,
``p.view``. A handle's methods are the group's commands with the same words (``cultura images download --workers
8`` is ``p.images.download(workers=8)``) and return plain data: a dict for a summary, a pandas DataFrame where
the answer is a table (a list of dicts without pandas, or with ``frame=False``). Long stages take ``progress``: a
callable given each :class:`cultura.progress.Event` (``progress=print``), False, or None (silent unless the caller
set a reporter with :func:`cultura.progress.reporting`).
"""
from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any

from ..config import load_config
from ..config_edit import get_config_value, set_config_file_value
from ..benchmark.status import project_status
from ..errors import ProjectNotFound
from ..project import CONFIG_NAME, find_project, init_project
from ..project import Project as _Folder
from .annotation import Annotate
from .benchmarks import Benchmarks, Imports
from .curation import Concepts, Images
from .evaluation import Evaluate, View


class Project(_Folder):
    """A cultura project, opened: its folder, configuration and database, and the handles of its work.

    ``root``, ``config`` (the typed ``cultura.toml``), ``db`` (sqlite-utils, opened on first use) and
    ``countries`` are the folder's; the handles delegate to the library, so ``p.images.download()`` does what
    ``cultura images download`` does. Use it as a context manager, or call :meth:`close`, to release the
    database."""

    @cached_property
    def concepts(self) -> Concepts:
        """Concepts, their native terms and search queries (``cultura concepts``)."""
        return Concepts(self)

    @cached_property
    def images(self) -> Images:
        """Search, download, de-duplicate, tag and review images (``cultura images``)."""
        return Images(self)

    @cached_property
    def annotate(self) -> Annotate:
        """Label Studio, annotators, campaigns, push, pull and adjudication (``cultura annotate``)."""
        return Annotate(self)

    @cached_property
    def benchmarks(self) -> Benchmarks:
        """Build, list and export benchmarks (``cultura build``, ``cultura export``)."""
        return Benchmarks(self)

    @cached_property
    def imports(self) -> Imports:
        """Existing datasets into the project (``cultura import``)."""
        return Imports(self)

    @cached_property
    def evaluate(self) -> Evaluate:
        """Run suites over models, read results, write the report (``cultura evaluate``)."""
        return Evaluate(self)

    @cached_property
    def view(self) -> View:
        """The browsable static site of the project (``cultura view``)."""
        return View(self)

    def status(self) -> dict[str, Any]:
        """Counts per stage, per country and per concept, and failures by reason (``cultura status``)."""
        return project_status(self)

    def get_config(self, key: str | None = None) -> Any:
        """A value of ``cultura.toml`` by its dotted key (``"download.workers"``), a section, or everything."""
        return get_config_value(self.config, key)

    def set_config(self, key: str, value: Any, *, add: bool = False) -> dict[str, Any]:
        """Change ``cultura.toml`` (checked exactly like the file; its comments kept) and reload it here.
        ``add``: append ``value`` to a list setting instead of replacing it."""
        res = set_config_file_value(self.root / CONFIG_NAME, key, _config_text(value), add=add)
        self.config = load_config(self.root / CONFIG_NAME)
        return res

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _config_text(value: Any) -> str:
    """A Python value as ``cultura config set`` reads it from the command line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def init(path: str | os.PathLike[str], *, countries: list[str] | str | None = None, preset: str | None = None,
         name: str | None = None, overwrite: bool = False) -> Project:
    """Create a project in ``path`` (``cultura init``): ``countries`` as codes (``["US", "JP"]`` or
    ``"US,JP"``) and/or a ``preset`` of a seed paper (``"3xcm"``). An existing project's configuration is
    rewritten only with ``overwrite`` (its database is kept)."""
    folder = init_project(Path(path), countries=countries, preset=preset, name=name, overwrite=overwrite)
    folder.close()
    return Project(folder.root)


def open(path: str | os.PathLike[str] | None = None) -> Project:  # noqa: A001 - cultura.open, like io.open
    """Open the project in ``path``; without one, the project of ``$CULTURA_PROJECT`` or of the nearest folder
    up from the working one (as the command line finds it)."""
    if path is None:
        return Project(find_project().root)
    if not (Path(path) / CONFIG_NAME).exists():
        raise ProjectNotFound(f"{path} has no {CONFIG_NAME}. Create the project first with "
                              f"cultura.init({str(path)!r}, countries=[...]).")
    return Project(Path(path))


__all__ = ["Project", "init", "open", "Concepts", "Images", "Annotate", "Benchmarks", "Imports", "Evaluate", "View"]

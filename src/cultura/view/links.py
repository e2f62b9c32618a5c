"""Addresses into the view, for other areas: light (imports nothing), so the report and the dataset card can
link into ``reports/view/`` without importing the view builder.

>>> view_href("cluster", 12)
'view/go.html#cluster-12'
>>> anchor("trial", "xcm", 1, "0-JP-1")
'trial-xcm-v1-0-JP-1'
"""
from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def anchor(kind: str, *parts) -> str:
    """The stable anchor of a cluster (``anchor("cluster", id)``), a flag (``anchor("flag", sha256)``), a
    trial (``anchor("trial", benchmark name, version, item key)``) or an annotation item
    (``anchor("item", item key)``): letters, digits, ``_ . -`` only."""
    if kind == "trial" and len(parts) == 3:
        parts = (parts[0], f"v{parts[1]}", parts[2])
    return "-".join([kind, *(_UNSAFE.sub("_", str(p)) for p in parts)])


def view_href(kind: str, *parts, base: str = "view/") -> str:
    """A link to that thing in the view, relative to ``reports/`` by default (where the evaluation report
    lives); ``base`` is the view folder's address as seen from the linking page."""
    return f"{base}go.html#{anchor(kind, *parts)}"


def view_page(name: str, base: str = "view/") -> str:
    """A link to one page of the view (``"pool.html"``, ``"dups-1.html"``, ``"flags-1.html"``,
    ``"benchmarks.html"``), relative to ``reports/`` by default."""
    return f"{base}{name}"


def inspect_note(base: str = "reports/view/") -> str:
    """One line for a dataset card's "how to inspect" section."""
    return (f"To inspect the images, duplicate sets, culture-conflict flags and every trial with its candidates, "
            f"run `cultura view` in the project (it writes a static site to `{base}index.html`; open it in a "
            f"browser, or `cultura view --serve` for a local server on 127.0.0.1).")

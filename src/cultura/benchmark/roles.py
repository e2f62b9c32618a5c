"""The role rules of each benchmark kind (data, not code): which concept and cultures each candidate of a trial
must and must not have. Read by the build (:mod:`.build`) and by the one check of a stored version (:mod:`.verify`).

>>> [r.name for r in KINDS["association"]]
['cr', 'lb', 'ti']
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Role:
    """One candidate role: ``same`` concept as the query or another one; the culture it must have
    (``require``: 'L' or 'D' or None) and the cultures it must not have (``forbid``)."""

    name: str
    same: bool
    require: str | None = None
    forbid: tuple[str, ...] = ()


KINDS: dict[str, tuple[Role, ...]] = {
    "association": (
        Role("cr", True, None, ("L",)),
        Role("lb", False, "L", ()),
        Role("ti", False, None, ("L",)),
    ),
    "descriptor": (
        Role("cr", True, "D", ("L",)),
        Role("orlb", True, "L", ("D",)),
        Role("or", True, None, ("L", "D")),
        Role("cdr", False, "D", ("L",)),
        Role("lb", False, "L", ("D",)),
        Role("ti", False, None, ("L", "D")),
    ),
}

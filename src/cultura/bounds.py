"""The range of every number that comes from outside, declared once.

A :class:`Bound` says which numbers an argument takes (an integer or a finite real number between two limits).
The same declaration checks the library argument (``SEED.check(seed, "seed")`` raises :class:`OutOfRange`, a
:class:`~cultura.errors.ConfigError` naming the argument), types the command-line option that sets it
(``cultura.cli.console.bounded(SEED)``: click refuses ``--seed -1`` with one sentence before anything runs)
and checks the suites' ``--option KEY=VALUE`` values (each suite lists its numeric options with their bounds).
Every limit is finite: nothing bigger than SQLite's (and numpy's) 64-bit integers, no nan or infinity, and
caps that keep memory sane where a number sizes an allocation (bootstrap resamples).

A setting of cultura.toml already carries its range (``Field(ge=…, le=…)``); :func:`from_field` reads it,
so an option that overrides a setting is checked exactly like the setting.

>>> SEED.check(7, "seed")
7
>>> SEED.check(-1, "seed")
Traceback (most recent call last):
...
cultura.bounds.OutOfRange: seed must be an integer from 0 to 4294967295; got -1.
>>> Bound(0, 1, float).check(float("nan"), "alpha")
Traceback (most recent call last):
...
cultura.bounds.OutOfRange: alpha must be a number from 0 to 1; got nan.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import ConfigError

#: The largest integer SQLite (and numpy's int64) can hold.
INT64_MAX = 2**63 - 1
#: The largest finite float a bound may name when a setting states no upper limit.
FLOAT_MAX = 1e15


class OutOfRange(ConfigError, ValueError):
    """A number outside the range its argument takes (or no number at all): an invalid option."""


def _shown(value) -> str:
    """``value`` as the message quotes it, short whatever its size (a 5,000-digit integer has no ``str``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > 200:
            return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
        return str(value)
    if isinstance(value, float):
        return repr(value)
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _num(x) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return str(x)


@dataclass(frozen=True)
class Bound:
    """The numbers an argument takes: ``kind`` ``int`` (whole numbers) or ``float`` (finite real numbers)
    from ``low`` to ``high``; ``open_low``: ``low`` itself excluded (a timeout above 0). ``many``: a list of
    such numbers (``ks=[5, 10]``). ``optional``: None (or the text ``"none"``) is also accepted, meaning the
    argument's "off"."""

    low: int | float
    high: int | float
    kind: type = int
    open_low: bool = False
    many: bool = False
    optional: bool = False

    def __post_init__(self):
        if self.kind not in (int, float):
            raise ValueError("a Bound's kind is int or float")
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.low > self.high:
            raise ValueError(f"a Bound needs finite limits low <= high (got {self.low}, {self.high})")
        if self.kind is int and not (-INT64_MAX - 1 <= self.low and self.high <= INT64_MAX):
            raise ValueError("an integer Bound stays within SQLite's 64-bit integers")

    def describe(self) -> str:
        """The range in words: ``an integer from 0 to 4294967295``, ``a number above 0 and at most 86400``."""
        lim = (f"above {_num(self.low)} and at most {_num(self.high)}" if self.open_low
               else f"from {_num(self.low)} to {_num(self.high)}")
        if self.many:
            text = f"a list of {'integers' if self.kind is int else 'numbers'}, each {lim}"
        else:
            text = f"{'an integer' if self.kind is int else 'a number'} {lim}"
        return text + (" (or none)" if self.optional else "")

    def short(self) -> str:
        """The range as ``--help`` shows it: ``0<=x<=4294967295``, or ``x>=1`` up to SQLite's integers."""
        op = "<" if self.open_low else "<="
        if self.kind is int and self.high == INT64_MAX:
            return f"x{op.replace('<', '>')}{_num(self.low)}"
        return f"{_num(self.low)}{op}x<={_num(self.high)}"

    def contains(self, value) -> bool:
        """Whether ``value`` (a number) is in the range."""
        try:
            self.check(value, "value")
        except OutOfRange:
            return False
        return True

    def _one(self, value, name: str, whole):
        bad = OutOfRange(f"{name} must be {self.describe()}; got {_shown(whole)}.", param=name)
        if isinstance(value, bool) or value is None:
            raise bad
        if isinstance(value, str):
            text = value.strip()
            try:
                value = int(text) if self.kind is int else float(text)
            except ValueError:  # not a number, or an integer too long to read
                raise bad from None
        if hasattr(value, "item") and not isinstance(value, (int, float)):  # numpy scalars
            value = value.item()
        if self.kind is int:
            if isinstance(value, float):
                if not (math.isfinite(value) and value.is_integer()):
                    raise bad
                value = int(value)
            if not isinstance(value, int):
                raise bad
        else:
            if not isinstance(value, (int, float)):
                raise bad
            if isinstance(value, int) and abs(value) > 2**1000:
                raise bad
            value = float(value)
            if not math.isfinite(value):
                raise bad
        if value < self.low or value > self.high or (self.open_low and value == self.low):
            raise bad
        return value

    def check(self, value, name: str):
        """``value`` converted to the kind (``"5"`` → 5, ``5.0`` → 5 for an integer), or :class:`OutOfRange`
        naming ``name`` (the library argument, passed on as the error's ``param``) and the range."""
        if self.optional and (value is None or (isinstance(value, str) and value.strip().lower() == "none")):
            return None
        if self.many:
            if not isinstance(value, (list, tuple)):
                raise OutOfRange(f"{name} must be {self.describe()}; got {_shown(value)}.", param=name)
            return [self._one(v, name, value) for v in value]
        return self._one(value, name, value)

    def check_optional(self, value, name: str):
        """:meth:`check`, letting None (the argument's default) through."""
        return None if value is None else self.check(value, name)


def from_field(model, name: str) -> Bound:
    """The :class:`Bound` of setting ``name`` of the pydantic ``model`` (a cultura.toml section): its
    ``ge``/``gt``/``le``/``lt`` limits, capped at SQLite's integers (or :data:`FLOAT_MAX`) where it states none."""
    field = model.model_fields[name]
    kind = float if float in _types(field.annotation) else int
    low, high, open_low = None, None, False
    for m in field.metadata:
        if getattr(m, "ge", None) is not None:
            low = m.ge
        if getattr(m, "gt", None) is not None:
            low, open_low = m.gt, True
        if getattr(m, "le", None) is not None:
            high = m.le
        if getattr(m, "lt", None) is not None:
            high = m.lt
    cap = INT64_MAX if kind is int else FLOAT_MAX
    return Bound(-cap if low is None else low, cap if high is None else high, kind, open_low=open_low)


def _types(annotation) -> tuple:
    args = getattr(annotation, "__args__", None)
    return tuple(args) if args else (annotation,)


#: A random seed: what numpy's legacy seeding and every RNG cultura uses accept.
SEED = Bound(0, 2**32 - 1)
#: A number of things to take at most (``--limit``): SQLite's LIMIT takes a 64-bit integer.
COUNT = Bound(1, INT64_MAX)
#: A number of things that may be none (``--gold 0``).
COUNT_OR_NONE = Bound(0, INT64_MAX)
#: A row id (an evaluation run) or a benchmark version.
ROW_ID = Bound(1, INT64_MAX)
VERSION = Bound(1, INT64_MAX)
#: A TCP port on 127.0.0.1; 0 asks the system for a free one.
PORT = Bound(0, 65535)
#: A probability.
PROBABILITY = Bound(0, 1, float)
#: Items per model call: a batch of a million inputs is already more than any accelerator holds.
BATCH_SIZE = Bound(1, 1_000_000)
#: Bootstrap (or permutation) resamples: each is a row of indices as long as the sample, so a million is the cap.
N_RESAMPLES = Bound(1, 1_000_000)

__all__ = ["Bound", "OutOfRange", "from_field", "INT64_MAX", "SEED", "COUNT", "COUNT_OR_NONE", "ROW_ID",
           "VERSION", "PORT", "PROBABILITY", "BATCH_SIZE", "N_RESAMPLES"]

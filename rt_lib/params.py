"""One base for every notebook's parameters.

A notebook's ``parameters`` cell holds plain assignments (papermill injects other profiles after
it); its second cell builds the experiment's :class:`Params` subclass from them in one call,
:meth:`Params.from_namespace`.  Building checks every value against the field's type, naming the
parameter and what it expects (``lr must be a number, got 'abc'``), turns YAML/papermill lists
into tuples, and then runs the subclass's own :meth:`Params.check` (ranges, known names).

The defaults of a subclass are the experiment's CPU profile; ``configs/<profile>/`` holds the
others.  :meth:`Params.changes_from` says which fields differ from a profile's, which is what
names an exploration run's results folder (:mod:`rt_lib.experiments.registry`).
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from typing import Any, ClassVar, Literal, get_args, get_origin

_NONE = type(None)
_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string",
          dict: "a mapping"}
_PLURAL = {int: "integers", float: "numbers", str: "strings", bool: "true/false values"}


def describe(hint: Any) -> str:
    """What a value of type ``hint`` must be, in words."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("None" if a is _NONE else describe(a) for a in args)
    if origin is tuple:
        return f"a list of {_PLURAL.get(args[0], describe(args[0]))}"
    if origin is Literal:
        return f"one of {list(args)}"
    if origin is dict:
        return "a mapping"
    return _NAMES.get(hint, getattr(hint, "__name__", str(hint)))


def coerce(name: str, value: Any, hint: Any) -> Any:
    """``value`` as a field of type ``hint`` (lists become tuples, integers numbers), or a
    :class:`TypeError` naming the parameter, the type it expects and the value given (a
    :class:`ValueError` for an infinite or NaN number)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and _NONE in args:
            return None
        for arg in args:
            if arg is _NONE:
                continue
            try:
                return coerce(name, value, arg)
            except TypeError:
                continue
    elif origin is tuple and isinstance(value, (list, tuple)):
        item = args[0] if args else Any
        return tuple(coerce(f"{name}[{i}]", v, item) for i, v in enumerate(value))
    elif origin is Literal:
        if value in args:
            return value
        raise TypeError(f"{name} must be one of {list(args)}, got {value!r}")
    elif hint is bool or origin is None and hint in (int, str, dict):
        if isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):  # YAML's .inf and .nan parse as floats
                raise ValueError(f"{name} must be a finite number, got {value!r}")
            return float(value)
    elif origin is dict and isinstance(value, dict):
        return value
    raise TypeError(f"{name} must be {describe(hint)}, got {value!r}")


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@dataclass(frozen=True)
class Params:
    """Base of every experiment's parameters (a frozen dataclass; subclasses add fields)."""

    #: fields that never change what a run computes or where it is stored (e.g. threads)
    BOOKKEEPING: ClassVar[tuple[str, ...]] = ("threads",)
    #: the smoke test of a profile (``./run_all.sh --profile paper --smoke``): what it cuts from
    #: the profile's values so that the notebook runs end to end in seconds at the profile's
    #: shapes (steps, evaluation sets, batch sizes, restarts; never a width, vocabulary, length or
    #: depth).  Each cut applies where the profile's config names the parameter (a paper config
    #: names every parameter of its notebook); a number is an upper bound (a profile already
    #: below it keeps its value), any other value replaces the profile's.
    SMOKE: ClassVar[dict[str, Any]] = {}

    def __post_init__(self) -> None:
        hints = _hints(type(self))
        for f in fields(self):
            object.__setattr__(self, f.name, coerce(f.name, getattr(self, f.name), hints[f.name]))
        self.check()

    def check(self) -> None:
        """Ranges, allowed names, cross-field rules: raise ValueError naming the parameter."""

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_namespace(cls, namespace: Mapping[str, Any]):
        """Build from a notebook's variables (its ``parameters`` cell): every field found there."""
        return cls(**{name: namespace[name] for name in cls.names() if name in namespace})

    @classmethod
    def smoke_config(cls, config: Mapping[str, Any]) -> dict[str, Any]:
        """A profile's ``config`` (its YAML values) with the smoke cuts (:attr:`SMOKE`) applied."""
        out = dict(config)
        for key, cut in cls.SMOKE.items():
            if key in out:
                now = out[key]
                out[key] = min(now, cut) if _is_number(now) and _is_number(cut) else cut
        return out

    def changes_from(self, other: Params) -> dict[str, Any]:
        """{field: this value} for every field that differs from ``other`` (bookkeeping aside)."""
        return {name: getattr(self, name) for name in self.names()
                if name not in self.BOOKKEEPING and getattr(self, name) != getattr(other, name)}

    def as_plain(self) -> dict[str, Any]:
        """Every field as YAML-friendly values (tuples as lists)."""
        return {name: plain(getattr(self, name)) for name in self.names()}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def check_positive_ints(name: str, values: Any) -> None:
    """A non-empty list of positive integers (or one, given as a one-item list)."""
    if not values or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in values):
        raise ValueError(f"{name}={list(values)!r} must be a non-empty list of positive integers")

"""One base for every notebook's parameters.

A notebook's ``parameters`` cell holds plain assignments (papermill injects other profiles after
it); its second cell builds the experiment's :class:`Params` subclass from them in one call,
:meth:`Params.from_namespace`.  Building checks every value against the field's type, naming the
parameter and what it expects (``lr must be a number, got 'abc'``), turns YAML/papermill lists
into tuples, and then runs the subclass's own :meth:`Params.check` (ranges, known names).

The defaults of a subclass are the experiment's CPU profile; ``configs/<profile>/`` holds the
others.  :meth:`Params.changes_from` says which fields differ from a profile's, which is what
names an exploration run's results folder (:mod:`rt_lib.experiment`).
"""

from __future__ import annotations

import math
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from functools import cache
from typing import Any, ClassVar, Literal, get_args, get_origin

import yaml

_NONE = type(None)
_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string",
          dict: "a mapping"}
_PLURAL = {int: "integers", float: "numbers", str: "strings", bool: "true/false values"}


class _CommandLineLoader(yaml.SafeLoader):
    """YAML as people type values on a command line: Python's notation for numbers too."""


# YAML 1.1 reads a float only with a dot and a signed exponent ("1.0e-3"): "1e-3", "3E5" and
# "1.0e9" are strings to it.  Plain scalars in Python's notation are numbers here; quoted ones
# stay strings ("'1e3'").  1_000 is an int to YAML 1.1 already.
_NUMBER_TAG = "tag:rt-companion,2026:number"
_CommandLineLoader.add_implicit_resolver(
    _NUMBER_TAG, re.compile(r"^[-+]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)[eE][-+]?\d+$"),
    list("-+0123456789."))


def _number(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | float:
    """``1e-3`` a float; written without a dot and whole (``3E5``, ``1e4``), an integer: it is
    how one types a count of epochs or steps."""
    text = loader.construct_scalar(node).replace("_", "")
    value = float(text)
    return int(value) if "." not in text and value.is_integer() else value


_CommandLineLoader.add_constructor(_NUMBER_TAG, _number)


def load_value(text: str) -> Any:
    """A parameter value typed on the command line (``--set key=value``): YAML, with numbers in
    Python's notation (``1e-3``, ``3E5``, ``1_000``) read as numbers."""
    return yaml.load(text, Loader=_CommandLineLoader)  # noqa: S506 - a SafeLoader subclass


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
        return "a mapping" + (f" with {_PLURAL.get(args[0], describe(args[0]))} as keys"
                              if args and args[0] is not Any else "")
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
        key, item = args or (Any, Any)
        return {coerce(f"{name}'s key", k, key): coerce(f"{name}[{k!r}]", v, item)
                for k, v in value.items()}
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
    #: fields the notebook's parameters cell leaves out (:func:`parameters_cell`): knobs of the
    #: profiles' configs only, or fields a shared base declares that this notebook does not use
    CELL_OMITS: ClassVar[frozenset[str]] = frozenset()
    #: list fields whose entries name runs (widths, models, seeds): a repeated entry would train
    #: the same run twice and count it as two restarts, so it is refused, naming the field
    DISTINCT: ClassVar[tuple[str, ...]] = ()

    def smaller_than_paper(self) -> str | None:
        """How the task these parameters make is smaller than the paper's, in words ("p = 37 of
        113", "3 of 10 digits"); None where it is the paper's task.  Every claim the notebook
        records carries it (its ``task_size``): a claim on a reduced task is never counted at the
        paper's scale.  Each experiment says; one that does not records ``unknown``."""
        raise NotImplementedError(f"{type(self).__name__} does not say how its task compares "
                                  "with the paper's")

    def __post_init__(self) -> None:
        hints = _hints(type(self))
        for f in fields(self):
            object.__setattr__(self, f.name, coerce(f.name, getattr(self, f.name), hints[f.name]))
        for name in self.DISTINCT:
            values = list(getattr(self, name) or ())
            repeated = sorted({repr(v) for v in values if values.count(v) > 1})
            if repeated:
                raise ValueError(f"{name}={values!r} repeats {', '.join(repeated)}: each entry names "
                                 "runs, and a repeated one would train the same runs again and "
                                 "count them twice; list each once")
        threads = getattr(self, "threads", None)
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or threads < 1):
            raise ValueError(f"threads={threads!r} must be a positive integer (torch threads per "
                             "notebook) or None ($RT_THREADS, else 1)")
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


def memory_bytes() -> int:
    """This machine's physical memory in bytes (0 where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def check_fits_in_memory(name: str, value: Any, nbytes: float, what: str) -> None:
    """Refuse a setting whose data alone (``nbytes``, ``what`` says which) would take more than
    half this machine's memory, before anything is built: naming the parameter."""
    total = memory_bytes()
    if total and nbytes > total / 2:
        raise ValueError(f"{name}={value!r} is too large for this machine: {what} alone would take "
                         f"about {nbytes / 2**30:,.1f} GiB of its {total / 2**30:,.0f} GiB")


def check_positive_ints(name: str, values: Any) -> None:
    """A non-empty list of positive integers (or one, given as a one-item list)."""
    if not values or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in values):
        raise ValueError(f"{name}={list(values)!r} must be a non-empty list of positive integers")


# ---- the notebook's parameters cell, written from its Params class -----------------------------
# The class is the one place of a notebook's defaults and their comments; the notebook's first
# code cell (tagged ``parameters``) is generated from it (scripts/parameters_cells.py), and a test
# fails when the two differ.  Editing the cell in a live notebook is exploring: its run goes to a
# folder of its own (rt_lib.experiment), since the class still says what the profile is.

CELL_WIDTH = 28  # the column the comments start at, as far as the assignments allow
CELL_LINE = 100  # a longer list or mapping is written one item per line


@cache
def _trailing_comments(klass: type) -> dict[str, str]:
    """{field: the comment after its definition, on the same line} in ``klass``'s own body."""
    import ast
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(klass))
    lines = source.splitlines()
    body = ast.parse(source).body[0].body
    out = {}
    for node in body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            # end_col_offset counts UTF-8 bytes
            tail = lines[node.end_lineno - 1].encode()[node.end_col_offset:].decode().strip()
            if tail.startswith("#"):
                out[node.target.id] = tail[1:].strip()
    return out


def _own_fields(klass: type) -> list[str]:
    return [name for name, hint in vars(klass).get("__annotations__", {}).items()
            if "ClassVar" not in str(hint)]


def field_comments(cls: type[Params]) -> dict[str, str]:
    """{field: its comment} as the most derived class that comments it says."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):  # base first: a subclass's comment replaces its base's
        if issubclass(klass, Params):
            out.update({k: v for k, v in _trailing_comments(klass).items()
                        if k in _own_fields(klass)})
    return out


def cell_fields(cls: type[Params]) -> list[str]:
    """The fields the parameters cell shows, in its order: those a class introduces before its
    base's (the notebook's own task first, then the shared ones), each class's in its order;
    :attr:`Params.CELL_OMITS` left out."""
    order: list[str] = []
    for klass in cls.__mro__:  # most derived first
        if issubclass(klass, Params):
            introduced = [n for n in _own_fields(klass) if not any(
                n in _own_fields(base) for base in klass.__mro__[1:] if issubclass(base, Params))]
            order += [n for n in introduced if n not in order]
    names = set(cls.names())
    return [n for n in order if n in names and n not in cls.CELL_OMITS]


def literal(value: Any) -> str:
    """``value`` as Python source in a parameters cell: lists for tuples, double-quoted strings,
    ``1e-05`` as ``1e-5``, thousands as ``10_000``."""
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return f"{value:_}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        text = repr(value)
        if 0 < abs(value) <= 0.01:  # learning rates and decays read as 1e-3, 5e-4
            text = f"{value:.6e}"
        if "e" in text:
            mantissa, exponent = text.split("e")
            mantissa = mantissa.rstrip("0").removesuffix(".") if "." in mantissa else mantissa
            return f"{mantissa}e{int(exponent)}"
        return text
    return repr(value)


def parameters_cell(cls: type[Params], module: str) -> str:
    """The source of a notebook's parameters cell: every shown field of ``cls`` (defined in
    ``module``, a path for the header) with its default and comment."""
    comments = field_comments(cls)
    defaults = {f.name: f.default_factory() if f.default_factory is not MISSING else f.default
                for f in fields(cls)}  # not built: building checks data paths (notebook 08)
    lines = [f"# Parameters: the CPU profile, written from {cls.__name__} ({module}) by",
             "# scripts/parameters_cells.py; changed here, a run is an exploration with a results folder",
             "# of its own. papermill injects other profiles after this cell."]
    for name in cell_fields(cls):
        value = plain(defaults[name])
        code = f"{name} = {literal(value)}"
        comment = comments.get(name)
        if len(code) > CELL_LINE and isinstance(value, (list, dict)) and value:
            # one item per line, the comment above: a long list or mapping stays readable
            items = ([f"    {literal(k)}: {literal(v)}," for k, v in value.items()]
                     if isinstance(value, dict) else [f"    {literal(v)}," for v in value])
            brackets = "{}" if isinstance(value, dict) else "[]"
            lines += [f"# {comment}"] if comment else []
            lines += [f"{name} = {brackets[0]}", *items, brackets[1]]
            continue
        lines.append(f"{code:<{CELL_WIDTH - 1}} # {comment}" if comment and len(code) < CELL_WIDTH - 1
                     else f"{code}  # {comment}" if comment else code)
    return "\n".join(lines)

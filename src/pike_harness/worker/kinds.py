"""Whether JSON that a less trusted process wrote holds the kind of value its reader expects.

Two readers use it: the supervisor, for the messages of the candidate's process (``REPORT_FIELDS`` in
``supervise/supervisor.py``), and ``records``, for a result that a remote worker sent (a candidate
may have written it). A value of another kind is the writer's fault, said in one line
(``problem``), never an exception deep inside whatever reads it later. A kind is:

* ``str``: a string; ``bool``: true or false.
* ``int``: a whole number >= 0 below 2**63, never a bool.
* ``float``: a finite number >= 0 (an int too, never a bool): what the supervisor computes with.
* ``FIGURE``: a number >= 0 or infinity (an int too, never a bool, never NaN): a figure already
  computed (a coefficient of variation over a zero mean is infinite, and so is the difference of two
  outputs near the largest float64 of opposite signs).
* ``dict``: an object, none of its fields read; ``ANY``: anything.
* ``[kind]``: a list of that kind; ``Each(kind)``: an object whose every value is of that kind.
* ``{name: kind}``: an object whose named fields, when present and not null, are of their kinds
  (null counts as absent; other fields are not read).
* ``Nullable(kind)``: null, or that kind.
* ``Record``: a dataclass's fields as its annotations say (``of_record``): each required field
  present, null only where the annotation allows it, fields it does not have ignored.

Standard library only: ``records`` is imported on GPU hosts.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

FINITE = 1 << 63  # an int field past this is no count or duration, and no float holds it exactly
FIGURE = "figure"  # see the module
ANY = typing.Any


@dataclasses.dataclass(frozen=True)
class Each:
    kind: Any


@dataclasses.dataclass(frozen=True)
class Nullable:
    kind: Any


@dataclasses.dataclass(eq=False)
class Record:
    name: str
    fields: dict[str, Any]
    required: frozenset[str]


_RECORDS: dict[type, Record] = {}


def of_record(cls: type) -> Record:
    """The kind of ``cls``'s fields, from its annotations: ``float`` is a ``FIGURE``, ``X | None`` a
    ``Nullable``, ``list[X]`` a list, ``dict[str, X]`` an ``Each``, a dataclass a ``Record``, ``Any``
    anything. Other annotations are a ``TypeError`` (this module cannot check them)."""
    record = _RECORDS.get(cls)
    if record is None:
        hints = typing.get_type_hints(cls)
        items = dataclasses.fields(cls)
        record = Record(cls.__name__, {item.name: _of_annotation(hints[item.name]) for item in items},
                        frozenset(item.name for item in items if item.default is dataclasses.MISSING
                                  and item.default_factory is dataclasses.MISSING))
        _RECORDS[cls] = record
    return record


def _of_annotation(hint: Any) -> Any:
    if hint is typing.Any:
        return ANY
    if hint is float:
        return FIGURE
    if hint in (int, str, bool):
        return hint
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        kinds = [arg for arg in args if arg is not type(None)]
        if len(kinds) == 1 and len(args) == 2:
            return Nullable(_of_annotation(kinds[0]))
    elif origin is list and len(args) == 1:
        return [_of_annotation(args[0])]
    elif origin is dict and len(args) == 2 and args[0] is str:
        return Each(_of_annotation(args[1]))
    elif dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return of_record(hint)
    raise TypeError(f"no kind for the annotation {hint!r}")


def problem(value: Any, kind: Any, path: str) -> str | None:
    """``PATH: what it holds, expected what`` for the first value in ``value`` not of ``kind``, or None."""
    if kind is ANY:
        return None
    if isinstance(kind, Nullable):
        if value is None:
            return None
        found = problem(value, kind.kind, path)
        return f"{found} or null" if found and found.startswith(f"{path}: ") else found
    if isinstance(kind, Record):
        if type(value) is not dict:
            return f"{path}: {shown(value)}, expected an object"
        for name, inner in kind.fields.items():
            where = f"{path}.{name}" if path else name
            if name not in value:
                if name in kind.required:
                    return f"{where}: missing"
            elif found := problem(value[name], inner, where):
                return found
        return None
    if kind is dict:
        kind = {}  # an object, none of its fields read
    if isinstance(kind, dict):
        if type(value) is not dict:
            return f"{path}: {shown(value)}, expected an object"
        for name, inner in kind.items():
            if value.get(name) is not None:
                found = problem(value[name], inner, f"{path}.{name}" if path else name)
                if found:
                    return found
        return None
    if isinstance(kind, Each):
        if type(value) is not dict:
            return f"{path}: {shown(value)}, expected an object"
        for key, item in value.items():
            where = f"{path}[{_key(key)}]"
            if type(key) is not str:
                return f"{where}: a key of {shown(key)}, expected a string"
            if found := problem(item, kind.kind, where):
                return found
        return None
    if isinstance(kind, list):
        if type(value) is not list:
            return f"{path}: {shown(value)}, expected a list"
        return next((found for index, item in enumerate(value)
                     if (found := problem(item, kind[0], f"{path}[{index}]"))), None)
    if kind is float:
        number = (type(value) is int and 0 <= value < FINITE) or \
            (type(value) is float and math.isfinite(value) and value >= 0)
        return None if number else f"{path}: {shown(value)}, expected a finite number >= 0"
    if kind is FIGURE:
        number = (type(value) is int and 0 <= value < FINITE) or (type(value) is float and value >= 0)  # not NaN
        return None if number else f"{path}: {shown(value)}, expected a number >= 0"
    if kind is int:
        whole = type(value) is int and 0 <= value < FINITE
        return None if whole else f"{path}: {shown(value)}, expected a whole number >= 0"
    if kind is bool:
        return None if type(value) is bool else f"{path}: {shown(value)}, expected true or false"
    if kind is not str:
        raise TypeError(f"not a kind: {kind!r}")
    return None if type(value) is str else f"{path}: {shown(value)}, expected a string"


def shown(value: Any) -> str:
    """A value in a reason: a short number as it is, anything else by its type (the writer chose it)."""
    if value is None:
        return "null"
    if type(value) in (bool, float) or (type(value) is int and abs(value) < 10**15):
        return repr(value)
    return f"type {type(value).__name__}"


def _key(key: Any) -> str:
    """An object's key in a path: quoted, at most 40 characters of it (the writer chose it)."""
    text = key if type(key) is str else shown(key)
    return repr(text[:40] + ("..." if len(text) > 40 else ""))

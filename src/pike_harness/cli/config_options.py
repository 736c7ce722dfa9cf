"""Click options from a plugin's ``Config`` dataclass: one option per field.

Strategies and evaluators declare their options the same way (a dataclass, help text in the field's
metadata), and every command that attaches them builds the options here. Field types may be bool,
int, float or str, each optionally ``| None`` (None: "the plugin's default"). Metadata keys:
``help``; ``choices`` (a click.Choice); ``min`` (a lower bound for int/float); ``metavar``;
``cli: False`` keeps a field off the command line (settable from Python only).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import click


def dataclass_options(config_cls: type, *, tag: str, show_default: bool = True) -> list[click.Option]:
    """One click option per field of ``config_cls``; each carries attribute ``tag`` = True, so a
    command can tell the options it added for a plugin from its own."""
    options = []
    hints = typing.get_type_hints(config_cls)
    for f in dataclasses.fields(config_cls):
        meta = f.metadata
        if meta.get("cli", True) is False:
            continue
        base = _base_type(hints.get(f.name, str))
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
        flag = "--" + f.name.replace("_", "-")
        extra: dict[str, Any] = {"default": default, "show_default": show_default and default is not None,
                                 "help": meta.get("help", "")}
        if base is bool:
            option = click.Option([f"{flag}/--no-{f.name.replace('_', '-')}", f.name], **extra)
        else:
            kind: Any = base
            if "choices" in meta:
                kind = click.Choice(list(meta["choices"]))
            elif "min" in meta and base is int:
                kind = click.IntRange(min=meta["min"])
            elif "min" in meta and base is float:
                kind = click.FloatRange(min=meta["min"])
            option = click.Option([flag, f.name], type=kind, metavar=meta.get("metavar"), **extra)
        setattr(option, tag, True)
        options.append(option)
    return options


def _base_type(kind: Any) -> type:
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        kind = args[0] if args else str
    return kind if kind in (bool, int, float, str) else str

"""Click options from a plugin's ``Config`` dataclass: one option per field.

Strategies, evaluators and reporters declare their options the same way (a dataclass, help text in
the field's metadata; see ``pike_harness.contracts.configurable``), and every command that attaches them builds
the options here. Field types may be bool, int, float or str, each optionally ``| None`` (None: "the
plugin's default"), or ``tuple[str, ...]`` (a repeatable option). Metadata keys: ``help``;
``choices`` (a click.Choice); ``min``/``max`` (bounds for int/float); ``metavar``; ``nargs`` (an option
taking that many values, for a ``tuple[str, ...] | None`` field: ``--compare A B``); ``cli: False``
keeps a field off the command line (settable from Python only); ``flag: True`` makes a bool a plain
``--name`` switch without ``--no-name`` (for names that are already a negation, such as
``--unsafe-no-sandbox``). A float option takes finite numbers only (``FiniteFloat``): ``nan`` and ``inf``
pass a plain range check and would switch a budget or a limit off silently.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

import click

from pike_harness.errors import UserError


class FiniteFloat(click.FloatRange):
    """A float option that refuses ``nan`` and ``inf`` (as typed or from a config file), with optional bounds.

    click's FloatRange lets NaN through (every comparison with it is False), so ``--money-budget nan``
    used to switch the budget off and leave a run.json that is not JSON."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.min is None and self.max is None:
            self.name = "float"  # shown as FLOAT, with no range, as click.FLOAT is

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)

    def _describe_range(self) -> str:
        return super()._describe_range() if (self.min is not None or self.max is not None) else ""


def finite_float(min: float | None = None, max: float | None = None, *, min_open: bool = False,
                 max_open: bool = False) -> FiniteFloat:
    """The click type of every float option: finite, within the bounds given."""
    return FiniteFloat(min=min, max=max, min_open=min_open, max_open=max_open)


def dataclass_options(config_cls: type, *, tag: str, show_default: bool = True) -> list[click.Option]:
    """One click option per field of ``config_cls``; each carries attribute ``tag`` = True, so a
    command can tell the options it added for a plugin from its own."""
    options = []
    hints = typing.get_type_hints(config_cls)
    for f in dataclasses.fields(config_cls):
        meta = f.metadata
        if meta.get("cli", True) is False:
            continue
        base, multiple = _base_type(hints.get(f.name, str))
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
        flag = "--" + f.name.replace("_", "-")
        common: dict[str, Any] = {"default": default, "show_default": show_default and default is not None,
                                  "help": meta.get("help", "")}
        if base is bool and meta.get("flag"):
            option = click.Option([flag, f.name], is_flag=True, **common)
        elif base is bool:
            option = click.Option([f"{flag}/--no-{f.name.replace('_', '-')}", f.name], **common)
        else:
            kind: Any = base
            if "choices" in meta:
                kind = click.Choice(list(meta["choices"]))
            elif base is float:
                kind = finite_float(min=meta.get("min"), max=meta.get("max"))
            elif base is int and ("min" in meta or "max" in meta):
                kind = click.IntRange(min=meta.get("min"), max=meta.get("max"))
            option = click.Option([flag, f.name], type=kind, multiple=multiple, metavar=meta.get("metavar"),
                                  nargs=meta.get("nargs", 1), **common)
        setattr(option, tag, True)
        options.append(option)
    return options


def _base_type(kind: Any) -> tuple[type, bool]:
    """(the click type of a Config field, whether the option repeats)."""
    if typing.get_origin(kind) in (tuple, list):
        args = [a for a in typing.get_args(kind) if a is not Ellipsis]
        return (_base_type(args[0])[0] if args else str), True
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        kind = args[0] if args else str
    return (kind if kind in (bool, int, float, str) else str), False


def attach_options(command: click.Command, options: list[click.Option], *, tag: str, owner: str) -> None:
    """Give ``command`` these plugin options in place of those an earlier parse attached (tagged ``tag``;
    a command object outlives one invocation, as in tests). An option the command already has is the
    plugin author's mistake, said in one line naming ``owner`` (e.g. "strategy 'pike-b'")."""
    command.params = [p for p in command.params if not getattr(p, tag, False)]
    existing = {name for p in command.params for name in p.opts}
    for option in options:
        clash = [o for o in option.opts if o in existing]
        if clash:
            raise UserError(f"{owner} defines option {clash[0]}, which `pikeh {command.name}` already has; "
                            "its author must rename the Config field")
        command.params.append(option)

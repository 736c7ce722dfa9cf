"""One ``Config`` mechanism for every configurable plugin: strategies, evaluators and reporters.

A plugin class declares its options as a dataclass ``Config``; each field becomes a command-line option
(``--num-branches``; the CLI builds them with ``pike_harness.cli.config_options.dataclass_options``) and, for a
run, a key in run.toml. The host builds the instance with ``make_config`` (unknown or ill-typed values
are a one-line ``UserError`` naming the plugin) and hands it to the constructor, so a plugin reads
typed values from ``self.config`` and never from a dict of strings.

Field types: bool, int, float, str, ``X | None`` of those, and ``tuple[str, ...]`` (a repeatable
option). ``field(metadata={...})`` keys: ``help`` (the option's help), ``min``/``max`` (a range the
CLI enforces), ``metavar``, ``nargs`` (a ``tuple[str, ...] | None`` field taking that many values in one
option, as ``--compare A B``). Validate further in the dataclass's ``__post_init__`` (see
``pike_harness.contracts.strategy.require_at_least``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pike_harness.errors import UserError


@dataclass
class EmptyConfig:
    """The Config of a plugin without options."""


class Configurable:
    """Base of plugin classes configured by a ``Config`` dataclass (``Strategy``, ``Reporter``, ...)."""

    name: ClassVar[str] = ""
    # What the plugin is called in messages ("strategy", "reporter", "evaluator").
    kind: ClassVar[str] = "plugin"
    Config: ClassVar[type] = EmptyConfig

    def __init__(self, config: Any | None = None):
        self.config = config if config is not None else self.Config()

    @classmethod
    def config_fields(cls) -> list[dataclasses.Field[Any]]:
        return list(dataclasses.fields(cls.Config))

    @classmethod
    def make_config(cls, values: Mapping[str, Any]) -> Any:
        """``Config(**values)``, values that are None left at their defaults; a clear error otherwise."""
        return make_config(cls.Config, values, f"{cls.kind} {cls.name!r}")


def make_config(config_cls: type, values: Mapping[str, Any], owner: str) -> Any:
    """Build ``config_cls`` from option values (None keeps a field's default); ``owner`` names it in errors."""
    known = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise UserError(f"{owner} has no option(s) {', '.join(unknown)} (it has: {', '.join(sorted(known)) or 'none'})")
    try:
        return config_cls(**{k: v for k, v in values.items() if v is not None})
    except TypeError as exc:
        raise UserError(f"bad options for {owner}: {exc}") from None

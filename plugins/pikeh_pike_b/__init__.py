"""Built-in strategy plugin: PIKE-B, the branching search of the PIKE paper (``--strategy pike-b``)."""

from __future__ import annotations

from pike_harness.api import hookimpl

from .search import PikeB, PikeBConfig

__all__ = ["PikeB", "PikeBConfig"]


@hookimpl
def register_strategies(register) -> None:
    register(PikeB)

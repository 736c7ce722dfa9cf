"""Built-in strategy plugin: PIKE-O, OpenEvolve's islands + MAP-Elites search with the PIKE paper's changes
(``--strategy pike-o``, ``--preset`` for the paper's ablations). Native implementation: docs/strategies.md
says why the ``openevolve`` library is not used."""

from __future__ import annotations

from pike_harness.api import hookimpl

from .config import PikeOConfig
from .presets import PRESETS, preset_names
from .search import PikeO

__all__ = ["PRESETS", "PikeO", "PikeOConfig", "preset_names"]


@hookimpl
def register_strategies(register) -> None:
    register(PikeO)

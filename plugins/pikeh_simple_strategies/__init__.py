"""Built-in strategy plugin: two simple reference strategies, ``best-of-n`` and ``refine``.

They share PIKE's prompts and error-fixing agent, so comparing them with PIKE-B isolates the value of
PIKE-B's search structure.
"""

from __future__ import annotations

from pike_harness.api import hookimpl

from .best_of_n import BestOfN, BestOfNConfig
from .refine import Refine, RefineConfig

__all__ = ["BestOfN", "BestOfNConfig", "Refine", "RefineConfig"]


@hookimpl
def register_strategies(register) -> None:
    register(BestOfN)
    register(Refine)

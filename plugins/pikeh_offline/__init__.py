"""Backends that need no network, for the demo and tests: ``offline:mutate`` and ``offline:replay``.

``offline:mutate`` is not a model: it answers each agent role by rewriting the programs quoted in the
prompt with a catalogue of real transformations (see mutate.py). ``offline:replay`` answers from a
recorded run's journal (see replay.py). Both are selected like any provider: ``--llm offline:mutate``.
"""

from __future__ import annotations

from pike_harness.api import (
    BackendOptions,
    Demo,
    LLMBackend,
    RegisterDemo,
    RegisterLLMBackend,
    UserError,
    hookimpl,
)

MODELS = ("mutate", "replay")


def factory(model: str, options: BackendOptions) -> LLMBackend:
    """offline: no network: offline:mutate (not an LLM), offline:replay=RUN_DIR (a recorded run)"""
    name = model.partition("=")[0]
    if name == "mutate":
        from pikeh_offline.mutate import MutateBackend

        return MutateBackend(model, options)
    if name == "replay":
        from pikeh_offline.replay import ReplayBackend

        return ReplayBackend(model, options)
    raise UserError(f"unknown offline backend {model!r} (available: offline:mutate, offline:replay=RUN_DIR)")


@hookimpl
def register_llm_backends(register: RegisterLLMBackend) -> None:
    register("offline", factory)


# `pikeh demo`: the whole pipeline in a few minutes on two CPU cores, with no network and no key. It runs
# two seeds (for the report's bands), so each has half the queries one seed had: the same CPU time in CI.
DEFAULT_DEMO = Demo(
    name="default", strategy="pike-b", suite="smoke", llm="offline:mutate", evaluator="local", reporter="duckdb",
    strategy_options={"num_branches": 4, "max_fix_attempts": 2, "max_ideas": 4}, query_budget=6,
    llm_concurrency=4,
    description="PIKE-B on the smoke suite with offline:mutate (an offline stand-in, not an LLM)")


@hookimpl
def register_demos(register: RegisterDemo) -> None:
    register(DEFAULT_DEMO)

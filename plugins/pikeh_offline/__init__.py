"""Backends that need no network, for the demo and tests: ``offline:mutate`` and ``offline:replay``.

``offline:mutate`` is not a model: it answers each agent role by rewriting the programs quoted in the
prompt with a catalogue of real transformations (see mutate.py). ``offline:replay`` answers from a
recorded run's journal (see replay.py). Both are selected like any provider: ``--llm offline:mutate``.
"""

from __future__ import annotations

from pike_harness.api import BackendOptions, LLMBackend, UserError, hookimpl

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
def register_llm_backends(register) -> None:
    register("offline", factory)

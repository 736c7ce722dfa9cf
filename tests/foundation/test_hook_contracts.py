"""The hook contracts are typed, and the host holds plugins to them (typed Register per hook)."""

from __future__ import annotations

import inspect
import types
import typing

import pytest

from pike_harness.api import Demo, EvaluatorSpec, ProviderPrices, Reporter, Strategy, Suite
from pike_harness.contracts import hookspecs
from pike_harness.contracts.hookspecs import hookimpl
from pike_harness.host.plugins import KINDS, PluginHost

REGISTER_HOOKS = [name for name in dir(hookspecs) if name.startswith("register_") and name != "register_commands"]


@pytest.mark.parametrize("hook", REGISTER_HOOKS)
def test_every_register_hook_takes_its_own_typed_register(hook):
    namespace = {**vars(hookspecs), "Demo": Demo, "EvaluatorSpec": EvaluatorSpec, "Reporter": Reporter,
                 "Strategy": Strategy, "Suite": Suite, "ProviderPrices": ProviderPrices}
    from pike_harness.contracts.llm import BackendFactory

    namespace["BackendFactory"] = BackendFactory
    contract = typing.get_type_hints(getattr(hookspecs, hook), globalns=namespace)["register"]
    assert contract is not typing.Callable and getattr(contract, "_is_protocol", False), contract
    call = typing.get_type_hints(contract.__call__, globalns=namespace)
    assert call.pop("return") is type(None)
    assert call and all(t is not typing.Any for t in call.values()), f"{hook}: untyped parameters {call}"
    assert KINDS[next(k for k, v in KINDS.items() if v[0] == hook)][1] is contract


def test_the_builtins_keep_their_contracts():
    """Every built-in registration passed its hook's typed signature (a wrong one is a plugin error)."""
    host = PluginHost()
    assert all(info.error is None for info in host.infos.values() if info.builtin), \
        {i.name: i.error for i in host.infos.values() if i.error}
    for kind in KINDS:
        assert host.names(kind), f"no built-in registers any {kind}"


def test_a_call_outside_the_contract_is_reported_as_the_plugins_error(capsys):
    @hookimpl
    def register_llm_backends(register):
        register("typo", lambda model, options: None, price=ProviderPrices())  # "prices" misspelt

    host = PluginHost(entry_points=False, blocked=set(),
                      extra=[("sloppy", types.SimpleNamespace(register_llm_backends=register_llm_backends), False)])
    assert "typo" not in host.names("llm_backends")
    assert "register_llm_backends failed: TypeError" in host.infos["sloppy"].error
    assert "price" in capsys.readouterr().err


def test_register_signatures_match_what_docs_promise():
    sig = inspect.signature(hookspecs.RegisterLLMBackend.__call__)
    assert list(sig.parameters) == ["self", "provider", "factory", "prices"]
    assert sig.parameters["prices"].kind is inspect.Parameter.KEYWORD_ONLY

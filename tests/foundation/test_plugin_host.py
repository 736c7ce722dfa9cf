"""The plugin host: discovery, the replacement rule, blocking, and `pikeh plugins`."""

from __future__ import annotations

import json

from pike_harness.contracts.strategy import Strategy
from pike_harness.host.plugins import PluginHost


def _strategy(name: str, tag: str) -> type[Strategy]:
    class S(Strategy):
        def run_task(self, ctx):  # pragma: no cover - never run here
            raise NotImplementedError

    S.name = name
    S.description = tag
    return S


def _plugin(*strategies):
    """A plugin object as a third party would write it: a namespace with a hookimpl."""
    import types

    from pike_harness.contracts.hookspecs import hookimpl

    @hookimpl
    def register_strategies(register):
        for s in strategies:
            register(s)

    return types.SimpleNamespace(register_strategies=register_strategies)


def test_third_party_replaces_builtin_and_later_name_wins():
    builtin = _plugin(_strategy("greedy", "builtin"), _strategy("only-builtin", "builtin"))
    zeta = _plugin(_strategy("greedy", "zeta"))
    alpha = _plugin(_strategy("greedy", "alpha"), _strategy("extra", "alpha"))
    # Registration order given here is deliberately scrambled: the rule, not the order, decides.
    host = PluginHost(entry_points=False, blocked=set(),
                      extra=[("zeta", zeta, False), ("core", builtin, True), ("alpha", alpha, False)])
    assert host.get("strategies", "greedy").description == "zeta"
    assert host.get("strategies", "only-builtin").description == "builtin"
    assert host.get("strategies", "extra").description == "alpha"
    listing = {p["name"]: p for p in host.plugin_list()}
    assert [p["name"] for p in host.plugin_list()] == ["core", "alpha", "zeta"]
    assert listing["core"]["replaced"] == {"strategies": {"greedy": "zeta"}}
    assert listing["alpha"]["replaced"] == {"strategies": {"greedy": "zeta"}}
    assert listing["zeta"]["provides"] == {"strategies": ["greedy"]}


def test_a_plugin_that_raises_while_registering_is_reported_not_fatal(capsys):
    import types

    from pike_harness.contracts.hookspecs import hookimpl

    @hookimpl
    def register_strategies(register):
        register(_strategy("half", "broken"))
        raise FileNotFoundError("its task folder is missing")

    broken = types.SimpleNamespace(register_strategies=register_strategies)
    host = PluginHost(entry_points=False, blocked=set(),
                      extra=[("core", _plugin(_strategy("greedy", "builtin")), True), ("broken", broken, False)])
    assert host.get("strategies", "greedy").description == "builtin", "the others still load"
    listing = {p["name"]: p for p in host.plugin_list()}
    assert "register_strategies failed: FileNotFoundError" in listing["broken"]["error"]
    assert "plugin 'broken': register_strategies failed" in capsys.readouterr().err


def test_blocked_plugin_is_not_loaded():
    builtin = _plugin(_strategy("greedy", "builtin"))
    other = _plugin(_strategy("greedy", "other"))
    host = PluginHost(entry_points=False, blocked={"other"},
                      extra=[("core", builtin, True), ("other", other, False)])
    assert host.get("strategies", "greedy").description == "builtin"
    listing = {p["name"]: p for p in host.plugin_list()}
    assert listing["other"]["blocked"] is True
    assert listing["other"]["provides"] == {}


def test_unknown_name_lists_choices():
    import pytest

    from pike_harness.errors import UserError

    host = PluginHost(entry_points=False, blocked=set(), extra=[("core", _plugin(_strategy("a", "")), True)])
    with pytest.raises(UserError, match=r"unknown strategy 'b' \(available: a\)"):
        host.get("strategies", "b")


def test_plugins_json_lists_builtins_with_hooks(run_pikeh):
    proc = run_pikeh("plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    listing = {p["name"]: p for p in json.loads(proc.stdout)}
    for entry in listing.values():
        assert set(entry) >= {"name", "version", "hooks", "provides"}
    suites = listing["suites"]
    assert suites["builtin"] is True
    assert suites["hooks"] == ["register_suites"]
    assert suites["provides"]["suites"] == ["smoke", "level3-pike"]
    assert listing["duckdb"]["provides"]["commands"] == ["import"], "commands plugins add are listed too"


def test_block_env_removes_suites(cli):
    result = cli("plugins", "--json", env={"PIKEH_BLOCK_PLUGINS": "suites, other"})
    listing = {p["name"]: p for p in json.loads(result.output)}
    assert listing["suites"]["blocked"] is True
    result = cli("tasks", "list", "--suite", "smoke", env={"PIKEH_BLOCK_PLUGINS": "suites"})
    assert result.exit_code != 0
    assert "unknown suite 'smoke'" in result.output


def test_plugins_table(cli):
    result = cli("plugins", env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "suites: smoke, level3-pike" in result.output

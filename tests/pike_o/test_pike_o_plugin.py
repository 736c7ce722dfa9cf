"""PIKE-O as the host sees it: registered through its entry point, importing only the public API."""

from __future__ import annotations

import ast
from pathlib import Path

from pike_harness.host.plugins import PluginHost

PLUGIN = Path(__file__).resolve().parents[2] / "plugins" / "pikeh_pike_o"


def test_pike_o_registers_through_its_entry_point():
    host = PluginHost(blocked=set())
    cls = host.get("strategies", "pike-o")
    assert host.provider_of("strategies", "pike-o") == "pike-o"
    assert cls.name == "pike-o" and "OpenEvolve" in cls.description
    assert set(cls.roles) == {"optimize", "fix"}
    assert cls().overshoot() == 0  # iterations and fixes start only below the budget


def test_pike_o_imports_only_the_public_api_and_no_other_plugin():
    modules = sorted(PLUGIN.glob("*.py"))
    assert {p.name for p in modules} >= {"config.py", "presets.py", "database.py", "features.py", "sampling.py",
                                         "prompts.py", "search.py"}
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "random":
                assert node.attr == "Random", f"{path.name}: random.{node.attr}; draws must come from ctx.rng"
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                assert not name.startswith("pike_harness") or name == "pike_harness.api", f"{path.name}: {name}"
                assert not name.startswith("pikeh_"), f"{path.name} imports plugin {name}"


def test_one_process_can_run_the_command_for_several_strategies(cli):
    """The run command's strategy options are rebuilt per invocation (tests run many in one process)."""
    first = cli("run", "--strategy", "pike-o", "--help")
    assert first.exit_code == 0 and "--preset" in first.output
    second = cli("run", "--strategy", "pike-b", "--help")
    assert second.exit_code == 0, second.output
    assert "--preset" not in second.output and "--num-branches" in second.output
    third = cli("run", "--strategy", "pike-o", "--help")
    assert third.exit_code == 0, third.output
    assert "--preset" in third.output and "--num-branches" not in third.output

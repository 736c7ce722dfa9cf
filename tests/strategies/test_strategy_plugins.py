"""Strategy plugins as the host sees them: registration, import discipline, and the documented example."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

from pike_harness.api import code_fences
from pike_harness.host.plugins import PluginHost
from pike_harness.testing.context import ScriptedContext, correct, failure, make_task

REPO = Path(__file__).resolve().parents[2]
STRATEGY_PLUGINS = ("pikeh_pike_b", "pikeh_simple_strategies", "pikeh_pike_o")


def test_builtin_strategies_register_through_their_entry_points():
    host = PluginHost(blocked=set())
    assert {"pike-b", "best-of-n", "refine"} <= set(host.names("strategies"))
    assert host.provider_of("strategies", "pike-b") == "pike-b"
    assert host.provider_of("strategies", "best-of-n") == "simple-strategies"
    assert host.provider_of("strategies", "refine") == "simple-strategies"
    for name in ("pike-b", "best-of-n", "refine"):
        cls = host.get("strategies", name)
        assert cls.name == name and cls.description and cls().overshoot() >= 0


def test_strategy_plugins_import_only_the_public_api():
    for package in STRATEGY_PLUGINS:
        for path in sorted((REPO / "plugins" / package).glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                for name in names:
                    if name.startswith("pike_harness"):
                        assert name == "pike_harness.api", f"{path.name} imports {name}"
                    assert not name.startswith("pikeh_"), f"{path.name} imports plugin {name}"


def test_the_documented_example_strategy_registers_and_runs(tmp_path):
    doc = (REPO / "docs" / "strategies.md").read_text(encoding="utf-8")
    example = next(block for block in code_fences.code_blocks(doc) if "class UntilCorrect(Strategy)" in block)
    entry_point = re.search(r'^until-correct = "(\w+)"$', doc, re.M)
    assert entry_point, "the docs show the entry point that registers the example"
    module_path = tmp_path / f"{entry_point.group(1)}.py"
    module_path.write_text(example, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(entry_point.group(1), module_path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    host = PluginHost(entry_points=False, extra=[("until-correct", module, False)], blocked=set())
    cls = host.get("strategies", "until-correct")
    strategy = cls(cls.Config(max_tries=5))
    ctx = ScriptedContext(make_task(tmp_path), 10, strategy.overshoot(),
                          outcomes={"try000": failure("compile_error"), "try001": failure("incorrect"),
                                    "try002": correct(1.5)})
    strategy.run_task(ctx)
    assert ctx.issued_keys() == ["try000", "try001", "try002"]
    assert [f.name for f in cls.config_fields()] == ["max_tries"]

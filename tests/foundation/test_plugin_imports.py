"""Plugins use the public API only: `pike_harness.api` (and `pike_harness.worker.api`, the evaluation
side's surface for evaluator plugins), never another host module and never each other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGINS = sorted(p for p in (REPO / "plugins").iterdir() if (p / "__init__.py").exists())
ALLOWED = ("pike_harness.api", "pike_harness.worker.api")


@pytest.mark.parametrize("package", PLUGINS, ids=lambda p: p.name)
def test_plugin_imports_only_public_api(package):
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
                if node.module == "pike_harness":
                    assert {a.name for a in node.names} <= {"__version__"}, f"{path}: from pike_harness import ..."
                    continue
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if module.startswith("pike_harness"):
                    assert module == "pike_harness" or module in ALLOWED, f"{path} imports {module}"
                assert not module.startswith("pikeh_") or module.startswith(package.name), \
                    f"{path} imports another plugin: {module}"


def test_every_name_the_api_exports_is_documented():
    """Exported means documented: docs/plugins.md's "What the API offers" names every export."""
    import pike_harness.api as api

    doc = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    section = doc.split("## What the API offers", 1)[1].split("\n## ", 1)[0]
    assert [name for name in api.__all__ if f"`{name}`" not in section and f"`{name}(" not in section] == []
    assert sorted(api.__all__) == sorted(set(api.__all__)), "a name exported twice"

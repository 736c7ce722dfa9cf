"""No test leaves the default run silently: every test marked ``slow`` (the README's test command runs
``-m "not slow"``; CI runs the slow ones next) is named in docs/testing.md, and the evaluator's own
real-sandbox tests (tests/eval) are never slow: they stay in the default run."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
DOC = REPO / "docs" / "testing.md"


def _is_slow_mark(node: ast.AST) -> bool:
    """``pytest.mark.slow`` (or a list/tuple holding it)."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return any(_is_slow_mark(element) for element in node.elts)
    return isinstance(node, ast.Attribute) and node.attr == "slow" and ast.unparse(node) == "pytest.mark.slow"


@functools.cache
def slow_tests() -> dict[str, list[str]]:
    """test file (relative to the repository) -> the slow test functions in it (scanned once)."""
    found: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_slow = any(isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets) and _is_slow_mark(node.value)
            for node in tree.body)
        names = [node.name for node in tree.body
                 if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
                 and (module_slow or any(_is_slow_mark(d) for d in node.decorator_list))]
        if names:
            found[str(path.relative_to(REPO))] = names
    return found


def test_the_scan_sees_the_marks_it_looks_for():
    tree = ast.parse("import pytest\npytestmark = [pytest.mark.slow]\n@pytest.mark.slow\ndef test_x(): pass\n")
    assert _is_slow_mark(tree.body[1].value)
    assert _is_slow_mark(tree.body[2].decorator_list[0])
    assert not _is_slow_mark(ast.parse("pytest.mark.gpu", mode="eval").body)


def test_every_slow_test_is_named_in_the_testing_page():
    doc = DOC.read_text(encoding="utf-8")
    found = slow_tests()
    assert found, "no slow test found: the scan is broken"
    missing = [f"{path}::{name}" for path, names in found.items() for name in names
               if f"`{name}`" not in doc or f"`{path}`" not in doc]
    assert missing == [], "slow tests docs/testing.md does not name (file and test): " + ", ".join(missing)


def test_the_evaluators_own_sandbox_tests_stay_in_the_default_run():
    assert [path for path in slow_tests() if path.startswith("tests/eval/")] == []

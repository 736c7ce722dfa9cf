"""Core modules raise pike-harness's own errors and never import click; only the CLI prints them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from pike_harness.contracts.evaluation import EvaluatorError
from pike_harness.contracts.llm import LLMError
from pike_harness.errors import BudgetExhausted, PikehError, UserError

SRC = Path(__file__).resolve().parents[2] / "src" / "pike_harness"


def _imports_click(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "click" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "click":
            return True
    return False


def test_no_core_module_imports_click():
    # The CLI package, the test helper that drives it, and the worker's own command line (`pikeh worker`
    # and `python -m pike_harness.worker.supervise.service` share its one declaration; worker images
    # install click for it, the evaluation code never imports it) are the only modules that may.
    command_lines = {Path("testing/cli.py"), Path("worker/supervise/command.py")}
    core = [p for p in SRC.rglob("*.py") if "cli" not in p.relative_to(SRC).parts
            and p.relative_to(SRC) not in command_lines]
    offenders = [str(p.relative_to(SRC)) for p in core if _imports_click(p)]
    assert offenders == [], f"core modules importing click (raise UserError instead): {offenders}"


def test_errors_form_one_hierarchy_without_click():
    for cls in (UserError, BudgetExhausted, EvaluatorError, LLMError):
        assert issubclass(cls, PikehError)
    assert UserError("bad input").message == "bad input"
    # Importing the host's errors and plugin host must not load click (a library user need not have it).
    code = ("import sys, pike_harness.errors, pike_harness.host.plugins, pike_harness.host.pricing, pike_harness.host.tasks; "
            "print('click' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_cli_prints_a_core_user_error_as_one_line(cli):
    result = cli("tasks", "show", "no-such-suite/1")
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and "no-such-suite" in result.output
    assert "Traceback" not in result.output and result.output.count("\n") == 1


def test_a_bug_is_not_turned_into_a_one_liner():
    with pytest.raises(ZeroDivisionError):
        from pike_harness.cli import RootGroup

        class Boom(RootGroup):
            pass

        import click

        @click.group(cls=Boom)
        def root() -> None:
            pass

        @root.command()
        def fail() -> None:
            raise ZeroDivisionError

        root.main(["fail"], standalone_mode=False)

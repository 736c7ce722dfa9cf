"""Golden prompts: every prompt PIKE-B and PIKE-O send, for two fixed tasks, against committed files.

A change to a template, to a prompt builder or to the stand-in inputs (``kit/prompt_examples.py``)
shows up here as a diff, so no prompt changes unnoticed. After a deliberate change, regenerate the files
and review the diff before committing:

    PIKEH_UPDATE_GOLDEN=1 python -m pytest -q tests/strategies/test_golden_prompts.py

The files are ``tests/golden_prompts/<case>/<task>/<prompt>.txt``, each the messages as the backend
gets them (``pikeh prompts show`` prints the same).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pike_harness.cli import App

GOLDEN = Path(__file__).resolve().parents[1] / "golden_prompts"
TASKS = ("level3-pike/9", "smoke/3")
CASES = {  # case folder: (strategy, options)
    "pike-b": ("pike-b", {}),
    "pike-o": ("pike-o", {}),
    "pike-o-mut": ("pike-o", {"preset": "mut"}),
}
UPDATE = os.environ.get("PIKEH_UPDATE_GOLDEN") == "1"


def rendered(case: str, task_ref: str) -> dict[str, str]:
    strategy_name, options = CASES[case]
    strategy_cls = App.host().get("strategies", strategy_name)
    strategy = strategy_cls(strategy_cls.make_config(options))
    task = App().catalog.resolve(task_ref)
    return {
        e.name: "".join(f"--- {m['role']} ---\n{m['content']}\n" for m in e.messages)
        for e in strategy.example_prompts(task)
    }


@pytest.mark.parametrize("task_ref", TASKS)
@pytest.mark.parametrize("case", CASES)
def test_prompts_match_the_committed_golden_files(case, task_ref):
    folder = GOLDEN / case / task_ref.replace("/", "_")
    prompts = rendered(case, task_ref)
    if UPDATE:
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.txt"):
            stale.unlink()
        for name, text in prompts.items():
            (folder / f"{name}.txt").write_text(text, encoding="utf-8")
    committed = {p.stem: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.txt"))}
    assert sorted(committed) == sorted(prompts), (
        "prompts added or removed: regenerate (see the module docstring)"
    )
    for name, text in prompts.items():
        assert text == committed[name], (
            f"{case}/{task_ref}/{name} changed: regenerate (see the module docstring)"
        )


def test_the_golden_cases_cover_each_prompt_kind():
    assert set(rendered("pike-b", "smoke/3")) == {
        "brainstorm",
        "optimize",
        "improve",
        "fix_error",
        "fix_incorrect",
    }
    assert set(rendered("pike-o", "smoke/3")) == {"crossover", "efa_error", "efa_incorrect"}
    assert set(rendered("pike-o-mut", "smoke/3")) == {"mutation", "efa_error", "efa_incorrect"}

"""An evaluator's own options reach its factory as its Config dataclass, and only so: from the command
line and through a run (which records them by name in run.json), never as an untyped dict."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pike_harness.api import EvaluatorError, EvaluatorOptions, EvaluatorSpec, evaluator_config, hookimpl
from pike_harness.errors import UserError
from pike_harness.testing import FakeEvaluator, invoke

REPO = Path(__file__).resolve().parents[2]
CANDIDATE = REPO / "tasks" / "smoke" / "1_MatmulReLU.py"


@dataclass
class TypedConfig:
    typed_level: int = field(default=1, metadata={"help": "A number the test reads back."})
    typed_name: str | None = field(default=None, metadata={"help": "A name the test reads back."})

    def __post_init__(self) -> None:
        if self.typed_level < 0:
            raise ValueError(f"--typed-level {self.typed_level}: must be >= 0")


def typed_plugin() -> Any:
    """An evaluator plugin (``--evaluator typed``) that records the options each build got."""

    class TypedPlugin:
        seen: list[EvaluatorOptions] = []

        @staticmethod
        @hookimpl
        def register_evaluators(register: Any) -> None:
            def factory(options: EvaluatorOptions) -> FakeEvaluator:
                TypedPlugin.seen.append(options)
                return FakeEvaluator(options=options)

            register(EvaluatorSpec("typed", factory, "records its options", config=TypedConfig))

    return TypedPlugin


def test_evaluator_options_have_no_untyped_dict():
    assert "extra" not in {f.name for f in dataclasses.fields(EvaluatorOptions)}


def test_make_config_types_values_by_name_and_keeps_defaults_for_none():
    spec = EvaluatorSpec("typed", FakeEvaluator, config=TypedConfig)
    config = spec.make_config({"typed_level": 3, "typed_name": None, "not_ours": "x"})
    assert config == TypedConfig(typed_level=3, typed_name=None)
    with pytest.raises(UserError, match=r"^evaluator 'typed': --typed-level -2: must be >= 0$"):
        spec.make_config({"typed_level": -2})
    assert EvaluatorSpec("plain", FakeEvaluator).make_config({"typed_level": 3}) is None


def test_evaluator_config_gives_defaults_or_refuses_another_type():
    assert evaluator_config(EvaluatorOptions(), TypedConfig) == TypedConfig()
    given = TypedConfig(typed_level=5)
    assert evaluator_config(EvaluatorOptions(config=given), TypedConfig) is given
    with pytest.raises(EvaluatorError, match="not the evaluator's TypedConfig"):
        evaluator_config(EvaluatorOptions(config={"typed_level": 5}), TypedConfig)


def test_eval_passes_the_chosen_evaluators_options_as_its_config():
    plugin = typed_plugin()
    result = invoke("eval", str(CANDIDATE), "--task", "smoke/1", "--evaluator", "typed", "--typed-level", "4",
                    "--typed-name", "x", "--json", plugins={"typed": plugin})
    assert result.exit_code == 0, result.output
    assert [options.config for options in plugin.seen] == [TypedConfig(typed_level=4, typed_name="x")]
    bad = invoke("eval", str(CANDIDATE), "--task", "smoke/1", "--evaluator", "typed", "--typed-level", "-1",
                 plugins={"typed": plugin})
    assert bad.exit_code != 0 and "evaluator 'typed': --typed-level -1: must be >= 0" in bad.output
    assert "Traceback" not in bad.output


def test_a_run_records_the_options_by_name_and_each_start_builds_the_config(tmp_path):
    plugin = typed_plugin()
    args = ("run", "--strategy", "best-of-n", "--suite", "smoke", "--tasks", "1", "--llm", "offline:mutate",
            "--query-budget", "1", "--device", "cpu", "--evaluator", "typed", "--output-dir", str(tmp_path),
            "--run-name", "r")
    first = invoke(*args, "--typed-level", "7", plugins={"typed": plugin})
    assert first.exit_code == 0, first.output
    recorded = json.loads((tmp_path / "r" / "run.json").read_text())
    assert recorded["operational"]["evaluator_options"] == {"typed_level": 7}
    again = invoke(*args, "--typed-level", "7", plugins={"typed": plugin})
    assert again.exit_code == 0, again.output
    assert [options.config for options in plugin.seen] == [TypedConfig(typed_level=7)] * 2

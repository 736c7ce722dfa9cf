"""Config files are checked exactly like the command line: one schema, one set of bounds, unknown keys
named; a ``[strategy]`` table may name the strategy and keeps its other keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from pike_harness.cli import App
from pike_harness.host.run_config import RunConfig


def _parse(tmp_path: Path, toml: str, *args: str) -> RunConfig:
    """What `pikeh run --config run.toml ARGS` would run with, without running it."""
    from pike_harness.cli.evaluator_options import pop_evaluator_values
    from pike_harness.cli.run_cmd import merged_options, run

    (tmp_path / "run.toml").write_text(toml)
    App.reset()
    ctx = run.make_context("run", ["--config", str(tmp_path / "run.toml"), *args])
    merged, strategy_values = merged_options(ctx, dict(ctx.params))
    evaluator_values = pop_evaluator_values(merged)
    strategy_cls = App.host().get("strategies", merged["strategy"])
    return RunConfig.build(merged, strategy_values, evaluator_values, strategy_cls)


def test_strategy_table_names_the_strategy_and_keeps_its_options(tmp_path):
    config = _parse(tmp_path, '[strategy]\nname = "pike-b"\nnum_branches = 7\nmax_fix_attempts = 1\n',
                    "--suite", "smoke", "--llm", "offline:mutate")
    assert config.strategy == "pike-b"
    assert config.strategy_options["num_branches"] == 7 and config.strategy_options["max_fix_attempts"] == 1


def test_file_values_and_defaults_come_from_one_place(tmp_path):
    config = _parse(tmp_path, 'strategy = "best-of-n"\nsuite = "smoke"\nllm = "offline:mutate"\n'
                              'query_budget = 12\ntemperature = 0.0\n', "--seed", "3")
    assert (config.query_budget, config.temperature, config.seed) == (12, 0.0, 3)
    default = _parse(tmp_path, 'strategy = "best-of-n"\nsuite = "smoke"\nllm = "offline:mutate"\n')
    assert default.temperature == RunConfig.__dataclass_fields__["temperature"].default == 0.8
    assert default.query_budget == 300 and default.device == "auto"
    # The command line wins over the file.
    assert _parse(tmp_path, 'strategy = "best-of-n"\nsuite = "smoke"\nllm = "offline:mutate"\nquery_budget = 12\n',
                  "--query-budget", "5").query_budget == 5


@pytest.mark.parametrize(("toml", "message"), [
    ("query_budget = 0", "query_budget: 0 is not in the range x>=1"),
    ("query_budget = -3", "query_budget: -3 is not in the range x>=1"),
    ('query_budget = "ten"', "query_budget: 'ten' is not a valid integer"),
    ("query_budget = 2.5", "query_budget: 2.5 is not an integer"),
    ("llm_concurrency = true", "True is not a valid value for llm_concurrency"),
    ('protocol = "fast"', "protocol: 'fast' is not one of"),
    ('device = "tpu"', "device: 'tpu': write auto, cpu"),
    ("budget = 10", "unknown option(s) budget"),
    ("[strategy]\nname = \"pike-b\"\nnum_branchez = 3", "[strategy] has unknown option(s) num_branchez"),
    ("[strategy]\nname = \"pike-b\"\nnum_branches = \"many\"", "[strategy] num_branches: 'many' is not a valid integer"),
    ("tasks = [1, 2]", "tasks: expected one value, got list"),
])
def test_bad_values_are_refused_by_name_in_one_line(tmp_path, cli, toml, message):
    base = 'suite = "smoke"\nllm = "offline:mutate"\n'
    if "[strategy]" not in toml:
        base = 'strategy = "pike-b"\n' + base
    (tmp_path / "run.toml").write_text(base + toml + "\n")
    result = cli("run", "--config", str(tmp_path / "run.toml"), "--output-dir", str(tmp_path / "runs"))
    assert result.exit_code != 0
    assert message in result.output, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_an_output_dir_that_is_a_file_is_one_line(tmp_path, cli):
    (tmp_path / "file").write_text("x")
    result = cli("run", "--strategy", "pike-b", "--suite", "smoke", "--llm", "offline:mutate",
                 "--output-dir", str(tmp_path / "file"))
    assert result.exit_code == 2 and "is a file" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("args", [
    ("report", "--input", "{tmp}", "--output", "{tmp}/file"),
    ("demo", "--output-dir", "{tmp}/file"),
    ("eval", "{tmp}/file", "--task", "smoke/1", "--workdir", "{tmp}/file/work"),
])
def test_paths_that_cannot_be_folders_are_one_line(tmp_path, cli, args):
    (tmp_path / "file").write_text("x")
    result = cli(*[a.format(tmp=tmp_path) for a in args])
    assert result.exit_code == 2, result.output
    assert ("is a file" in result.output or "cannot be created" in result.output) and "Traceback" not in result.output


def test_a_command_that_leaves_options_out_gets_the_same_defaults_as_pikeh_run(tmp_path):
    """`pikeh demo` builds its core options without temperature: it must send what `pikeh run` sends,
    or offline:replay of the demo misses every request (temperature null vs 0.8)."""
    App.reset()
    strategy_cls = App.host().get("strategies", "pike-b")
    demo_like = RunConfig.build({"strategy": "pike-b", "suite": "smoke", "llm": "offline:mutate", "query_budget": 12},
                                {}, {"evaluator": "local"}, strategy_cls)
    from_cli = _parse(tmp_path, 'strategy = "pike-b"\nsuite = "smoke"\nllm = "offline:mutate"\nquery_budget = 12\n')
    assert demo_like.temperature == from_cli.temperature == 0.8
    assert demo_like.generation_params() == from_cli.generation_params()
    assert (demo_like.max_tokens, demo_like.llm_concurrency) == (from_cli.max_tokens, from_cli.llm_concurrency)


def test_demo_fresh_deletes_only_its_own_run_and_report(tmp_path, cli, monkeypatch):
    """--fresh starts over: the demo's run and report go before the run starts (the run itself is cut
    short here: it is the same launch_run every other test drives)."""
    import pike_harness.host.launch

    out = tmp_path / "d"
    for folder in (out / "runs" / "demo", out / "report", out / "runs" / "mine"):
        folder.mkdir(parents=True)
        (folder / "keep.txt").write_text("x")

    def stop_here(*args, **kwargs):
        assert not (out / "runs" / "demo" / "keep.txt").exists() and not (out / "report").exists()
        raise UserError("stopped by the test")

    from pike_harness.errors import UserError

    monkeypatch.setattr(pike_harness.host.launch, "launch_run", stop_here)
    result = cli("demo", "--output-dir", str(out), "--fresh", "--device", "cpu")
    assert "stopped by the test" in result.output, result.output
    assert (out / "runs" / "mine" / "keep.txt").exists()

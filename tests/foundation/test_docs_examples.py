"""Every example in docs/ and README.md is executed: each `$ pikeh ...` line of a console block is
parsed by the real CLI (its options must exist), the ones that need no GPU, key, network or user data
are run (the slow ones under the ``slow`` mark), and every TOML block is valid TOML, the run.toml
example a valid run configuration."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted((REPO / "docs").rglob("*.md")) + [REPO / "README.md"]
BLOCK = re.compile(r"```(console|toml)\n(.*?)```", re.S)

# Commands run as written (fast), and the slow ones (they run models on the CPU); the rest need what
# this machine lacks (a GPU, an API key, a cluster, the user's files) and are parsed only.
RUN = {
    "pikeh tasks list --suite level3-pike",
    "pikeh plugins",
    "pikeh run --strategy pike-b --help",
}
# Run as written by another test already (parsed only here): `pikeh tasks check --suite level3-pike` builds
# every level3 model on the meta device (tests/suites/test_level3_shapes.py runs it with --json).
RUN_ELSEWHERE = {
    "pikeh tasks check --suite level3-pike",
}
SLOW = {
    "pikeh demo --output-dir pikeh-demo",
    "pikeh tasks audit --suite smoke",
}


def _commands() -> list[tuple[str, str]]:
    """(file, command) for every `$ pikeh` line, continuation lines joined, comments and env prefixes dropped."""
    found = []
    for path in DOCS:
        for kind, body in BLOCK.findall(path.read_text(encoding="utf-8")):
            if kind != "console":
                continue
            lines = body.splitlines()
            i = 0
            while i < len(lines):
                line = lines[i]
                if line.startswith("$ "):
                    command = line[2:]
                    while command.rstrip().endswith("\\") and i + 1 < len(lines):
                        i += 1
                        command = command.rstrip()[:-1] + " " + lines[i].strip()
                    for part in command.split("&&"):
                        part = re.sub(r"\s+#.*$", "", part).strip()
                        part = re.sub(r"^(\w+=\S+\s+)+", "", part)  # VAR=value prefixes
                        if part.startswith("pikeh"):
                            found.append((path.name, " ".join(part.split())))
                i += 1
    return found


def _tomls() -> list[tuple[str, str]]:
    return [(path.name, body) for path in DOCS for kind, body in BLOCK.findall(path.read_text(encoding="utf-8"))
            if kind == "toml"]


COMMANDS = _commands()


def _argv(command: str) -> list[str]:
    """The arguments of a documented command; a synopsis ([--opt VALUE]) lists options to check."""
    text = command.removeprefix("pikeh").replace("[", " ").replace("]", " ").replace("...", " ")
    text = re.sub(r"\s\.\.\s", " ", text)
    return [arg for arg in shlex.split(text) if arg != ".."]


def test_the_documented_commands_are_found():
    commands = {command for _, command in COMMANDS}
    assert len(COMMANDS) >= 25
    assert not (RUN | SLOW | RUN_ELSEWHERE) - commands, (RUN | SLOW | RUN_ELSEWHERE) - commands


@pytest.mark.parametrize(("doc", "command"), COMMANDS, ids=[f"{d}:{c[:60]}" for d, c in COMMANDS])
def test_every_documented_command_parses(cli, doc, command, tmp_path, monkeypatch):
    """Its command and options exist: `--help` after them makes click parse everything and stop."""
    monkeypatch.chdir(tmp_path)
    argv = [str(tmp_path) if arg.startswith("~/") else arg for arg in _argv(command)]
    result = cli(*argv, "--help")
    assert result.exit_code == 0, f"{doc}: `{command}`:\n{result.output}"
    assert "Usage:" in result.output


@pytest.mark.parametrize("command", sorted(RUN))
def test_the_commands_that_need_nothing_else_run(cli, command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli(*_argv(command))
    assert result.exit_code == 0, f"`{command}`:\n{result.output}"


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the whole test, not each command: the demo and the audit run in turn
def test_the_slow_commands_run(run_pikeh, tmp_path):
    """The documented slow commands end well. CI runs the full demo as README's main job right after the
    tests, so here it runs on a smaller query budget (the same code path, a quarter of the time)."""
    for command in sorted(SLOW):
        extra = ("--device", "cpu", "--query-budget", "2") if command.startswith("pikeh demo") else ()
        proc = run_pikeh(*_argv(command), *extra, timeout=1800)
        assert proc.returncode == 0, f"`{command}`:\n{proc.stderr[-3000:]}"
    # The report example of docs/report.md, on the demo's output.
    assert (tmp_path / "pikeh-demo" / "report" / "index.html").exists()


@pytest.mark.parametrize(("doc", "body"), _tomls(), ids=[d for d, _ in _tomls()])
def test_every_toml_block_is_valid(doc, body):
    tomllib.loads(body)


def test_the_run_toml_example_is_a_valid_run_configuration(tmp_path):
    from pike_harness.cli import App
    from pike_harness.cli.evaluator_options import pop_evaluator_values
    from pike_harness.cli.run_cmd import merged_options, run
    from pike_harness.host.run_config import RunConfig

    body = next(body for _, body in _tomls() if body.startswith("# run.toml"))
    (tmp_path / "run.toml").write_text(body)
    App.reset()
    ctx = run.make_context("run", ["--config", str(tmp_path / "run.toml")])
    merged, strategy_values = merged_options(ctx, dict(ctx.params))
    evaluator_values = pop_evaluator_values(merged)
    config = RunConfig.build(merged, strategy_values, evaluator_values, App.host().get("strategies", merged["strategy"]))
    assert config.strategy == "pike-b" and config.strategy_options["num_branches"] == 10
    assert config.protocol == "pike" and config.fix_llm == "google:gemini-2.5-flash"

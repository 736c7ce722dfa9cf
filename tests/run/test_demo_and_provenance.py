"""`pikeh demo` runs what plugins register, and every result names the plugins behind it.

Fast: the fake evaluator (pike_harness.testing) judges programs, offline:mutate writes them.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import duckdb

from pike_harness.api import Demo, Strategy, hookimpl, prompt_templates
from pike_harness.host.plugins import PluginHost
from pike_harness.testing import fake_evaluator_plugin, invoke


def _demo_plugin(*demos: Demo) -> object:
    @hookimpl
    def register_demos(register):
        for demo in demos:
            register(demo)

    return types.SimpleNamespace(register_demos=register_demos)


SMALL = dict(strategy="best-of-n", suite="smoke", tasks="1", llm="offline:mutate", evaluator="fake", reporter=None,
             strategy_options={"parallel": 2, "max_fix_attempts": 0}, query_budget=2, llm_concurrency=2)


def test_the_builtin_default_demo_is_a_plugins_registration():
    host = PluginHost()
    assert host.provider_of("demos", "default") == "offline"
    demo = host.get("demos", "default")
    assert all(name in host.names(kind) for kind, name in demo.requirements())


def test_a_third_party_default_demo_replaces_the_builtin(tmp_path: Path):
    plugins = {"my-demo": _demo_plugin(Demo(name="default", **SMALL)), "fake-evaluator": fake_evaluator_plugin()}
    result = invoke("demo", "--device", "cpu", "--output-dir", str(tmp_path), plugins=plugins)
    assert result.exit_code == 0, result.output
    run = json.loads((tmp_path / "runs" / "demo" / "demo_s0" / "run.json").read_text())  # a seed group of 2
    assert (run["config"]["strategy"], run["config"]["evaluator"], run["config"]["query_budget"]) == \
        ("best-of-n", "fake", 2)
    assert run["config"]["tasks"] == "1"
    listing = {p["name"]: p for p in json.loads(invoke("plugins", "--json", plugins=plugins).output)}
    assert listing["offline"]["replaced"]["demos"] == {"default": "my-demo"}


def test_demo_picks_a_named_demo_and_refuses_one_it_cannot_run(tmp_path: Path):
    plugins = {"my-demo": _demo_plugin(Demo(name="tiny", **SMALL),
                                       Demo(name="broken", **{**SMALL, "strategy": "no-such-strategy"})),
               "fake-evaluator": fake_evaluator_plugin()}
    result = invoke("demo", "--demo", "tiny", "--device", "cpu", "--output-dir", str(tmp_path), plugins=plugins)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "runs" / "demo-tiny" / "demo-tiny_s1" / "run.json").exists()
    broken = invoke("demo", "--demo", "broken", "--output-dir", str(tmp_path), plugins=plugins)
    assert broken.exit_code == 1
    assert "needs strategy 'no-such-strategy'" in broken.output and "Traceback" not in broken.output


class OneQuery(Strategy):
    """A third-party strategy that takes a built-in's name."""

    name = "best-of-n"

    def run_task(self, ctx):
        ctx.attempt("optimize", prompt_templates.optimize_messages(ctx.task), key="only")


@hookimpl
def register_strategies(register):
    register(OneQuery)


def _run(tmp_path: Path, name: str, plugins: dict[str, object]) -> dict:
    result = invoke("run", "--strategy", "best-of-n", "--suite", "smoke", "--tasks", "1", "--llm", "offline:mutate",
                    "--evaluator", "fake", "--query-budget", "1", "--output-dir", str(tmp_path / "runs"),
                    "--run-name", name, plugins=plugins)
    assert result.exit_code == 0, result.output
    return json.loads((tmp_path / "runs" / name / "run.json").read_text())


def test_a_replaced_builtin_is_visible_in_run_json_and_in_the_report(tmp_path: Path):
    acme = types.SimpleNamespace(register_strategies=register_strategies)
    run = _run(tmp_path, "acme", {"acme": acme, "fake-evaluator": fake_evaluator_plugin()})
    strategy = run["plugins"]["strategy"]
    assert (strategy["plugin"], strategy["builtin"], strategy["replaces"]) == ("acme", False, ["simple-strategies"])
    assert run["plugins"]["llm_backend"][0]["distribution"] == "pike-harness"
    line = "strategy best-of-n from acme 0, replacing simple-strategies"
    assert line in run["plugins"]["third_party"]

    plain = _run(tmp_path, "plain", {"fake-evaluator": fake_evaluator_plugin()})
    assert plain["plugins"]["strategy"]["distribution"] == "pike-harness"
    assert plain["plugins"]["third_party"] == ["evaluator fake from fake-evaluator 0"]

    report = invoke("report", "--input", str(tmp_path / "runs"), "--output", str(tmp_path / "report"),
                    "--format", "csv")
    assert report.exit_code == 0, report.output
    assert f"third-party plugin: run acme: {line}" in report.output
    con = duckdb.connect(str(tmp_path / "report" / "report.duckdb"), read_only=True)
    rows = dict(con.execute("SELECT run, third_party_plugins FROM runs").fetchall())
    assert line in rows["acme"] and "simple-strategies" not in rows["plain"]


def test_a_run_does_not_resume_under_another_plugin(tmp_path: Path):
    evaluator = fake_evaluator_plugin()
    _run(tmp_path, "switch", {"fake-evaluator": evaluator})
    acme = types.SimpleNamespace(register_strategies=register_strategies)
    result = invoke("run", "--strategy", "best-of-n", "--suite", "smoke", "--tasks", "1", "--llm", "offline:mutate",
                    "--evaluator", "fake", "--query-budget", "1", "--output-dir", str(tmp_path / "runs"),
                    "--run-name", "switch", plugins={"acme": acme, "fake-evaluator": evaluator})
    assert result.exit_code == 1 and "other plugins behind its strategy" in result.output, result.output
    again = invoke("run", "--strategy", "best-of-n", "--suite", "smoke", "--tasks", "1", "--llm", "offline:mutate",
                   "--evaluator", "fake", "--query-budget", "1", "--output-dir", str(tmp_path / "runs"),
                   "--run-name", "switch", plugins={"fake-evaluator": evaluator})
    assert again.exit_code == 0, again.output

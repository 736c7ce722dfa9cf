"""`pikeh report` prints the columns its reporter declares and builds the reporter's Config from its options.

The reporter here is a third party's, added as a plugin object: the host must print its columns (and
none of the duckdb reporter's), attach only its options, and hand it a typed Config.
"""

from __future__ import annotations

import ast
import json
import types
from dataclasses import dataclass, field
from pathlib import Path

from pike_harness.api import Column, Reporter, ReportSummary, hookimpl
from pike_harness.contracts.reporting import format_value, shown_columns
from pike_harness.testing import invoke

REPORT_CMD = Path(__file__).resolve().parents[2] / "src" / "pike_harness" / "cli" / "report_cmd.py"
seen_configs: list[object] = []


@dataclass
class TallyConfig:
    top: int = field(default=3, metadata={"min": 1, "help": "Rows to keep."})
    label: str | None = field(default=None, metadata={"help": "A label."})
    tags: tuple[str, ...] = field(default=(), metadata={"help": "Tags (repeatable)."})
    loud: bool = field(default=False, metadata={"help": "Shout."})


class Tally(Reporter):
    name = "tally"
    Config = TallyConfig
    columns = (Column("run", "run-name"), Column("attempts", "attempt-count", "int"),
               Column("share", "solved-share", "percent"), Column("speed", "speed-x", "ratio"),
               Column("never", "never-filled", "usd", hide_when_empty=True),
               Column("pair", "pair", text=lambda r: f"{r['a']}/{r['b']}"))
    legend = "tally legend line"

    def report(self, options):
        seen_configs.append(self.config)
        rows = [{"run": "r1", "attempts": 7, "share": 0.5, "speed": 1.23456, "a": 1, "b": 2},
                {"run": "r2", "attempts": 2, "share": None, "speed": None, "a": 0, "b": 0}]
        return ReportSummary(output=options.output, rows=rows[: self.config.top])


@hookimpl
def register_reporters(register):
    register(Tally)


PLUGIN = types.SimpleNamespace(register_reporters=register_reporters)


def test_the_reporters_declared_columns_are_printed(tmp_path: Path):
    seen_configs.clear()
    result = invoke("report", "--reporter", "tally", "--input", str(tmp_path), "--output", str(tmp_path / "out"),
                    "--top", "2", "--tags", "a", "--tags", "b", "--label", "x", "--loud",
                    plugins={"tally-plugin": PLUGIN})
    assert result.exit_code == 0, result.output
    out = result.output
    for title in ("run-name", "attempt-count", "solved-share", "speed-x", "pair"):
        assert title in out
    assert "never-filled" not in out  # hidden: no row has a value
    assert "50%" in out and "1.235x" in out and "1/2" in out and "0/0" in out
    assert "tally legend line" in out
    for duckdb_title in ("fast_1", "EFA", "$/task", "re-timed", "noisy"):
        assert duckdb_title not in out
    assert seen_configs == [TallyConfig(top=2, label="x", tags=("a", "b"), loud=True)]
    assert "third-party plugin: this report: reporter tally from tally-plugin" in out


def test_only_the_chosen_reporters_options_exist(tmp_path: Path):
    help_text = invoke("report", "--reporter", "tally", "--help", plugins={"tally-plugin": PLUGIN}).output
    assert "--top" in help_text and "--tags" in help_text and "--money-step" not in help_text
    default_help = invoke("report", "--help", plugins={"tally-plugin": PLUGIN}).output
    assert "--money-step" in default_help and "--top" not in default_help
    bad = invoke("report", "--reporter", "tally", "--input", str(tmp_path), "--top", "0",
                 plugins={"tally-plugin": PLUGIN})
    assert bad.exit_code == 2 and "--top" in bad.output  # the Config's declared minimum


def test_defaults_come_from_the_config(tmp_path: Path):
    seen_configs.clear()
    result = invoke("report", "--reporter", "tally", "--input", str(tmp_path), "--output", str(tmp_path / "o"),
                    "--json", plugins={"tally-plugin": PLUGIN})
    assert result.exit_code == 0, result.output
    assert seen_configs == [TallyConfig()]
    assert [row["run"] for row in json.loads(result.output[: result.output.rindex("]") + 1])] == ["r1", "r2"]


def test_a_reporter_without_columns_gets_one_per_key():
    rows = [{"run": "a", "n": 1}, {"run": "b", "m": None}]
    assert [c.title for c in shown_columns((), rows)] == ["run", "n", "m"]
    assert format_value(None, "ratio") == "-" and format_value(0.123, "percent") == "12%"


def test_the_host_formats_no_reporter_metric():
    """report_cmd.py names no metric of the duckdb reporter: the reporter declares its columns."""
    strings = {n.value for n in ast.walk(ast.parse(REPORT_CMD.read_text())) if isinstance(n, ast.Constant)}
    assert not strings & {"efa_repaired", "money_score", "usd_per_task", "n_retimed", "n_noisy", "fast_1", "score_raw"}


def test_one_config_mechanism_names_the_plugin_in_errors():
    import pytest

    from pike_harness.api import UserError

    with pytest.raises(UserError, match=r"reporter 'tally' has no option\(s\) nope"):
        Tally.make_config({"nope": 1})
    assert Tally.make_config({"top": None, "label": "y"}) == TallyConfig(label="y")  # None keeps the default
    assert Tally(Tally.make_config({"top": 5})).config.top == 5

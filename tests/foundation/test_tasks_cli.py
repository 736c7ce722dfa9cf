"""Task suites, task references and the bad-input errors of `pikeh tasks`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pike_harness.contracts.suite import parse_id_list
from pike_harness.errors import UserError

GOOD_TASK = """\
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(4, 4)]

def get_init_inputs():
    return []
"""


def _suite_dir(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for filename, text in files.items():
        (folder / filename).write_text(text)
    return folder


def test_parse_id_list():
    assert parse_id_list("1-5,9,12") == [1, 2, 3, 4, 5, 9, 12]
    assert parse_id_list("3, 1-2, 3") == [3, 1, 2]
    for bad in ("a", "5-1", "1--2", ","):
        with pytest.raises(UserError):
            parse_id_list(bad)


def test_list_show_and_tasks_dir(cli, tmp_path):
    folder = _suite_dir(tmp_path, "mine", {"7_Double.py": GOOD_TASK, "helper.py": "x = 1\n"})
    result = cli("--tasks-dir", str(folder), "tasks", "list", "--json")
    assert result.exit_code == 0, result.output
    refs = {t["ref"]: t for t in json.loads(result.output)}
    assert {"smoke/1", "smoke/6", "mine/7"} <= set(refs)
    assert refs["mine/7"]["name"] == "7_Double" and refs["mine/7"]["atol"] == 0.01
    assert refs["smoke/2"]["atol"] == 1e-5  # per-task override from suite.toml
    result = cli("--tasks-dir", str(folder), "tasks", "show", "mine/7", "--json")
    assert json.loads(result.output)["source"] == GOOD_TASK


def test_tasks_path_env(cli, tmp_path):
    a = _suite_dir(tmp_path, "alpha", {"1_A.py": GOOD_TASK})
    b = _suite_dir(tmp_path, "beta", {"2_B.py": GOOD_TASK})
    result = cli("tasks", "list", "--suite", "beta", "--json",
                 env={"PIKEH_TASKS_PATH": os.pathsep.join([str(a), str(b)])})
    assert [t["ref"] for t in json.loads(result.output)] == ["beta/2"]
    listing = cli("tasks", "list", env={"PIKEH_TASKS_PATH": str(a), "COLUMNS": "200"})
    assert "(from PIKEH_TASKS_PATH)" in listing.output, "the suite's origin names the variable, not --tasks-dir"


BAD_INPUTS = {
    "unknown suite": (["tasks", "list", "--suite", "nope"], "unknown suite 'nope'"),
    "unknown task": (["tasks", "show", "smoke/99"], "suite 'smoke' has no task 99"),
    "malformed ref": (["tasks", "show", "smoke-3"], "bad task reference 'smoke-3'"),
    "missing dir": (["--tasks-dir", "/nonexistent/pikeh-tasks", "tasks", "list"], "does not exist"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_clear_line(run_pikeh, case):
    args, message = BAD_INPUTS[case]
    proc = run_pikeh(*args)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


@pytest.mark.parametrize("source,message", [
    ("import torch\nclass Model:\n    pass\n", "missing get_inputs, get_init_inputs"),
    ("def get_inputs(:\n", "syntax error on line 1"),
])
def test_bad_task_files(cli, tmp_path, source, message):
    folder = _suite_dir(tmp_path, "broken", {"3_Bad.py": source})
    result = cli("--tasks-dir", str(folder), "tasks", "list", "--suite", "broken")
    assert result.exit_code != 0
    assert "3_Bad.py" in result.output and message in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_unreadable_and_duplicate(cli, tmp_path):
    not_a_dir = tmp_path / "file.txt"
    not_a_dir.write_text("x")
    result = cli("--tasks-dir", str(not_a_dir), "tasks", "list")
    assert result.exit_code != 0 and "is not a folder" in result.output
    folder = _suite_dir(tmp_path, "dups", {"1_A.py": GOOD_TASK, "1_B.py": GOOD_TASK})
    result = cli("--tasks-dir", str(folder), "tasks", "list", "--suite", "dups")
    assert result.exit_code != 0 and "task id 1 is used by both" in result.output
    if os.geteuid() != 0:  # root reads everything, so permissions cannot make a folder unreadable
        locked = _suite_dir(tmp_path, "locked", {"1_A.py": GOOD_TASK})
        locked.chmod(0)
        try:
            result = cli("--tasks-dir", str(locked), "tasks", "list")
            assert result.exit_code != 0 and "not readable" in result.output
        finally:
            locked.chmod(0o755)


def test_ranges_take_existing_ids_but_single_ids_must_exist(cli):
    result = cli("tasks", "list", "--suite", "level3-pike", "--json")
    ids = {t["id"] for t in json.loads(result.output)}
    assert 3 not in ids and {1, 2, 4} <= ids
    from pike_harness.cli import App

    suite = App.host().get("suites", "level3-pike")
    assert [t.id for t in suite.select("1-6")] == [1, 2, 4, 6]
    assert [t.id for t in suite.select("9,1-2")] == [9, 1, 2]
    with pytest.raises(UserError, match="has no task 3"):
        suite.select("3")
    with pytest.raises(UserError, match="has no task in 11-12"):
        suite.select("11-12")


def test_precision_rule_is_pikes_by_default_and_a_suite_or_run_option(cli, tmp_path):
    """level3-pike judges precision by its tolerance only (PIKE's rule); a suite may state its precision,
    and `pikeh run --precision-rule stated` does it for one run."""
    from pike_harness.host.launch import with_precision_rule
    from pike_harness.host.tasks import load_suite
    from pike_harness.kit.prompt_templates import problem_statement

    listed = {t["ref"]: t for t in json.loads(cli("tasks", "list", "--json").output)}
    assert {listed[ref]["precision_rule"] for ref in listed if ref.split("/")[0] in ("level3-pike", "smoke")} \
        == {"tolerance"}
    folder = _suite_dir(tmp_path, "strict", {"1_A.py": GOOD_TASK,
                                            "suite.toml": "[defaults]\nprecision_rule = \"stated\"\n"})
    (task,) = load_suite(folder, origin="--tasks-dir").tasks()
    assert task.meta.precision_rule == "stated" and "float16" in problem_statement(task)
    (loose,) = with_precision_rule([task], "tolerance")
    assert "float16" not in problem_statement(loose)
    assert with_precision_rule([task], None) == [task]
    (folder / "suite.toml").write_text('[defaults]\nprecision_rule = "fp16"\n')
    result = cli("--tasks-dir", str(folder), "tasks", "list", "--suite", "strict")
    assert result.exit_code != 0 and "precision_rule must be one of tolerance, stated" in result.output

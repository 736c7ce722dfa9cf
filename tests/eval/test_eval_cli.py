"""`pikeh eval`: JSON output, exit statuses, clear errors, and no secret in what it prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

CORPUS = Path(__file__).resolve().parent / "corpus"


def test_json_output_for_an_incorrect_candidate_exits_zero(cli):
    result = cli("eval", str(CORPUS / "wrong_values.py"), "--task", "smoke/5", "--device", "cpu",
                 "--protocol", "quick", "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert record["category"] == "incorrect" and record["runtime_ms"] is None
    assert record["check"] == "allclose" and "max abs diff" in record["reason"]
    assert record["task"] == "smoke/5" and record["schema"] == 1
    assert len(record["seeds"]["hidden"]) == 2 and record["environment"]["torch"] == torch.__version__


def test_human_output_for_a_rejected_candidate(cli):
    result = cli("eval", str(CORPUS / "calls_reference.py"), "--task", "smoke/1", "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert "rejected" in result.output and "calls_reference_model" in result.output


def test_missing_file_unknown_task_and_bad_options_fail_clearly(cli, tmp_path):
    candidate = str(CORPUS / "ok_plain.py")
    missing = cli("eval", str(tmp_path / "nope.py"), "--task", "smoke/1")
    assert missing.exit_code != 0 and "does not exist" in missing.output
    unknown = cli("eval", candidate, "--task", "smoke/99", "--device", "cpu")
    assert unknown.exit_code == 1 and "no task 99" in unknown.output
    no_suite = cli("eval", candidate, "--task", "nosuch/1", "--device", "cpu")
    assert no_suite.exit_code == 1 and "unknown suite" in no_suite.output
    for option, value in (("--device", "gpu"), ("--protocol", "fastest"), ("--timeout", "0")):
        bad = cli("eval", candidate, "--task", "smoke/1", option, value)
        assert bad.exit_code == 2 and option in bad.output, bad.output
    no_evaluator = cli("eval", candidate, "--task", "smoke/1", "--evaluator", "nosuch")
    assert no_evaluator.exit_code == 1 and "unknown evaluator" in no_evaluator.output


def test_cuda_requested_without_a_gpu_is_a_clear_error(cli):
    if torch.cuda.is_available():
        return
    result = cli("eval", str(CORPUS / "ok_plain.py"), "--task", "smoke/1", "--device", "cuda")
    assert result.exit_code == 1 and "no CUDA device" in result.output


def test_help_lists_the_local_evaluator_options(cli):
    result = cli("eval", "--help")
    assert result.exit_code == 0 and "--jobs" in result.output and "--protocol" in result.output
    assert "--ray-address" not in result.output and "--io-dir" not in result.output


@pytest.mark.parametrize("command", [("eval",), ("run", "--strategy", "best-of-n"), ("baselines",), ("report",)])
def test_each_command_attaches_only_the_chosen_evaluators_options(cli, command):
    ray = cli(*command, "--evaluator", "ray", "--help")
    assert ray.exit_code == 0, ray.output
    assert "--ray-address" in ray.output and "--ray-placement" in ray.output
    assert "--jobs" not in ray.output and "--prestart" not in ray.output and "--docker-image" not in ray.output
    queue = cli(*command, "--evaluator=queue", "--help")
    assert "--io-dir" in queue.output and "--queue-key-file" in queue.output and "--jobs" not in queue.output


def test_another_evaluators_option_is_refused_and_a_config_value_is_checked(cli):
    candidate = str(CORPUS / "ok_plain.py")
    foreign = cli("eval", candidate, "--task", "smoke/1", "--evaluator", "queue", "--jobs", "2")
    assert foreign.exit_code == 2 and "No such option '--jobs'" in foreign.output
    bad = cli("eval", candidate, "--task", "smoke/1", "--evaluator", "docker", "--docker-memory", "lots")
    assert bad.exit_code == 1 and "--docker-memory 'lots': write a number" in bad.output, bad.output


def test_secrets_in_the_harness_environment_never_reach_the_candidate(run_pikeh):
    """The candidate reads its parent's environment and prints it. In the sandbox its parent is the
    sandbox's init, which holds only the scrubbed environment: the key is not there to find (before
    the sandbox it was, and only masking kept it out of the result). The reading itself succeeded."""
    secret = "sk-cli-test-0123456789abcdef"
    proc = run_pikeh("eval", str(CORPUS / "secret_leak.py"), "--task", "smoke/5", "--device", "cpu",
                     "--protocol", "quick", "--json", env={"OPENAI_API_KEY": secret, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    assert secret not in proc.stdout and secret not in proc.stderr
    record = json.loads(proc.stdout)
    assert record["category"] == "correct" and record["isolation"] == "bwrap"
    assert re.search(r"PARENT [^\n]*PIKEH_SANDBOX=", record["stdout_tail"]), record["stdout_tail"][-2000:]
    assert "OPENAI_API_KEY" not in record["stdout_tail"]

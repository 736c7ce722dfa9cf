"""`pikeh eval`: JSON output, exit statuses, clear errors, and no secret in what it prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

CORPUS = Path(__file__).resolve().parent / "corpus"
# One or two candidates per command: a pre-start pool would start processes (each a torch import, about
# 3 s of CPU on the 2-core VM) that go unused; the pool is exercised by the session batch (conftest.py).
NO_POOL = ("--prestart", "0")


def test_json_output_for_an_incorrect_candidate_exits_zero(cli):
    result = cli("eval", str(CORPUS / "wrong_values.py"), "--task", "smoke/5", "--device", "cpu",
                 "--protocol", "quick", "--json", *NO_POOL)
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert record["category"] == "incorrect" and record["runtime_ms"] is None
    assert record["check"] == "allclose" and "max abs diff" in record["reason"]
    assert record["task"] == "smoke/5" and record["schema"] == 1
    assert len(record["seeds"]["hidden"]) == 2 and record["environment"]["torch"] == torch.__version__


def test_human_output_for_a_rejected_candidate(cli):
    result = cli("eval", str(CORPUS / "calls_reference.py"), "--task", "smoke/1", "--device", "cpu", *NO_POOL)
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
    assert no_evaluator.exit_code == 2 and "unknown evaluator" in no_evaluator.output


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


def test_secrets_in_the_harness_environment_never_reach_the_candidate(cli):
    """The candidate reads its parent's environment and prints it. In the sandbox its parent is the
    sandbox's init, which holds only the scrubbed environment: the key is not there to find (before
    the sandbox it was, and only masking kept it out of the result). The reading itself succeeded.
    (In-process: the key is in this process's environment, which the evaluator's processes inherit.)"""
    secret = "sk-cli-test-0123456789abcdef"
    result = cli("eval", str(CORPUS / "secret_leak.py"), "--task", "smoke/5", "--device", "cpu",
                 "--protocol", "quick", "--json", *NO_POOL, env={"OPENAI_API_KEY": secret, "OMP_NUM_THREADS": "1"})
    assert result.exit_code == 0, result.output
    assert secret not in result.output
    record = json.loads(result.output)
    assert record["category"] == "correct" and record["isolation"] == "bwrap"
    assert re.search(r"PARENT [^\n]*PIKEH_SANDBOX=", record["stdout_tail"]), record["stdout_tail"][-2000:]
    assert "OPENAI_API_KEY" not in record["stdout_tail"]


# -- many candidates at once -------------------------------------------------------------------------

def _solutions(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir()
    for name, corpus_file in files.items():
        (folder / name).write_text((CORPUS / corpus_file).read_text(encoding="utf-8"), encoding="utf-8")
    return folder


def test_a_folder_of_solutions_gives_a_table(cli, tmp_path):
    folder = _solutions(tmp_path / "solutions", {"task_1.py": "ok_plain.py", "5_gelu.py": "wrong_values.py"})
    (folder / "notes.py").write_text("x = 1\n", encoding="utf-8")
    result = cli("eval", str(folder), "--suite", "smoke", "--device", "cpu", "--protocol", "quick", *NO_POOL)
    assert result.exit_code == 0, result.output
    assert "skipped notes.py: no task id in its name" in result.output
    rows = {line.split("│")[2].strip(): line for line in result.output.splitlines() if line.startswith("│ smoke/")}
    assert set(rows) == {"task_1.py", "5_gelu.py"}
    assert "correct" in rows["task_1.py"] and "incorrect" in rows["5_gelu.py"] and "allclose" in rows["5_gelu.py"]
    assert "5_gelu.py (smoke/5): input set 0 (seed 0), output 0: max abs diff" in result.output
    assert "2 of 2 candidates evaluated" in result.output


def test_a_manifest_as_json_lines_and_ctrl_c_reports_what_finished(tmp_path):
    """Two candidates through one evaluator; one hangs. After the first JSON line, SIGINT: exit 130,
    the finished one reported, the hanging one's process gone."""
    import signal
    import subprocess
    import sys

    from corpus_cases import sandbox_leftovers

    folder = _solutions(tmp_path / "mine", {"fast.py": "ok_plain.py", "hangs.py": "hang_forward.py"})
    manifest = tmp_path / "candidates.jsonl"
    manifest.write_text('# one object per line\n{"task": "smoke/1", "file": "mine/fast.py"}\n\n'
                        f'{{"task": "smoke/5", "file": "{folder / "hangs.py"}"}}\n', encoding="utf-8")
    workdir = tmp_path / "work"
    # A shell without job control starts a background job with SIGINT ignored, and an ignored signal stays
    # ignored across exec: Python would then never raise KeyboardInterrupt in pikeh. So the child starts
    # from SIGINT's default, however this pytest was started (a Python handler resets to it at exec).
    # -X faulthandler: if it does not stop, SIGABRT makes it print every thread's stack (the failure says where)
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen([sys.executable, "-X", "faulthandler", "-m", "pike_harness", "eval", "--manifest",
                                 str(manifest), "--json", "--device", "cpu", "--protocol", "quick", "--timeout",
                                 "300", "--workdir", str(workdir), *NO_POOL],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        first = json.loads(proc.stdout.readline())
        proc.send_signal(signal.SIGINT)
        try:
            rest, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=60)
            pytest.fail(f"pikeh eval still ran 120 s after SIGINT; its threads:\n{err[-8000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert first["file"] == str(folder / "fast.py") and first["task"] == "smoke/1" and first["category"] == "correct"
    assert rest.strip() == "" and "interrupted: 1 of 2 candidates evaluated" in err
    assert sandbox_leftovers(workdir) == []


def test_mistakes_with_many_candidates_are_one_line_errors(cli, tmp_path):
    from corpus_cases import SMOKE

    from pike_harness.host.candidate_sets import from_folder

    empty = tmp_path / "empty"
    empty.mkdir()
    unknown = _solutions(tmp_path / "unknown", {"task_1.py": "ok_plain.py", "task_99.py": "ok_plain.py"})
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "smoke/1", "file": "x.py"}\nnot json\n', encoding="utf-8")
    (tmp_path / "x.py").write_text("x = 1\n", encoding="utf-8")
    cases = {
        (str(empty), "--suite", "smoke"): "no .py files",
        (str(unknown), "--suite", "smoke"): "suite 'smoke' has no task 99",
        (str(unknown),): "is a folder: name the suite",
        (str(unknown / "task_1.py"),): "give its task with --task",
        ("--manifest", str(bad)): "bad.jsonl:2: not a JSON object",
        (): "give a candidate file with --task",
    }
    for args, message in cases.items():
        result = cli("eval", *args, "--device", "cpu")
        assert result.exit_code == 1 and message in result.output, (args, result.output)
        assert "Traceback" not in result.output
    # The benchmark's lenient form skips what the suite lacks and says so.
    lenient = from_folder(unknown, SMOKE, strict=False)
    assert [c.path.name for c in lenient.candidates] == ["task_1.py"] and "task_99.py" in lenient.skipped[0]

"""`pikeh import pike`: a small synthetic PIKE output tree becomes a run that `pikeh report` reads.

The tree has PIKE's shape (tasks/task<N>/output/iter_output/iter_<i>/attempts/attempt_<j>/ with code,
prompt, response, raw response and KernelBench-style metrics, plus baseline timing JSON files):

    task 1 (1_MLP, eager 2.0 ms, max-autotune 1.0 ms)
      iter_0/attempt_0  compile error                          -> query 1
      iter_0/attempt_1  correct, 1.0 ms (2x)                    -> query 2
      iter_1/attempt_2  fix, correct, 0.5 ms (4x)               -> query 3
      iter_1/attempt_10 incorrect (numeric order: after 2)      -> query 4
    task 9 (9_ResNet18, eager 10 ms, max-autotune 5 ms)
      iter_0/attempt_0  timeout; attempt_1 runtime error; attempt_2 nothing recorded (LLM error)

Each answered query used 40k prompt + 8k output + 2k thinking tokens (Gemini's usage_metadata), which is
$0.05 + $0.10 = $0.15 at Gemini 2.5 Pro prices.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from pikeh_duckdb.metrics import MetricParams, create_metrics, rows
from pikeh_duckdb.pike_import import baseline_mode, verdict
from pikeh_duckdb.reporter import price_rows

from pike_harness.host.store_db import materialize

USAGE = {"usage_metadata": {"prompt_token_count": 40_000, "candidates_token_count": 8_000,
                            "thoughts_token_count": 2_000, "total_token_count": 50_000}}


def attempt(root: Path, task: int, iteration: int, number: int, metrics: dict | None, *,
            code: str | None = "class ModelNew: pass\n", extra: dict | None = None) -> None:
    folder = root / "tasks" / f"task{task}" / "output" / "iter_output" / f"iter_{iteration}" / "attempts" / \
        f"attempt_{number}"
    folder.mkdir(parents=True)
    if code is None:
        return  # the model never answered: an empty folder
    (folder / "code.py").write_text(f"# task {task} iter {iteration} attempt {number}\n{code}")
    (folder / "prompt.txt").write_text(f"Optimize task {task}.")
    (folder / "response.txt").write_text(f"```python\n{code}```")
    (folder / "raw_response.json").write_text(json.dumps({"candidates": [{"text": code}], **USAGE}))
    if metrics is not None:
        (folder / "metrics.json").write_text(json.dumps({**metrics, **(extra or {})}))


def kernelbench(correct: bool | None = None, runtime: float = -1.0, **metadata: object) -> dict:
    record = {"compiled": metadata.pop("compiled", True), "correctness": bool(correct), "runtime": runtime,
              "runtime_stats": {}, "metadata": {"hardware": "NVIDIA H100 80GB HBM3", "device": "0", **metadata}}
    if correct:
        record["runtime_stats"] = {"mean": runtime, "std": runtime / 100, "min": runtime * 0.98,
                                   "max": runtime * 1.05, "num_trials": 100, "hardware": "NVIDIA H100 80GB HBM3"}
    return record


@pytest.fixture
def pike_tree(tmp_path: Path) -> Path:
    root = tmp_path / "pike-level3"
    attempt(root, 1, 0, 0, kernelbench(compiled=False, compilation_error="nvcc: error: expected ';'"))
    attempt(root, 1, 0, 1, kernelbench(True, 1.0))
    attempt(root, 1, 1, 2, kernelbench(True, 0.5), extra={"agent": "error_fixing"})
    attempt(root, 1, 1, 10, kernelbench(False, max_difference="0.37", correctness_issue="Output mismatch"))
    attempt(root, 9, 0, 0, kernelbench(timeout=True, timeout_s=600))
    attempt(root, 9, 0, 1, kernelbench(runtime_error="CUDA error: an illegal memory access was encountered",
                                       timeout_s=600))
    attempt(root, 9, 0, 2, None, code=None)
    timing = root / "results" / "timing" / "H100"
    timing.mkdir(parents=True)
    stats = lambda ms: {"mean": ms, "std": ms / 50, "min": ms, "max": ms, "num_trials": 100,  # noqa: E731
                        "hardware": "NVIDIA H100 80GB HBM3", "device": "cuda:0"}
    (timing / "baseline_time_torch.json").write_text(json.dumps(
        {"level3-pike": {"1_MLP.py": stats(2.0), "9_ResNet18.py": stats(10.0), "4_LeNet5.py": stats(0.2)}}))
    (timing / "baseline_time_torch_compile_inductor_max-autotune.json").write_text(json.dumps(
        {"level3-pike": {"1_MLP.py": stats(1.0), "9_ResNet18.py": stats(5.0)}}))
    return root


def test_import_then_report(cli, pike_tree, tmp_path):
    runs = tmp_path / "runs"
    result = cli("import", "pike", str(pike_tree), "--output-dir", str(runs), "--name", "pike-published")
    assert result.exit_code == 0, result.output
    run = runs / "pike-published"
    meta = json.loads((run / "run.json").read_text())
    assert meta["config"]["imported_from"] == "pike" and meta["config"]["query_budget"] == 4
    assert [(t["ref"], t["name"]) for t in meta["tasks"]] == [("level3-pike/1", "1_MLP"), ("level3-pike/9", "9_ResNet18")]
    folder = run / "tasks" / "level3-pike" / "1" / "attempts" / "0003_iter001_attempt002"
    assert {p.name for p in folder.iterdir()} >= {"code.py", "prompt.md", "response.md", "raw_response.json",
                                                   "result.json"}
    assert (run / "tasks" / "level3-pike" / "1" / "best.py").read_text().startswith("# task 1 iter 1 attempt 2")

    con = duckdb.connect()
    materialize([run], con)
    create_metrics(con, MetricParams(), price_rows(con, None, ()))
    attempts = {(r["task"], r["idx"]): r for r in rows(con, "FROM attempts")}
    assert [attempts[("level3-pike/1", i)]["category"] for i in (1, 2, 3, 4)] == \
        ["compile_error", "correct", "correct", "incorrect"]
    assert attempts[("level3-pike/1", 3)]["role"] == "fix"
    assert "expected ';'" in attempts[("level3-pike/1", 1)]["reason"]
    assert "0.37" in attempts[("level3-pike/1", 4)]["reason"]
    assert [attempts[("level3-pike/9", i)]["category"] for i in (1, 2, 3)] == ["timeout", "runtime_error", "llm_error"]
    final = {r["task"]: r for r in rows(con, "FROM task_final")}
    assert final["level3-pike/1"]["speedup"] == pytest.approx(4.0) and final["level3-pike/1"]["best_idx"] == 3
    assert final["level3-pike/9"]["speedup"] == 1.0
    assert final["level3-pike/1"]["spend_usd"] == pytest.approx(4 * 0.15)
    assert final["level3-pike/9"]["spend_usd"] == pytest.approx(2 * 0.15)  # the unanswered query cost nothing
    curve = {r["queries"]: r["score"] for r in rows(con, "FROM score_vs_queries")}
    assert curve == pytest.approx({1: 1.0, 2: 2 ** 0.5, 3: 2.0, 4: 2.0})
    refs = {r["mode"]: r["score"] for r in rows(con, "FROM reference_scores")}
    assert refs == pytest.approx({"compile-max-autotune": 2.0})
    assert rows(con, "SELECT gpu FROM baselines LIMIT 1")[0]["gpu"] == "NVIDIA H100 80GB HBM3"

    out = tmp_path / "report"
    shown = cli("report", "--input", str(runs), "--output", str(out), "--format", "csv,tex", "--json")
    assert shown.exit_code == 0, shown.output
    summary = json.loads(shown.output[shown.output.index("["):])
    assert summary[0]["run"] == "pike-published" and summary[0]["score"] == pytest.approx(2.0)
    assert summary[0]["efa_repaired"] == 0  # the fix has no recorded parent: PIKE's trees keep no lineage
    assert r"1\_MLP & \textbf{4.00} & 2.00 \\" in (out / "per_task.tex").read_text()
    again = cli("import", "pike", str(pike_tree), "--output-dir", str(runs), "--name", "pike-published")
    assert again.exit_code == 1 and "--force" in again.output
    assert cli("import", "pike", str(pike_tree), "--output-dir", str(runs), "--name", "pike-published",
               "--force").exit_code == 0


def test_not_a_pike_tree(cli, tmp_path):
    result = cli("import", "pike", str(tmp_path), "--output-dir", str(tmp_path / "runs"))
    assert result.exit_code == 1 and "is not a PIKE output tree" in result.output


def test_verdicts_and_baseline_modes():
    assert verdict({"compiled": True, "correctness": True, "runtime": 0.8,
                    "runtime_stats": {"mean": 0.8, "std": 0.01}})["runtime_ms"] == 0.8
    # A timeout setting is not a timeout; a failed flag is.
    assert verdict({"compiled": True, "correctness": False, "metadata": {"timeout_s": 600}})["category"] == "incorrect"
    assert verdict({"metadata": {"timed_out": True}})["category"] == "timeout"
    assert verdict({"category": "rejected", "reason": "side stream"})["category"] == "rejected"
    assert verdict({})["category"] == "runtime_error"
    assert baseline_mode("baseline_time_torch.json") == "eager"
    assert baseline_mode("baseline_time_torch_compile_inductor_default.json") == "compile"
    assert baseline_mode("baseline_time_torch_compile_inductor_max-autotune.json") == "compile-max-autotune"
    assert baseline_mode("baseline_time_tensorrt.json") == "tensorrt"


SECRET = "TOP-SECRET-deploy-key-0c6f"


def test_links_in_the_tree_are_skipped_and_nothing_outside_it_is_copied(cli, pike_tree, tmp_path):
    """A downloaded tree whose files and folders link to the importer's own files: each link is skipped
    with a warning line, and the secret reaches neither the run nor its report."""
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET + "\n")
    (tmp_path / "secret.json").write_text(json.dumps(
        {"l": {"1_MLP.py": {"mean": 1.0, "hardware": SECRET}, "3_Secret.py": {"mean": 1.0, "hardware": SECRET}}}))
    outside = tmp_path / "elsewhere"  # a PIKE-shaped folder outside the tree, every file the secret
    folder = outside / "output" / "iter_output" / "iter_0" / "attempts" / "attempt_0"
    folder.mkdir(parents=True)
    for name in ("code.py", "response.txt", "metrics.json"):
        (folder / name).symlink_to(secret)
    attempts = pike_tree / "tasks" / "task1" / "output" / "iter_output" / "iter_0" / "attempts"
    linked = attempts / "attempt_1"
    for name in ("code.py", "response.txt", "prompt.txt"):
        (linked / name).unlink()
        (linked / name).symlink_to(secret)
    (linked / "kernel.py").symlink_to(secret)  # the next code name tried
    (attempts / "attempt_5").symlink_to(folder, target_is_directory=True)
    (pike_tree / "tasks" / "task3").symlink_to(outside, target_is_directory=True)
    (pike_tree / "tasks" / "task9" / "output" / "iter_output" / "iter_7").symlink_to(
        folder.parent.parent, target_is_directory=True)
    (pike_tree / "results" / "secret_baseline.json").symlink_to(tmp_path / "secret.json")

    runs = tmp_path / "runs"
    result = cli("import", "pike", str(pike_tree), "--output-dir", str(runs), "--name", "linked")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("pikeh: warning: ")]
    for name in ("attempt_1/code.py", "attempt_1/response.txt", "attempt_1/kernel.py", "attempt_5",
                 "tasks/task3", "iter_7", "secret_baseline.json"):
        assert sum(name in line and "symbolic link" in line for line in warnings) == 1, (name, warnings)
    run = runs / "linked"
    meta = json.loads((run / "run.json").read_text())
    assert [t["ref"] for t in meta["tasks"]] == ["level3-pike/1", "level3-pike/9"]
    # attempt_1 still counts (its raw reply is its own file); its code is empty, its prompt unread
    folder = run / "tasks" / "level3-pike" / "1" / "attempts" / "0002_iter000_attempt001"
    assert (folder / "code.py").read_text() == "" and (folder / "prompt.md").read_text() == ""
    assert "class ModelNew" in (folder / "response.md").read_text()

    report = tmp_path / "report"
    shown = cli("report", "--input", str(runs), "--output", str(report), "--format", "html,csv")
    assert shown.exit_code == 0, shown.output
    for path in [*run.rglob("*"), *report.rglob("*")]:
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    assert SECRET not in result.output + shown.output


def our_record(root: Path, number: int, record: dict) -> None:
    attempt(root, 4, 0, number, None)
    folder = root / "tasks" / "task4" / "output" / "iter_output" / "iter_0" / "attempts" / f"attempt_{number}"
    (folder / "metrics.json").write_text(json.dumps(record))


def test_our_own_records_are_escaped_cut_and_checked(cli, tmp_path):
    """pike-harness result records in a tree: the reason is cut to 2000 characters, role and parent are
    escaped and cut, and a runtime that is not a number is one warning line, not a traceback."""
    root = tmp_path / "tree"
    long_role = "\x1b[2J\x1b]8;;http://x\x07critic\nagent" + "r" * 500
    our_record(root, 0, {"category": "incorrect", "reason": "mismatch " + "R" * 5000, "role": long_role,
                         "parent": "\u202eiter000_attempt000\r\n" + "p" * 500})
    our_record(root, 1, {"category": "correct", "runtime_ms": "fast"})
    our_record(root, 2, {"category": "correct", "runtime_ms": 0.5, "reason": ["a", "list"]})
    our_record(root, 3, {"category": "correct", "runtime_ms": True})
    our_record(root, 4, {"category": "correct", "runtime_ms": 0.25})
    runs = tmp_path / "runs"
    result = cli("import", "pike", str(root), "--output-dir", str(runs), "--name", "ours")
    assert result.exit_code == 0, result.output
    assert result.exception is None
    warnings = [line for line in result.output.splitlines() if line.startswith("pikeh: warning: ")]
    assert len(warnings) == 2 and all("attempt_" in w and "imported as runtime_error" in w for w in warnings)
    assert 'runtime_ms "fast" is not a positive number' in warnings[0] and "runtime_ms true" in warnings[1]
    events = [json.loads(line) for line in (runs / "ours" / "journal.jsonl").read_text().splitlines()]
    done = {e["index"]: e for e in events if e["type"] == "attempt"}
    assert [done[i]["category"] for i in (1, 2, 3, 4, 5)] == \
        ["incorrect", "runtime_error", "correct", "runtime_error", "correct"]
    assert done[1]["reason"].startswith("mismatch RRR") and len(done[1]["reason"]) == 2000
    assert 'correct but not timed: runtime_ms "fast"' in done[2]["reason"] and done[2]["runtime_ms"] is None
    assert done[3]["reason"] == '["a", "list"]' and done[3]["runtime_ms"] == 0.5
    role, parent = done[1]["role"], done[1]["parent"]
    assert len(role) == 200 and len(parent) == 200
    for text in (role, parent):
        assert not any(ch in text for ch in "\x1b\x07\n\r\u202e"), text
    assert role.startswith("\\x1b[2J") and parent.startswith("\\u202eiter000_attempt000")
    [end] = [e for e in events if e["type"] == "task_end"]
    assert end["best_runtime_ms"] == 0.25


def test_a_suite_of_dots_names_a_folder_inside_the_run(cli, pike_tree, tmp_path):
    """`--suite ..` made the task folders tasks/../1, beside the run's own files."""
    runs = tmp_path / "runs"
    result = cli("import", "pike", str(pike_tree), "--output-dir", str(runs), "--name", "dots", "--suite", "..")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pike-level3", "runs"]
    assert [p.name for p in runs.iterdir()] == ["dots"]
    assert {p.name for p in (runs / "dots").iterdir()} <= {"journal.jsonl", "run.json", "run.lock", "tasks"}
    assert (runs / "dots" / "tasks" / "_.." / "1" / "best.py").is_file()

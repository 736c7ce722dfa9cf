"""``pikeh baselines`` on the smoke suite, on the CPU: the file the reporter reads, resuming, host checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pike_harness.host.store_db import baseline_set_rows


def _lines(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "baselines.jsonl").read_text().splitlines()]


def _baselines(cli, folder: Path, cache: Path, modes: str, tasks: str = "1"):
    """No pre-started process: each sandbox starts when its baseline needs it (a pre-started pool would
    start one more, unused, after the first is taken)."""
    return cli("baselines", "--suite", "smoke", "--tasks", tasks, "--modes", modes, "--device", "cpu",
               "--protocol", "quick", "--output-dir", str(folder), "--build-cache", str(cache), "--jobs", "2",
               "--prestart", "0")


def test_eager_baselines_are_written_for_the_reporter_and_resumed(cli, tmp_path):
    folder, cache = tmp_path / "set", tmp_path / "cache"
    first = _baselines(cli, folder, cache, "eager,tensorrt")  # one task: one sandboxed baseline is enough
    assert first.exit_code == 0, first.output
    assert "skipping mode tensorrt" in first.output
    lines = _lines(folder)
    assert [(e["task"], e["mode"]) for e in lines] == [("smoke/1", "eager")]
    for event in lines:
        assert set(event) == {"type", "task", "mode", "device", "protocol", "result", "time"}
        assert event["type"] == "baseline" and event["device"] == "cpu" and event["protocol"] == "quick"
        assert event["result"]["category"] == "correct" and event["result"]["runtime_ms"] > 0
        assert event["result"]["protocol"]["name"] == "quick"
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["environment"]["host"] and meta["environment"]["cpu"] and meta["environment"]["torch"]
    assert meta["unavailable"] == {"tensorrt": "tensorrt needs a CUDA device"}
    # the markdown report says why the mode has no runtime, next to PIKE's figure
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import baselines_report

    assert "| tensorrt | not measured: tensorrt needs a CUDA device | - | 1.41x (H100, torch 2.8) |" in \
        baselines_report.render(folder)
    # the reporter's loader reads the set as it is
    rows = baseline_set_rows(folder)
    assert [r["runtime_ms"] > 0 for r in rows["baselines"]] == [True]

    again = _baselines(cli, folder, cache, "eager")
    assert again.exit_code == 0, again.output
    assert "1 entries already" in again.output and "nothing to do" in again.output
    assert len(_lines(folder)) == 1


def test_a_set_from_another_host_is_not_extended(cli, tmp_path):
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "meta.json").write_text(json.dumps({"environment": {"host": "some-other-host", "cpu": "X"}}))
    result = _baselines(cli, folder, tmp_path / "cache", "eager")
    assert result.exit_code != 0
    assert "never mix hosts" in result.output


def test_unknown_and_unavailable_modes(cli, tmp_path):
    bad = _baselines(cli, tmp_path / "a", tmp_path / "cache", "eager,fast")
    assert bad.exit_code != 0 and "unknown mode" in bad.output
    cpu_only = _baselines(cli, tmp_path / "b", tmp_path / "cache", "cudagraphs")
    assert cpu_only.exit_code != 0
    assert "skipping mode cudagraphs: cudagraphs needs a CUDA device" in cpu_only.output


@pytest.mark.slow
def test_compile_mode_is_precompiled_then_timed(cli, tmp_path):
    folder = tmp_path / "set"
    result = _baselines(cli, folder, tmp_path / "cache", "eager,compile")
    assert result.exit_code == 0, result.output
    assert "precompiled 1 of 1" in result.output
    by_mode = {e["mode"]: e["result"] for e in _lines(folder)}
    assert by_mode["eager"]["category"] == "correct"
    assert by_mode["compile"]["category"] == "correct", by_mode["compile"]["reason"]
    assert "warmup" in by_mode["compile"]["stage_seconds"]  # compiled outside the device lock
    assert any((tmp_path / "cache" / "jit").iterdir())  # the per-source Inductor cache it filled


def test_precompile_goes_through_the_evaluator_interface():
    """`pikeh baselines` asks any evaluator to precompile (Evaluator.precompile); one that cannot
    (the interface's default) is timed without the pass, and nothing reaches into its internals."""
    from rich.console import Console

    from pike_harness.cli.baselines_cmd import _precompile
    from pike_harness.contracts.evaluation import Evaluator
    from pike_harness.host.tasks import load_suite

    class Asked(Evaluator):
        name = "asked"

        def __init__(self, answer):
            self.answer, self.calls = answer, []

        def submit(self, request):
            raise AssertionError("precompiling must not evaluate")

        def describe(self):
            return {"evaluator": self.name, "jobs": 12}

        def precompile(self, requests, *, jobs=None, on_done=None):
            self.calls.append((len(requests), jobs))
            return self.answer

    task = load_suite(Path(__file__).resolve().parents[2] / "tasks" / "smoke", origin="tests").task(1)
    todo = [(task, "eager"), (task, "compile"), (task, "compile-max-autotune")]
    for answer, expected in ((None, "precompile skipped: this evaluator has no shared JIT cache"),
                             (2, "precompiled 2 of 2 entries")):
        console = Console(record=True, width=200)
        evaluator = Asked(answer)
        _precompile(evaluator, todo, None, console)
        assert evaluator.calls == [(2, 8)], "the JIT modes only, at most 8 at a time"
        assert expected in console.export_text()

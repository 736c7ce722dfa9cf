"""`pikeh eval --against-reference`: each correct candidate, one file or a folder, also timed paired
against its task's eager reference; the speedup with its 95% interval, pairs, stop reason and flag are
printed, and --json carries the PairedTiming. The fake evaluator's deterministic pairing stands in for
the timing (the real pairing is the engine's, tested there): what is tested is the command."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pike_harness.testing import fake_evaluator_plugin, invoke

GOOD = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
BROKEN = "class ModelNew(:\n"


def pikeh_eval(*args: str, noisy=None):
    plugin = fake_evaluator_plugin(noisy=noisy)
    return invoke("eval", *args, "--evaluator", "fake", plugins={"fake": plugin}), plugin


def test_one_file_prints_the_paired_speedup_with_its_interval(tmp_path: Path):
    path = tmp_path / "good.py"
    path.write_text(GOOD)
    result, plugin = pikeh_eval(str(path), "--task", "smoke/1", "--against-reference", "--retime-halfwidth", "0.05")
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("paired against the eager"))
    speedup, low, high = (float(x) for x in re.findall(r"([0-9.]+)x", line))
    assert low < speedup < high and abs(speedup - 2.0) < 0.02 and high / speedup - 1 <= 0.05
    assert "pairs, converged" in line
    [asked] = plugin.built[0].requests
    assert asked.paired is not None and asked.paired.target_halfwidth == 0.05
    as_json, _ = pikeh_eval(str(path), "--task", "smoke/1", "--against-reference", "--json")
    record = json.loads(as_json.output)
    assert record["paired"]["speedup"] > 1.9 and record["paired"]["ci_low"] < record["paired"]["ci_high"]
    plain, plugin = pikeh_eval(str(path), "--task", "smoke/1")
    assert "paired" not in plain.output and plugin.built[0].requests[0].paired is None


def test_a_folder_gives_each_correct_solution_its_paired_speedup_and_flags(tmp_path: Path):
    folder = tmp_path / "solutions"
    folder.mkdir()
    (folder / "task_1.py").write_text(GOOD)
    (folder / "task_2.py").write_text(BROKEN)
    result, _ = pikeh_eval(str(folder), "--suite", "smoke", "--against-reference",
                           noisy=lambda _request: "canary 40% off its baseline")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "paired against the eager reference" in line]
    assert len(lines) == 1 and lines[0].startswith("task_1.py (smoke/1)")  # the broken one has no timing
    assert "flagged: canary 40% off its baseline" in lines[0]
    as_json, _ = pikeh_eval(str(folder), "--suite", "smoke", "--against-reference", "--json")
    records = {json.loads(line)["task"]: json.loads(line) for line in as_json.stdout.splitlines()
               if line.startswith("{")}
    assert records["smoke/1"]["paired"]["stop"] == "converged" and records["smoke/2"]["paired"] is None


def test_an_evaluator_that_cannot_pair_says_so(tmp_path: Path):
    path = tmp_path / "good.py"
    path.write_text(GOOD)
    plugin = fake_evaluator_plugin(pairs=False)
    result = invoke("eval", str(path), "--task", "smoke/1", "--against-reference", "--evaluator", "fake",
                    plugins={"fake": plugin})
    assert result.exit_code == 0, result.output
    assert "paired against the eager reference: none (the evaluator returned no paired timing" in result.output

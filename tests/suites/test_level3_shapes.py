"""level3-pike against the published facts: file names, constructor arguments, shapes, parameter counts.

The table below is copied from shared/suite-facts/level3-pike.md (rounded parameter counts as
published) plus the exact counts of these files, which must round to the published ones. Every
model is built on the meta device, so the whole suite costs about a second and no memory.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import torch

from pike_harness.worker.inside.loading import load_source

REPO = Path(__file__).resolve().parents[2]
SUITE_DIR = REPO / "tasks" / "level3-pike"

# id: (file, init args, input shapes, output shape, published params, exact params)
FACTS: dict[int, tuple[str, list, list[tuple[int, ...]], tuple[int, ...], str, int]] = {
    1: ("1_MLP.py", [1000, [400, 800], 500], [(1, 1000)], (1, 500), "1.12M", 1121700),
    2: ("2_ShallowWideMLP.py", [1000, [2000, 2000], 10], [(1, 1000)], (1, 10), "6.02M", 6024010),
    4: ("4_LeNet5.py", [10], [(1, 1, 32, 32)], (1, 10), "61.7K", 61706),
    6: ("6_GoogleNetInceptionModule.py", [480, 192, 96, 208, 16, 48, 64], [(10, 480, 224, 224)],
        (10, 512, 224, 224), "376K", 376176),
    8: ("8_ResNetBasicBlock.py", [3, 64, 1], [(10, 3, 224, 224)], (10, 64, 224, 224), "39.2K", 39168),
    9: ("9_ResNet18.py", [1000], [(2, 3, 224, 224)], (2, 1000), "11.69M", 11689512),
    10: ("10_ResNet101.py", [[3, 4, 23, 3], 1000], [(10, 3, 224, 224)], (10, 1000), "44.55M", 44549160),
    13: ("13_DenseNet121TransitionLayer.py", [32, 64], [(10, 32, 224, 224)], (10, 64, 112, 112), "2.1K", 2112),
    14: ("14_DenseNet121DenseBlock.py", [6, 32, 32], [(10, 32, 224, 224)], (10, 224, 224, 224), "195K", 194880),
    15: ("15_DenseNet121.py", [32, 10], [(10, 3, 224, 224)], (10, 10), "9.85M", 9854346),
    16: ("16_DenseNet201.py", [32, 10], [(10, 3, 224, 224)], (10, 10), "30.06M", 30064778),
    17: ("17_SqueezeNetFireModule.py", [3, 6, 64, 64], [(10, 3, 224, 224)], (10, 128, 224, 224), "4.0K", 3992),
    19: ("19_MobileNetV1.py", [1000, 3, 1.0], [(10, 3, 224, 224)], (10, 1000), "4.23M", 4231976),
    20: ("20_MobileNetV2.py", [1000], [(10, 3, 224, 224)], (10, 1000), "3.50M", 3504872),
    21: ("21_EfficientNetMBConv.py", [112, 192, 5, 2, 6], [(10, 112, 224, 224)], (10, 192, 112, 112),
         "224K", 224160),
    22: ("22_EfficientNetB0.py", [1000], [(10, 3, 224, 224)], (10, 1000), "3.92M", 3922408),
    23: ("23_EfficientNetB1.py", [1000], [(10, 3, 240, 240)], (10, 1000), "2.66M", 2661928),
    24: ("24_EfficientNetB2.py", [1000], [(2, 3, 224, 224)], (2, 1000), "6.87M", 6868328),
    25: ("25_ShuffleNetUnit.py", [240, 480, 3], [(10, 240, 224, 224)], (10, 480, 224, 224), "147K", 147480),
    26: ("26_ShuffleNet.py", [1000], [(10, 3, 224, 224)], (10, 1000), "3.34M", 3338524),
    27: ("27_RegNet.py", [3, 3, [64, 128, 256], 10], [(8, 3, 224, 224)], (8, 10), "1.15M", 1149770),
    29: ("29_SwinMLP.py", [], [(10, 3, 224, 224)], (10, 1000), "19.96M", 19959292),
    30: ("30_SwinTransformerV2.py", [], [(10, 3, 224, 224)], (10, 1000), "28.35M", 28347154),
    31: ("31_VisionAttention.py", [128, 4], [(2, 128, 128, 128)], (2, 128, 128, 128), "66.3K", 66304),
    33: ("33_VanillaRNN.py", [1024, 256, 128], [(8, 1024), (8, 256)], (8, 128), "361K", 360832),
    43: ("43_MinGPTCausalAttention.py", [768, 8, 0.0, 0.0, 1024], [(128, 512, 768)], (128, 512, 768),
         "2.36M", 2362368),
    44: ("44_MiniGPTBlock.py", [768, 8, 0.0, 0.0, 1024], [(128, 512, 768)], (128, 512, 768), "7.09M", 7087872),
    48: ("48_Mamba2ReturnY.py", [16, 128, 8, 64, 16, 64], [(16, 128, 8, 64)], (16, 128, 8, 64), "541K", 540672),
    49: ("49_Mamba2ReturnFinalState.py", [16, 128, 8, 64, 16, 64], [(16, 128, 8, 64)], (16, 8, 64, 16),
         "541K", 540672),
    50: ("50_ReLUSelfAttention.py", [768, 12, 1024], [(16, 1024, 768)], (16, 1024, 768), "2.36M", 2362368),
}

# Tasks whose quirks must be recorded in suite.toml: the facts file's, plus the classification nets
# whose output the audit found to ignore the input (default init, eval-mode BN).
TASKS_WITH_QUIRKS = {8, 15, 16, 20, 22, 23, 24, 26, 27, 29, 30, 31, 33, 48, 49, 50} | {9, 10, 19}


def _load(task_id: int):
    path = SUITE_DIR / FACTS[task_id][0]
    return load_source(path.read_text(encoding="utf-8"), f"facts_level3_{task_id}")


def _rounds_to(exact: int, published: str) -> bool:
    """True when ``exact`` prints as the facts' rounded figure ("11.69M", "61.7K", "376K")."""
    match = re.fullmatch(r"(\d+)(?:\.(\d+))?([KM])", published)
    assert match, published
    decimals = len(match.group(2) or "")
    unit = {"K": 1e3, "M": 1e6}[match.group(3)]
    return f"{exact / unit:.{decimals}f}" == published[:-1]


def test_the_suite_holds_exactly_the_30_published_files():
    found = sorted(p.name for p in SUITE_DIR.glob("*.py"))
    assert found == sorted(name for name, *_ in FACTS.values())


@pytest.mark.parametrize("task_id", sorted(FACTS))
def test_exact_counts_round_to_the_published_ones(task_id):
    _, _, _, _, published, exact = FACTS[task_id]
    assert _rounds_to(exact, published), f"{exact} does not print as {published}"


@pytest.mark.parametrize("task_id", sorted(FACTS))
def test_task_matches_the_facts_on_the_meta_device(task_id):
    _, init_args, input_shapes, output_shape, _, exact = FACTS[task_id]
    module = _load(task_id)
    assert module.get_init_inputs() == init_args
    with torch.device("meta"), torch.no_grad():
        model = module.Model(*module.get_init_inputs()).eval()
        inputs = module.get_inputs()
        output = model(*inputs)
    assert [tuple(x.shape) for x in inputs] == input_shapes
    assert all(x.dtype == torch.float32 for x in inputs)
    assert isinstance(output, torch.Tensor), "every level3-pike output is a single tensor"
    assert tuple(output.shape) == output_shape
    assert output.dtype == torch.float32
    assert sum(p.numel() for p in model.parameters()) == exact


@pytest.mark.parametrize("task_id", sorted(FACTS))
def test_inputs_are_plain_cpu_randn(task_id):
    """get_inputs draws with torch.randn and names no device or dtype (the harness moves tensors)."""
    tree = ast.parse((SUITE_DIR / FACTS[task_id][0]).read_text(encoding="utf-8"))
    (get_inputs,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"]
    calls = [n for n in ast.walk(get_inputs) if isinstance(n, ast.Call)]
    draws = [c for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr.startswith("rand")]
    assert draws and all(c.func.attr == "randn" for c in draws)
    assert not [k.arg for c in draws for k in c.keywords if k.arg in ("device", "dtype")]


def test_suite_metadata_records_the_same_expectations_and_the_quirks():
    from pike_harness.host.tasks import load_suite

    suite = load_suite(SUITE_DIR, origin="test")
    tasks = {t.id: t for t in suite.tasks()}
    assert sorted(tasks) == sorted(FACTS)
    assert suite.title and "2511.16964" in suite.source
    for task_id, (_, _, input_shapes, output_shape, _, exact) in FACTS.items():
        meta = tasks[task_id].meta
        assert (meta.atol, meta.rtol) == (1e-2, 1e-2), "PIKE's tolerances must not change silently"
        assert meta.extra["params"] == exact
        assert [tuple(s) for s in meta.extra["input_shapes"]] == input_shapes
        assert tuple(meta.extra["output_shape"]) == output_shape
        assert meta.extra["eager_ms_h100"] > 0
        assert bool(meta.quirks) == (task_id in TASKS_WITH_QUIRKS), task_id
    assert "near_zero" in tasks[20].meta.extra["audit_known"]
    from pike_harness.host.audit_report import FINDING_CODES

    for task in tasks.values():
        assert set(task.meta.extra.get("audit_known", ())) <= set(FINDING_CODES), task.ref


def test_check_task_agrees_with_the_facts():
    from pike_harness.host.audit import check_task
    from pike_harness.host.tasks import load_suite

    for task in load_suite(SUITE_DIR, origin="test").tasks():
        _, init_args, input_shapes, output_shape, _, exact = FACTS[task.id]
        result = check_task(task)
        assert result.status == "ok", (task.ref, result.error, result.problems)
        assert result.params == exact
        assert result.init_args == init_args
        assert [tuple(s) for s in result.input_shapes] == input_shapes
        assert [tuple(s) for s in result.output_shapes] == [output_shape]


def test_pikeh_tasks_check_covers_the_suite_in_seconds(cli):
    """As docs/tasks.md shows it (the docs-examples test only parses it): every model is built on the meta
    device, which is what makes it take seconds (no wall-clock bound here: CI runners are loaded)."""
    res = cli("tasks", "check", "--suite", "level3-pike", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert len(rows) == 30 and {r["status"] for r in rows} == {"ok"}
    assert {r["mode"] for r in rows} == {"meta"}

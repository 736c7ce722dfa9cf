"""offline:mutate writes real programs: every non-broken variant runs on CPU and matches the reference.

Programs are loaded with the worker's own loading helpers (same seeding as the evaluator: inputs under
seed 0.., weights under seed 1) and compared with the task's tolerance.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest
import torch
from pikeh_offline import catalogue
from pikeh_offline.catalogue import Features
from pikeh_offline.mutate import NOT_AN_LLM, MutateBackend
from pikeh_offline.prompt import DEFAULT_TOLERANCE, parse_prompt

from pike_harness.contracts.llm import FIX, OPTIMIZE, BackendOptions, GenerationParams, LLMRequest
from pike_harness.contracts.model import Task
from pike_harness.host.tasks import load_suite
from pike_harness.kit import code_fences, idea_lists, prompt_templates
from pike_harness.worker.inside.loading import (
    build_model,
    init_inputs,
    load_source,
    make_inputs,
    module_name_for,
)
from pike_harness.worker.records import EvalResult

REPO = Path(__file__).resolve().parents[2]
SMOKE = load_suite(REPO / "tasks" / "smoke", origin="test").tasks()
SMOKE_IDS = [t.name for t in SMOKE]


def _outputs(task: Task, program: str, tmp_path: Path, seeds=(0, 1)) -> list[tuple[object, object]]:
    """(reference output, candidate output) per input seed, both models built like the evaluator does."""
    reference = load_source(task.source, module_name_for(task.source, "ref"))
    candidate = load_source(program, module_name_for(program, "cand"), directory=tmp_path)
    args = init_inputs(reference)
    ref_model = build_model(reference.Model, args, weight_seed=1, device="cpu")
    new_model = build_model(candidate.ModelNew, args, weight_seed=1, device="cpu")
    pairs = []
    for seed in seeds:
        inputs = make_inputs(reference, seed)
        with torch.no_grad():
            expected = ref_model(*[x.clone() for x in inputs])
            got = new_model(*[x.clone() for x in inputs])
        pairs.append((expected, got))
    return pairs


def _assert_matches(task: Task, program: str, tmp_path: Path, atol: float | None = None,
                    rtol: float | None = None) -> None:
    for expected, got in _outputs(task, program, tmp_path):
        assert type(got) is torch.Tensor
        assert got.shape == expected.shape and got.dtype == expected.dtype
        assert torch.allclose(got, expected, atol=atol or task.meta.atol, rtol=rtol or task.meta.rtol), \
            f"max diff {(got - expected).abs().max().item():.3g}"


def _transform_sets(task: Task, *, allow_compile: bool = False) -> list[tuple[str, ...]]:
    names = [t.name for t in catalogue.applicable(Features.of(task.source, None), allow_compile=allow_compile)]
    sets = [()] + [(n,) for n in names] + list(itertools.combinations(names, 2))
    return [catalogue.canonical(s) for s in sets]


@pytest.mark.parametrize("task", SMOKE, ids=SMOKE_IDS)
def test_every_correct_variant_runs_and_matches_the_reference(task: Task, tmp_path: Path):
    base = catalogue.base_from_reference(task.source)
    sets = _transform_sets(task)
    assert len(sets) >= 4
    for transforms in sets:
        program = catalogue.build_program(base, catalogue.REFERENCE_CLASS, transforms)
        _assert_matches(task, program, tmp_path)
        assert catalogue.read_marker(program) == (transforms, None)


def test_conv_tasks_get_folding_and_channels_last():
    conv = next(t for t in SMOKE if "Conv" in t.name)
    names = {t.name for t in catalogue.applicable(Features.of(conv.source, None))}
    assert {"fold_conv_bn", "channels_last"} <= names
    gelu = next(t for t in SMOKE if "GELU" in t.name)
    assert "fold_conv_bn" not in {t.name for t in catalogue.applicable(Features.of(gelu.source, None))}


def test_folding_really_removes_the_batchnorm(tmp_path: Path):
    conv = next(t for t in SMOKE if "Conv" in t.name)
    program = catalogue.build_program(catalogue.base_from_reference(conv.source), catalogue.REFERENCE_CLASS,
                                      ("fold_conv_bn",))
    module = load_source(program, module_name_for(program, "fold"), directory=tmp_path)
    reference = load_source(conv.source, module_name_for(conv.source, "ref"))
    model = build_model(module.ModelNew, init_inputs(reference), weight_seed=1, device="cpu")
    with torch.no_grad():
        model(*make_inputs(reference, 0))
    (built,) = model._built.values()
    kinds = {type(m).__name__ for m in built.modules()}
    assert "BatchNorm2d" not in kinds and "Conv2d" in kinds


@pytest.mark.parametrize("task", SMOKE[:3], ids=SMOKE_IDS[:3])
def test_broken_variants_fail_the_way_they_say(task: Task, tmp_path: Path):
    base = catalogue.base_from_reference(task.source)
    syntax = catalogue.build_program(base, catalogue.REFERENCE_CLASS, ("inference_mode",), broken="syntax_error")
    with pytest.raises(SyntaxError):
        compile(syntax, "candidate.py", "exec")
    runtime = catalogue.build_program(base, catalogue.REFERENCE_CLASS, ("inference_mode",), broken="runtime_error")
    with pytest.raises(RuntimeError):
        _outputs(task, runtime, tmp_path, seeds=(0,))
    wrong = catalogue.build_program(base, catalogue.REFERENCE_CLASS, (), broken="wrong_output")
    ((expected, got),) = _outputs(task, wrong, tmp_path, seeds=(0,))
    assert got.shape == expected.shape
    assert not torch.allclose(got, expected, atol=task.meta.atol, rtol=task.meta.rtol)


def test_programs_never_name_the_reference_class():
    """The evaluator rejects candidates that call or subclass `Model`; ours rename it away."""
    source = ('import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    """Uses Model(...)."""\n'
              '    def __init__(self, n):\n        super(Model, self).__init__()\n'
              '        self.fc = nn.Linear(n, n)\n\n    def forward(self, x):\n        return self.fc(x)\n\n'
              'def get_inputs():\n    return [torch.randn(2, 4)]\n\ndef get_init_inputs():\n    return [4]\n')
    program = catalogue.build_program(catalogue.base_from_reference(source), catalogue.REFERENCE_CLASS,
                                      ("inference_mode",))
    assert not re.search(r"\bModel\b", program)
    names = {n.id for n in ast.walk(ast.parse(program)) if isinstance(n, ast.Name)}
    assert "Model" not in names and "_Reference" in names
    namespace: dict = {}
    exec(compile(program, "candidate.py", "exec"), namespace)  # super(_Reference, self) still works
    torch.manual_seed(1)
    model = namespace["ModelNew"](4).eval()
    assert model(torch.randn(2, 4)).shape == (2, 4)


def test_half_precision_only_when_the_prompt_allows_it(tmp_path: Path):
    task = next(t for t in SMOKE if "MLP" in t.name)
    fp32 = parse_prompt(prompt_templates.optimize_messages(task))
    # PIKE's prompts state no tolerance, so the offline coder assumes its default.
    assert fp32.half is None and (fp32.atol, fp32.rtol) == (DEFAULT_TOLERANCE, DEFAULT_TOLERANCE)
    assert "half" not in {t.name for t in catalogue.applicable(Features.of(task.source, fp32.half))}
    relaxed = Task(task.suite, task.id, task.name, task.path,
                   meta=type(task.meta)(atol=5e-2, rtol=5e-2, precision="bf16", precision_rule="stated"))
    info = parse_prompt(prompt_templates.optimize_messages(relaxed))
    assert info.half == "bf16"
    program = catalogue.build_program(catalogue.base_from_reference(task.source), catalogue.REFERENCE_CLASS,
                                      ("half",), half=info.half)
    _assert_matches(task, program, tmp_path, atol=5e-2, rtol=5e-2)  # outputs cast back to float32


@pytest.mark.slow
def test_compile_variant_matches_the_reference(tmp_path: Path):
    task = next(t for t in SMOKE if "GELU" in t.name)
    program = catalogue.build_program(catalogue.base_from_reference(task.source), catalogue.REFERENCE_CLASS,
                                      ("inference_mode", "compile"))
    _assert_matches(task, program, tmp_path)


# -- the backend, driven by the real PIKE prompts ---------------------------------------------------

def _ask(backend: MutateBackend, messages, role: str, key: str | None = None) -> str:
    response = backend.complete(LLMRequest(messages=messages, role=role, key=key))
    assert response.is_llm is False and response.cost_usd == 0.0 and response.model_id == NOT_AN_LLM
    assert NOT_AN_LLM in response.text
    return response.text


def _check(task: Task, text: str, tmp_path: Path) -> str | None:
    """Run the program in a reply; returns its deliberate breakage (None when it must be correct)."""
    program = code_fences.extract_code(text)
    transforms, broken = catalogue.read_marker(program)
    if broken is None:
        _assert_matches(task, program, tmp_path)
    return broken


def test_a_pike_search_round_trip_on_the_smoke_suite(tmp_path: Path):
    """brainstorm -> optimize per idea -> fix the broken ones -> improve a correct one, on every task."""
    backend = MutateBackend("mutate", BackendOptions(extra={"mutate_compile_rate": 0.0}))
    broken_seen = 0
    for task in SMOKE:
        ideas = idea_lists.parse_ideas(_ask(backend, prompt_templates.brainstorm_messages(task), "brainstorm"))
        assert 3 <= len(ideas) <= 10
        parents = []
        for idea in ideas[:3]:
            text = _ask(backend, prompt_templates.optimize_messages(task, idea), OPTIMIZE)
            program = code_fences.extract_code(text)
            broken = _check(task, text, tmp_path)
            if broken is None:
                parents.append(program)
                continue
            broken_seen += 1
            failure = EvalResult(request_id="r", task=task.ref, category="runtime_error", reason="boom",
                                 stderr_tail="Traceback ...")
            fixed = _ask(backend, prompt_templates.fix_messages(task, program, failure), FIX)
            assert _check(task, fixed, tmp_path) is None
            parents.append(code_fences.extract_code(fixed))
        child = _ask(backend, prompt_templates.improve_messages(task, parents[0]), OPTIMIZE)
        parent_transforms = catalogue.read_marker(parents[0])[0]
        child_transforms = catalogue.read_marker(code_fences.extract_code(child))[0]
        assert child_transforms != parent_transforms or not child_transforms
        _check(task, child, tmp_path)
    assert broken_seen >= 1  # the error-fixing path is exercised


def test_fix_of_a_foreign_program_rewrites_from_the_reference(tmp_path: Path):
    task = SMOKE[0]
    foreign = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return undefined(x)\n"
    failure = EvalResult(request_id="r", task=task.ref, category="runtime_error", reason="NameError")
    text = _ask(MutateBackend("mutate", BackendOptions()), prompt_templates.fix_messages(task, foreign, failure), FIX)
    assert _check(task, text, tmp_path) is None


def test_improving_a_foreign_solution_wraps_it(tmp_path: Path):
    task = SMOKE[0]
    foreign = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
               "    def __init__(self, in_features, out_features):\n        super().__init__()\n"
               "        self.linear = nn.Linear(in_features, out_features, bias=False)\n\n"
               "    def forward(self, x):\n        return torch.relu(self.linear(x))\n")
    backend = MutateBackend("mutate", BackendOptions(extra={"mutate_broken_rate": 0.0, "mutate_compile_rate": 0.0}))
    text = _ask(backend, prompt_templates.improve_messages(task, foreign), OPTIMIZE)
    program = code_fences.extract_code(text)
    assert "class _Parent(" in program and "_Parent(*args, **kwargs)" in program
    _assert_matches(task, program, tmp_path)


def test_deterministic_and_varied():
    task = SMOKE[3]
    messages = prompt_templates.improve_messages(task, catalogue.build_program(
        catalogue.base_from_reference(task.source), catalogue.REFERENCE_CLASS, ("inference_mode",)))
    first, second = MutateBackend("mutate", BackendOptions()), MutateBackend("mutate", BackendOptions())
    run_a = [_ask(first, messages, OPTIMIZE) for _ in range(6)]
    run_b = [_ask(second, messages, OPTIMIZE) for _ in range(6)]
    assert run_a == run_b  # same prompts in the same order: same answers
    assert len(set(run_a)) > 1  # identical prompts get successive variants
    keyed = [_ask(MutateBackend("mutate", BackendOptions()), messages, OPTIMIZE, key=f"k{i}") for i in range(6)]
    assert keyed == [_ask(MutateBackend("mutate", BackendOptions()), messages, OPTIMIZE, key=f"k{i}")
                     for i in range(6)]
    seeded = {MutateBackend("mutate", BackendOptions()).complete(
        LLMRequest(messages=messages, params=GenerationParams(seed=s), key="k0")).text for s in range(6)}
    assert len(seeded) > 1  # params.seed enters the choice


def test_broken_share_follows_the_option():
    task = SMOKE[0]

    def share(rate: float) -> float:
        backend = MutateBackend("mutate", BackendOptions(extra={"mutate_broken_rate": rate}))
        texts = [_ask(backend, prompt_templates.optimize_messages(task), OPTIMIZE, key=f"q{i}") for i in range(80)]
        return sum(catalogue.read_marker(code_fences.extract_code(t))[1] is not None for t in texts) / len(texts)

    assert 0.12 <= share(0.25) <= 0.40
    assert share(0.0) == 0.0
    assert share(1.0) == 1.0


def test_compile_variants_are_a_minority():
    task = SMOKE[0]
    backend = MutateBackend("mutate", BackendOptions())
    texts = [_ask(backend, prompt_templates.optimize_messages(task), OPTIMIZE, key=f"q{i}") for i in range(100)]
    compiled = sum("compile" in catalogue.read_marker(code_fences.extract_code(t))[0] for t in texts)
    assert 2 <= compiled <= 20


def test_without_a_reference_it_says_so():
    text = _ask(MutateBackend("mutate", BackendOptions()), [{"role": "user", "content": "Say hello"}], OPTIMIZE)
    assert "no reference program" in text

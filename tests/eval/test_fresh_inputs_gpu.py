"""Fresh calls on a CUDA GPU (``pytest -m gpu``): a cache keyed on the input's content, on a model whose
call (milliseconds) costs far more than reading the key back to the host, is ``rejected/content_cache``;
the same model computed honestly is ``correct`` with its fresh calls made and recorded. (On a launch-bound
model the read-back costs more than the call, so such a cache gains nothing there: corpus
``cache_by_content_sample`` computes honestly on CUDA.)"""

from __future__ import annotations

import pytest

from pike_harness.worker.supervise import fresh_inputs

pytestmark = pytest.mark.gpu

HEAVY_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Eight square layers with tanh: about 137 GFLOP per call, milliseconds on any GPU."""

    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


def get_inputs():
    return [torch.randn(512, 4096)]


def get_init_inputs():
    return [4096, 8]
'''

HONEST = HEAVY_TASK.replace("class Model(", "class ModelNew(")

CACHE = HONEST.replace("super().__init__()", "super().__init__()\n        self.answers = {}").replace('''    def forward(self, x):
        for layer in self.layers:''', '''    def forward(self, x):
        flat = x.reshape(-1)
        key = tuple(flat[:4].tolist() + flat[-4:].tolist())
        if key in self.answers:
            return self.answers[key]
        self.answers[key] = self._compute(x).clone()
        return self.answers[key]

    def _compute(self, x):
        for layer in self.layers:''')


@pytest.fixture(scope="module")
def heavy_results(tmp_path_factory):
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions
    from pike_harness.contracts.model import Task

    folder = tmp_path_factory.mktemp("heavy-task")
    path = folder / "1_HeavyTanhStack.py"
    path.write_text(HEAVY_TASK)
    task = Task(suite="tests", id=1, name=path.stem, path=path)
    evaluator = LocalEvaluator(EvaluatorOptions(device="cuda:0", protocol="quick", workdir=folder / "work",
                                                config=LocalEvaluator.Config(jobs=2)))
    try:
        futures = {name: evaluator.submit(task.eval_request(source)) for name, source in
                   (("honest", HONEST), ("cache", CACHE))}
        yield {name: future.result(timeout=1200) for name, future in futures.items()}
    finally:
        evaluator.close()


def test_a_content_cache_on_a_heavy_model_is_rejected(heavy_results):
    result = heavy_results["cache"]
    assert (result.category, result.check) == ("rejected", "content_cache"), result.reason
    print(f"\ncache: {result.environment['fresh_inputs']}")


def test_the_honest_heavy_model_is_correct_with_its_fresh_calls_recorded(heavy_results):
    result = heavy_results["honest"]
    assert result.category == "correct", result.reason
    fresh = result.environment["fresh_inputs"]
    assert fresh["calls"] == 8 and len(result.seeds["fresh"]) == fresh_inputs.pool_size(8, paired=False)
    print(f"\nhonest: {fresh}")

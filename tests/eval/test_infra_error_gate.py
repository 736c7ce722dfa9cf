"""The child's "infra_error" (the harness's own failure, retried and never a verdict) is believed only
when the harness's code sent it: before the candidate's import, or with the running command's nonce.
A forged one is ``rejected/forged_report`` (the corpus: ``forged_infra_error_*``); this is the honest
side: a failure of the task's inputs in the child, before the candidate runs, stays the harness's."""

from __future__ import annotations

import pytest

from pike_harness.contracts.evaluation import EvaluatorError
from pike_harness.contracts.model import Task

# The reference process imports the whole task; the candidate's process imports it without its classes,
# where the module-level alias of Model fails: a failure on the harness's side, before the candidate.
TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


REFERENCE_ALIAS = Model


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''
CANDIDATE = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''


def test_a_failure_before_the_candidates_import_is_the_harnesss(cpu_evaluator, tmp_path):
    path = tmp_path / "7_AliasedModel.py"
    path.write_text(TASK, encoding="utf-8")
    task = Task(suite="tests", id=7, name=path.stem, path=path)
    with pytest.raises(EvaluatorError, match="the task's inputs failed: NameError"):
        cpu_evaluator.submit(task.eval_request(CANDIDATE)).result(600)

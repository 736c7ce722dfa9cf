# threat: 10 (import the task's module to reach the reference): loads the smoke task from the
# harness's task package by name
# task: smoke/1
# expect: rejected/harness_access
import importlib

import torch.nn as nn

_task = importlib.import_module("pikeh_tasks.smoke.1_MatmulReLU")


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.reference = _task.Model(in_features, out_features)

    def forward(self, x):
        return self.reference(x)

# threat: 3 (constant / near-zero output inside the tolerance): the task's outputs are ~1e-4, so
# zeros pass allclose(atol=1e-2); only the "outputs must vary with the inputs" check catches it.
# task: tasks/1_TinyOutput.py
# expect: rejected/constant_output
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.out_features = out_features

    def forward(self, x):
        return torch.zeros(x.shape[0], self.out_features, device=x.device)

# threat: 11 (precision downgrade): turns TF32 on from inside forward; the flags are reset to the
# task's before timing and the change is noted in the result (the output is still judged by the
# task's tolerance)
# task: smoke/1
# expect: correct
# flag: changed_backend_flags
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
        return torch.relu(self.linear(x))

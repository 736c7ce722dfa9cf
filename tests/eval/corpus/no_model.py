# category: compile_error (defines neither ModelNew nor Model)
# task: smoke/5
# expect: compile_error/load
import torch.nn.functional as F


def forward(x):
    return F.gelu(x)

# threat: none (legitimate): builds a small C library with load_inline at import (served by the
# evaluator's build cache when it has one) and uses it in forward; needs only a C++ compiler.
# task: smoke/1
# expect: correct
# limits: compile_timeout_s=600 run_timeout_s=600
# (longer limits than the batch's 120 s: a build on a loaded 2-core CI machine can take that long)
import ctypes

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_lib = load_inline(name="pikeh_corpus_scale", cpp_sources=['extern "C" int pikeh_corpus_scale() { return 1; }'],
                   no_implicit_headers=True, is_python_module=False)
SCALE = ctypes.CDLL(_lib).pikeh_corpus_scale()


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x)) * SCALE

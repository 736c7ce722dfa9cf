# threat: none (legitimate): a load_inline build with ordinary flags of each kind (optimisation, a
# macro with a value, a warning switch, a library by name) is built and used
# task: smoke/1
# expect: correct
import ctypes

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_lib = load_inline(
    name="pikeh_flags_ok",
    cpp_sources=['extern "C" int pikeh_flags_ok() { return PIKEH_SCALE; }'],
    extra_cflags=["-O3", "-DPIKEH_SCALE=1", "-Wno-unused-function"],
    extra_ldflags=["-lm"],
    no_implicit_headers=True,
    is_python_module=False,
)
SCALE = ctypes.CDLL(_lib).pikeh_flags_ok()


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x)) * SCALE

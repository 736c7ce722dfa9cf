# threat: 13 (fill the disk, through the build cache): a load_inline source whose object file holds a
# 64 MiB section (two lines of inline assembly; a larger one fills the host's disk at about 1 GB/s);
# the shared build stops at the request's disk bound, publishes nothing, and the verdict says why
# task: smoke/1
# expect: compile_error/build_limit
# limits: disk_mb=32 compile_timeout_s=600 run_timeout_s=600
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = 'asm(".section .data.pikeh_big,\\"aw\\"\\n.space 67108864\\n.previous");\nextern "C" int pikeh_big() { return 1; }'
_lib = load_inline(name="pikeh_corpus_big", cpp_sources=[SOURCE], no_implicit_headers=True, is_python_module=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return self.linear(x).relu()

# threat: 26 (hand-out written through a link): before its load_inline call is served by the build
# cache, it links every folder name an older harness handed libraries out into ("extensions", and a
# catch-all for whatever else it guesses) to the evaluator's work folder outside the sandbox; the
# library must arrive in a folder it has never seen, and nothing may be written outside
# task: smoke/5
# expect: correct
import ctypes
import os
from pathlib import Path

import torch.nn.functional as F
from torch import nn
from torch.utils.cpp_extension import load_inline

HERE = Path.cwd()
for name in ("extensions", "extension", "ext", "build"):
    os.symlink(HERE.parents[1], HERE / name)
_lib = load_inline(
    name="pikeh_files_one",
    cpp_sources=['extern "C" int pikeh_files_one() { return 1; }'],
    no_implicit_headers=True,
    is_python_module=False,
)
ONE = ctypes.CDLL(_lib).pikeh_files_one()
assert Path(_lib).parent.parent == HERE and not Path(_lib).parent.is_symlink()


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x) * ONE

# threat: 26 (JIT cache squatting): plants a plain file where the honest neighbour's shared JIT folder
# goes, and a link beside it; the shared JIT root is hidden from candidates, so nothing lands there,
# it stays correct, and the neighbour (in this run and in later ones) is unaffected
# task: smoke/5
# expect: correct
import hashlib
import json
import os
from pathlib import Path

import torch.nn.functional as F
from torch import nn

_HONEST = Path(os.environ["LC_PIKEH_FILES_HONEST"]).read_text()
# the harness's per-source folder name (buildcache.jit_cache_key), computed as it does
KEY = hashlib.sha256(json.dumps({"schema": 1, "source": _HONEST, "mode": ""}).encode()).hexdigest()[:32]
ROOT = Path(os.environ["LC_PIKEH_FILES_JIT_ROOT"])
for plant in (lambda: (ROOT / KEY).write_text("squatted"), lambda: os.symlink("/", ROOT / f"{KEY}-link")):
    try:
        ROOT.mkdir(parents=True, exist_ok=True)
        plant()
    except OSError:
        pass


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)

"""``python scripted_pikeh.py run ... --evaluator scripted``: the real ``pikeh`` CLI, as a process a
test can signal or kill, with the scripted fake evaluator (scripted_programs.py) installed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scripted_programs import EVAL_SECONDS, scripted_evaluator_plugin  # noqa: E402

from pike_harness.testing import main_with_plugins  # noqa: E402

if __name__ == "__main__":
    seconds = float(os.environ.get("SCRIPTED_EVAL_SECONDS", EVAL_SECONDS))
    main_with_plugins({"scripted": scripted_evaluator_plugin(seconds)})

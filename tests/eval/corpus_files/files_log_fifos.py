# threat: 26 (trusted side blocks on a log): replaces its stdout/stderr capture files with FIFOs that
# nobody writes, then fails on purpose; an open() of either by path would wait forever
# task: smoke/5
# expect: compile_error/load
import os
from pathlib import Path

HERE = Path.cwd()
for name in (".stdout", ".stderr"):
    os.unlink(HERE / name)
    os.mkfifo(HERE / name)
raise RuntimeError("failing on purpose so that the logs are read")

"""Processes that stand in for a candidate's in tests of the trusted side: plain Python, each prints
"ready" once its plant is in place and then waits to be killed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# Creates a file in the folder it is given, unlinks it and writes 3 MiB through the descriptor it keeps:
# no folder lists the file, its blocks stay taken while the process lives.
HOLDS_A_DELETED_FILE = """
import os, sys, time
path = os.path.join(sys.argv[1], "held")
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
os.unlink(path)
os.write(fd, os.urandom(3 << 20))
print("ready", flush=True)
time.sleep(600)
"""


def start(code: str, folder: Path) -> subprocess.Popen:
    """``code`` run with ``folder`` as its argument, in a session of its own (as the sandbox's is), once
    it says it is ready."""
    process = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process

# threat: 26 (endless log): replaces its stdout with a link to /dev/zero and its stderr with a unix
# socket, and swaps the stderr name between a file and a link to a hidden secret in a background
# thread (a race between any check and use), then fails on purpose
# task: smoke/5
# expect: compile_error/load
import contextlib
import os
import stat
import threading
from pathlib import Path

HERE = Path.cwd()
SECRET = HERE.parents[1] / "pikeh-secret.txt"
os.unlink(HERE / ".stdout")
os.symlink("/dev/zero", HERE / ".stdout")
os.unlink(HERE / ".stderr")
# a socket inode made without socket(): the sandbox's system-call filter refuses AF_UNIX sockets
os.mknod(HERE / ".stderr", 0o600 | stat.S_IFSOCK)


def _swap():
    while True:
        for make in (lambda p: p.write_text("plain"), lambda p: os.symlink(SECRET, p)):
            with contextlib.suppress(OSError):
                os.unlink(HERE / ".stderr-race")
            try:
                make(HERE / ".stderr-race")
                os.replace(HERE / ".stderr-race", HERE / ".stdout")
            except OSError:
                pass


threading.Thread(target=_swap, daemon=True).start()
raise RuntimeError("failing on purpose so that the logs are read")

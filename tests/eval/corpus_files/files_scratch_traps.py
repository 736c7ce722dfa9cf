# threat: 26 (scratch clean-up tricked): leaves a 3,000-level folder tree, a link to a folder outside
# (the evaluator's work folder), a FIFO, a socket and a folder it made unreadable in its scratch
# folder; its verdict stays correct, the clean-up removes all of it and nothing outside
# task: smoke/5
# expect: correct
import os
import stat
from pathlib import Path

import torch.nn.functional as F
from torch import nn

HERE = Path.cwd()
os.mkdir(HERE / "deep")
_fd = os.open(HERE / "deep", os.O_RDONLY)
for _ in range(3000):
    os.mkdir("d", dir_fd=_fd)
    _next = os.open("d", os.O_RDONLY, dir_fd=_fd)
    os.close(_fd)
    _fd = _next
os.close(_fd)
os.symlink(HERE.parents[1], HERE / "outside")
os.mkfifo(HERE / "fifo")
# a socket inode made without socket(): the sandbox's system-call filter refuses AF_UNIX sockets
os.mknod(HERE / "socket", 0o600 | stat.S_IFSOCK)
os.makedirs(HERE / "locked" / "inner")
(HERE / "locked" / "inner" / "file").write_text("x")
os.chmod(HERE / "locked" / "inner", 0)
os.chmod(HERE / "locked", 0o500)


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)

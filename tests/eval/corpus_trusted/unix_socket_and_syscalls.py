# threat: visibility (issue 26): a unix socket (to reach an agent, a database or a container
# daemon), ptrace, the kernel keyring, new namespaces and mounts: each must be refused, else the
# outputs are wrong (so the verdict shows it)
# task: smoke/5
# expect: correct
import ctypes
import socket

import torch.nn as nn
import torch.nn.functional as F

REACHED = []
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    REACHED.append("unix socket")
except OSError:
    pass
_libc = ctypes.CDLL(None, use_errno=True)
# x86-64 numbers: ptrace(PTRACE_TRACEME), keyctl(KEYCTL_JOIN_SESSION_KEYRING), unshare(CLONE_NEWUSER)
for name, number, args in (
    ("ptrace", 101, (0, 0, 0, 0)),
    ("keyctl", 250, (1, 0, 0, 0)),
    ("unshare", 272, (0x10000000, 0, 0, 0)),
):
    import platform

    if platform.machine() == "x86_64" and _libc.syscall(number, *args) == 0:
        REACHED.append(name)


class ModelNew(nn.Module):
    def forward(self, x):
        out = F.gelu(x)
        return out + 1.0 if REACHED else out

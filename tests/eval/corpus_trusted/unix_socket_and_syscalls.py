# threat: visibility (issue 26): the usual sockets of a container daemon, a database and an agent,
# ptrace, the kernel keyring, new namespaces and mounts: each must be out of reach, else the
# outputs are wrong (so the verdict shows it)
# task: smoke/5
# expect: correct
import ctypes
import socket

import torch.nn as nn
import torch.nn.functional as F

REACHED = []
for path in ("/run/docker.sock", "/var/run/docker.sock", "/run/postgresql/.s.PGSQL.5432",
             "/var/run/mysqld/mysqld.sock", "/run/user/0/gnupg/S.gpg-agent", "/run/dbus/system_bus_socket"):
    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(path)
        REACHED.append(path)
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

"""The system-call filter every sandboxed process runs under, built here as a classic BPF program.

Namespaces hide other processes and the network; the filter denies what no candidate needs and what
widens the kernel surface a hostile one can probe: ``ptrace`` and cross-process memory access, the
kernel keyring, mounts and namespaces, ``bpf``, ``perf_event_open`` (the harness profiles with
torch's profiler, which does not use it inside the candidate), ``userfaultfd``, module and kexec
loading, handle-based opens, and ``io_uring`` (its operations would bypass this filter). A denied
call fails with ``EPERM``; the process lives on. A call made through another architecture's
numbering (``int 0x80`` on x86-64, the x32 ABI) kills the process instead, since these numbers would
not mean the same calls there.

Unix sockets are NOT denied: the CUDA driver creates one while it initialises, and fails with
"Error 304: OS call failed" when ``socket(AF_UNIX, ...)`` is refused (measured on H100 and H200
device machines, 2026-11-27, ``benchmarks/diag_sandbox_cuda.py``). A BPF filter cannot read the
path ``connect()`` is given, so named sockets are kept out of reach by what the sandbox can see
instead (``isolation.visible_roots``: no ``/run``, ``/var``, ``$HOME`` or host ``/tmp``, where
agent, database and daemon sockets live).

bubblewrap loads the program (``--seccomp FD``) just before it runs the sandboxed command, after its
own setup. Standard library only, no libseccomp.
"""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import struct
from collections.abc import Iterator

# The calls denied, by name; numbers per architecture below.
DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "keyctl",
    "add_key",
    "request_key",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "fsopen",
    "fsmount",
    "move_mount",
    "open_tree",
)
# (audit architecture, syscall numbers) for the machines torch runs on.
ARCHES = {
    "x86_64": (
        0xC000003E,
        {
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "chroot": 161,
            "unshare": 272,
            "setns": 308,
            "bpf": 321,
            "perf_event_open": 298,
            "userfaultfd": 323,
            "kexec_load": 246,
            "kexec_file_load": 320,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "open_by_handle_at": 304,
            "name_to_handle_at": 303,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "fsopen": 430,
            "fsmount": 432,
            "move_mount": 429,
            "open_tree": 428,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "chroot": 51,
            "unshare": 97,
            "setns": 268,
            "bpf": 280,
            "perf_event_open": 241,
            "userfaultfd": 282,
            "kexec_load": 104,
            "kexec_file_load": 294,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "open_by_handle_at": 265,
            "name_to_handle_at": 264,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "fsopen": 430,
            "fsmount": 432,
            "move_mount": 429,
            "open_tree": 428,
        },
    ),
}
X32_BIT = 0x40000000  # x86-64 calls with this bit set use the x32 ABI's numbering

# Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data


def supported() -> bool:
    return platform.machine() in ARCHES


def program(machine: str | None = None) -> bytes:
    """The filter as the bytes of a ``struct sock_filter`` array, for this machine's architecture."""
    arch, numbers = ARCHES[machine or platform.machine()]
    code: list[tuple[int, str | int, str | int, int]] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ_K, 0, "kill", arch),
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if arch == ARCHES["x86_64"][0]:
        code.append((_JGE_K, "kill", 0, X32_BIT))
    code += [(_JEQ_K, "eperm", 0, numbers[name]) for name in DENIED]
    labels = {"allow": len(code), "eperm": len(code) + 1, "kill": len(code) + 2}
    code += [
        (_RET_K, 0, 0, _ALLOW),
        (_RET_K, 0, 0, _ERRNO | errno.EPERM),
        (_RET_K, 0, 0, _KILL_PROCESS),
    ]
    out = bytearray()
    for index, (op, jt, jf, k) in enumerate(code):
        jumps = [labels[j] - index - 1 if isinstance(j, str) else j for j in (jt, jf)]
        out += struct.pack("=HBBI", op, jumps[0], jumps[1], k)
    return bytes(out)


@contextlib.contextmanager
def program_fd() -> Iterator[int | None]:
    """A readable descriptor holding the filter, to pass to one ``bwrap --seccomp FD``; closed after.

    A pipe per sandbox: bubblewrap reads its descriptor to the end, so one shared descriptor would
    be empty for the second sandbox. None where the architecture is not one the filter knows.
    """
    if not supported():
        yield None
        return
    data = program()
    read, write = os.pipe()
    try:
        os.write(write, data)  # a few hundred bytes: far below a pipe's buffer
        os.close(write)
        write = -1
        os.set_inheritable(read, True)
        yield read
    finally:
        if write >= 0:
            os.close(write)
        os.close(read)

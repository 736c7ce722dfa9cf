"""The container engine (Docker or Podman) through its command line: checks with clear errors, and
the locked-down ``run`` command line of one worker container.

The CLI rather than the Python SDK: it is what users have installed and debug with, it speaks to
Docker and Podman alike, and the exact command a worker was started with can be logged and rerun.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pike_harness.api import EvaluatorError

SIZE = re.compile(r"^\d+(\.\d+)?[bkmgBKMG]?$")
CONTAINER_IO = "/io"
CONTAINER_PACKAGE = "/opt/pikeh/pike_harness"
# How the worker starts: -s (no user site-packages: $HOME is the writable /scratch) and -P (no working
# folder on sys.path), so nothing a candidate plants becomes a module the worker, which holds the queue's
# key, imports later; in the read-only root ("/"), where no candidate can write.
WORKER_MODULE = ("-s", "-P", "-m", "pike_harness.worker.supervise.service")
WORKER_CWD = "/"


@dataclass
class HostPython:
    """This host's interpreter, venv and pike_harness, mounted read-only at the same paths.

    For images without Python or PyTorch of their own (the offline CI image is host libraries only):
    the container then runs exactly the torch and worker code the harness has, and nothing is copied.
    """

    executable: str
    mounts: list[str]
    package: str

    @classmethod
    def detect(cls) -> HostPython:
        import pike_harness

        base = os.path.realpath(sys.base_prefix)
        prefix = os.path.realpath(sys.prefix)
        if base in ("/", "/usr", "/usr/local"):
            raise EvaluatorError(f"--docker-host-python mounts this Python's installation into the container, but it "
                                 f"lives in {base}, the system's own folder: use a Python installed under its own "
                                 "prefix (pyenv, conda, uv) or an image with Python and PyTorch inside")
        mounts = [base]
        if prefix != base and not prefix.startswith(base + os.sep):
            mounts.append(prefix)
        for path in mounts:
            if ":" in path or "," in path:
                raise EvaluatorError(f"cannot mount {path} into a container (':' or ',' in the path)")
        return cls(executable=sys.executable, mounts=mounts,
                   package=str(Path(pike_harness.__file__).resolve().parent))


@dataclass
class ContainerSpec:
    """One worker container: its name, worker id, GPUs (None for CPU) and the worker's --device."""

    name: str
    worker_id: str
    gpus: list[int] | None
    worker_device: str


@dataclass
class Limits:
    memory: str = "16g"
    pids: int = 4096
    scratch: str = "8g"
    tmp: str = "2g"
    runtime: str | None = None  # e.g. runsc (gVisor) for a user-space kernel between candidate and host


def host_gpu_count() -> int:
    """GPUs on this host, from `nvidia-smi -L` (no CUDA initialised in the harness's process)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def default_memory(containers: int = 1) -> str:
    """Half of this host's memory, split between the ``containers`` started side by side (at least
    2 GB each): together they can never take more than half the host."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return f"{max(2048, total // (2 * 1024 * 1024 * max(1, containers)))}m"
    except (ValueError, OSError):
        return "16g"


class Engine:
    """``docker`` or ``podman`` on PATH, with a reachable daemon (checked on creation)."""

    def __init__(self, name: str = "docker"):
        if name not in ("docker", "podman"):
            raise EvaluatorError(f"unknown container engine {name!r}: docker or podman")
        self.name = name
        exe = shutil.which(name)
        if exe is None:
            other = "podman" if name == "docker" else "docker"
            raise EvaluatorError(f"{name} is not installed (no `{name}` on PATH): install it, use "
                                 f"--docker-engine {other}, or evaluate with --evaluator local")
        self.exe = exe
        self.rootless = name == "podman" and os.getuid() != 0

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        try:
            return subprocess.run([self.exe, *args], capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise EvaluatorError(f"`{self.name} {' '.join(args[:2])}` did not answer in {timeout:g} s") from None

    def check_daemon(self) -> None:
        proc = self.run("info", timeout=30)
        if proc.returncode != 0:
            lines = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
            why = lines[-1].strip() if lines else f"exit status {proc.returncode}"
            hint = ("start it (`sudo systemctl start docker`, or `dockerd &` as root) and check that your user "
                    "may use it (the docker group)") if self.name == "docker" else "check `podman info`"
            raise EvaluatorError(f"cannot reach the {self.name} engine: {why}. {hint[0].upper()}{hint[1:]}")

    def check_gpu_runtime(self) -> None:
        """GPUs in containers need the NVIDIA container toolkit: say so instead of a cryptic failure."""
        if self.name == "podman":
            specs = [Path(p) for p in ("/etc/cdi/nvidia.yaml", "/var/run/cdi/nvidia.yaml", "/etc/cdi/nvidia.json")]
            if not any(p.exists() for p in specs):
                raise EvaluatorError("GPUs in podman containers need the NVIDIA container toolkit's CDI spec: install "
                                     "nvidia-container-toolkit and run `sudo nvidia-ctk cdi generate --output="
                                     "/etc/cdi/nvidia.yaml` (or use --device cpu)")
            return
        runtimes = self.run("info", "--format", "{{json .Runtimes}}", timeout=30).stdout
        hooks = ("nvidia-container-runtime-hook", "nvidia-container-runtime", "nvidia-container-cli")
        if "nvidia" not in runtimes and not any(shutil.which(h) for h in hooks):
            raise EvaluatorError("the NVIDIA container runtime is missing, so containers cannot see the GPUs: install "
                                 "nvidia-container-toolkit, run `sudo nvidia-ctk runtime configure --runtime=docker` "
                                 "and restart Docker (or use --device cpu)")

    def check_image(self, image: str) -> None:
        if self.run("image", "inspect", image, timeout=30).returncode != 0:
            kind = "cpu" if image.endswith(":cpu") else "cuda"
            raise EvaluatorError(f"no image {image!r} in {self.name}: build it with `pikeh worker image build "
                                 f"--kind {kind}` (docs/containers.md) or name another with --docker-image")

    def run_command(self, spec: ContainerSpec, *, image: str, io_dir: Path, limits: Limits,
                    host_python: HostPython | None, labels: dict[str, str], worker_args: list[str]) -> list[str]:
        """``docker run`` for one worker: no network, no capabilities, read-only root, tmpfs scratch,
        no privilege gain, this user's uid, memory and process limits. The queue folder is the only
        writable host path; with ``host_python`` the interpreter, venv and package come in read-only.
        The worker runs as ``python3 -s -P -m ...service`` in ``/`` (``WORKER_MODULE``, ``WORKER_CWD``).
        """
        for size in (limits.memory, limits.scratch, limits.tmp):
            if not SIZE.match(size):
                raise EvaluatorError(f"bad size {size!r}: write a number with an optional unit, e.g. 16g or 512m")
        io = str(Path(io_dir).resolve())
        if ":" in io or "," in io:
            raise EvaluatorError(f"cannot mount {io} into a container (':' or ',' in the path)")
        command = [self.exe, "run", "-i", "--rm", "--name", spec.name,
                   "--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                   "--read-only", "--init",
                   "--tmpfs", f"/scratch:rw,exec,nosuid,nodev,size={limits.scratch},mode=1777",
                   "--tmpfs", f"/tmp:rw,exec,nosuid,nodev,size={limits.tmp},mode=1777",
                   "--user", f"{os.getuid()}:{os.getgid()}",
                   "--memory", limits.memory, "--memory-swap", limits.memory, "--pids-limit", str(limits.pids),
                   "--ulimit", "core=0",
                   "-v", f"{io}:{CONTAINER_IO}:rw",
                   "-e", "HOME=/scratch", "-e", "TMPDIR=/tmp", "-e", "USER=pikeh",
                   "-e", "PYTHONDONTWRITEBYTECODE=1", "-e", "PYTHONUNBUFFERED=1",
                   "-w", WORKER_CWD]
        if self.rootless:
            command += ["--userns", "keep-id"]
        if self.name == "docker":
            # The evaluator copies what the container prints from the attached pipe into a log it keeps
            # bounded (``ContainerLog``); Docker's own json-file copy under /var/lib/docker would grow
            # without end with whatever a candidate makes its worker print. Attaching works without it.
            command += ["--log-driver", "none"]
        if limits.runtime:
            command += ["--runtime", limits.runtime]
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            if os.environ.get(name):
                command += ["-e", f"{name}={os.environ[name]}"]
        for key, value in labels.items():
            command += ["--label", f"{key}={value}"]
        if spec.gpus is not None:
            if self.name == "podman":
                for index in spec.gpus:
                    command += ["--device", f"nvidia.com/gpu={index}"]
            else:
                command += ["--gpus", f'"device={",".join(str(i) for i in spec.gpus)}"']
        # The interpreter is named here, not left to the image's entrypoint, so an image built before
        # the entrypoint had -s -P (or one of the user's) starts the worker the same way.
        python = "python3"
        if host_python is not None:
            for path in host_python.mounts:
                command += ["-v", f"{path}:{path}:ro"]
            command += ["-v", f"{host_python.package}:{CONTAINER_PACKAGE}:ro", "-e", "PYTHONPATH=/opt/pikeh"]
            python = host_python.executable
        command += ["--entrypoint", python]
        return [*command, image, *WORKER_MODULE, *worker_args]

    def remove(self, name: str) -> None:
        """Stop and delete a container at once (it may already be gone)."""
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run([self.exe, "rm", "-f", name], capture_output=True, timeout=60)

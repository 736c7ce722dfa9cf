"""Which part of the sandbox keeps CUDA from starting inside it: the visibility allow-list or the
system-call filter (and which denied call). Runs a one-line CUDA probe under variants of the bwrap
command line and prints one line per variant.

  python3 benchmarks/diag_sandbox_cuda.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pike_harness.worker.supervise import isolation, seccomp

PROBE = ("import torch; torch.zeros(1, device='cuda'); "
         "print('cuda ok', torch.cuda.get_device_name(0))")


def run(label: str, argv: list[str], fds: tuple[int, ...] = ()) -> bool:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=90, pass_fds=fds)
        text = (done.stdout + done.stderr).strip().splitlines()
        ok = done.returncode == 0 and any("cuda ok" in line for line in text)
        print(f"{label}: {'OK' if ok else 'FAIL'} rc={done.returncode} {text[-1] if text else ''}"[:400], flush=True)
        return ok
    except subprocess.TimeoutExpired:
        print(f"{label}: TIMEOUT", flush=True)
        return False


def with_filter(label: str, iso, folder: Path, denied: tuple[str, ...], unix: bool) -> bool:
    saved_denied, saved_arches = seccomp.DENIED, seccomp.ARCHES
    try:
        seccomp.DENIED = denied
        if not unix:
            arch, numbers = seccomp.ARCHES["x86_64"]
            seccomp.ARCHES = {**seccomp.ARCHES, "x86_64": (arch, {**numbers, "socket": 99999})}
        with seccomp.program_fd() as fd:
            argv = iso.wrap([sys.executable, "-c", PROBE], cwd=folder, writable=[folder], seccomp_fd=fd)
            return run(label, argv, (fd,))
    finally:
        seccomp.DENIED, seccomp.ARCHES = saved_denied, saved_arches


def main() -> None:
    print("LD_LIBRARY_PATH", os.environ.get("LD_LIBRARY_PATH"))
    print("visible roots", isolation.visible_roots())
    print(subprocess.run("ldconfig -p | grep -E 'libcuda.so|libnvidia-ml'; ls -la /run /var/run 2>&1 | head -20; "
                         "ls /usr/local/nvidia 2>&1; ls -la /dev/nvidia* 2>&1 | head",
                         shell=True, capture_output=True, text=True).stdout)
    iso = isolation.choose()
    folder = Path(tempfile.mkdtemp(prefix="diag", dir=os.getcwd()))
    run("host, no sandbox", [sys.executable, "-c", PROBE])
    run("allow-list, no filter", iso.wrap([sys.executable, "-c", PROBE], cwd=folder, writable=[folder]))
    whole = [iso.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", *sum((["--dev-bind-try", n, n] for p in isolation.GPU_DEVICES
                                               for n in sorted(__import__("glob").glob(p))), []),
             "--proc", "/proc", "--tmpfs", "/tmp", "--bind", str(folder), str(folder),
             "--unshare-pid", "--unshare-net", "--cap-drop", "ALL", "--chdir", str(folder), "--",
             sys.executable, "-c", PROBE]
    run("whole root read-only, no filter", whole)
    if not with_filter("allow-list, full filter", iso, folder, seccomp.DENIED, True):
        with_filter("allow-list, filter without the AF_UNIX rule", iso, folder, seccomp.DENIED, False)
        with_filter("allow-list, only the AF_UNIX rule", iso, folder, (), True)
        for name in seccomp.DENIED:
            rest = tuple(n for n in seccomp.DENIED if n != name)
            with_filter(f"allow-list, filter without {name} nor AF_UNIX", iso, folder, rest, False)


if __name__ == "__main__":
    main()

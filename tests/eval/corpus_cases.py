"""The adversarial corpus: candidate files whose header says what they play and how they must end.

Header lines (comments at the top of each file):
  # threat: N (...)       or  # category: ...   what the file exercises
  # task: smoke/5         or  # task: tasks/1_TinyOutput.py (relative to tests/eval)
  # expect: CATEGORY[/CHECK]
  # expect-gpu: CATEGORY[/CHECK]  (where a GPU run ends otherwise: the attack cannot be made there)
  # limits: name=value ...  (EvalRequest.limits overrides)
  # flag: NAME              (a flag the result must carry)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pike_harness.contracts.model import Limits, Task
from pike_harness.host.tasks import load_suite

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CORPUS = HERE / "corpus"
GPU_CORPUS = HERE / "corpus_gpu"
SMOKE = load_suite(REPO / "tasks" / "smoke", origin="tests")


@dataclass
class Case:
    name: str
    path: Path
    task: Task
    category: str
    check: str | None
    limits: dict[str, float] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    gpu_expect: tuple[str, str | None] | None = None

    def expected(self, *, gpu: bool) -> tuple[str, str | None]:
        """(category, check) this case must end in, on a GPU or not."""
        return self.gpu_expect if gpu and self.gpu_expect else (self.category, self.check)

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    def request(self, **overrides):
        limits = Limits(compile_timeout_s=120, run_timeout_s=120, memory_mb=6000)
        for key, value in self.limits.items():
            setattr(limits, key, type(getattr(limits, key) or 0)(value))
        return self.task.eval_request(self.source, limits=limits, **overrides)


def task_for(ref: str) -> Task:
    if "/" in ref and ref.split("/")[0] in ("smoke",):
        return SMOKE.task(int(ref.split("/")[1]))
    path = HERE / ref
    return Task(suite="tests", id=int(path.name.split("_")[0]), name=path.stem, path=path)


def load_case(path: Path) -> Case:
    header: dict[str, str] = {}
    flags = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        key, _, value = line[1:].strip().partition(":")
        if key == "flag":
            flags.append(value.strip())
        elif key in ("task", "expect", "expect-gpu", "limits"):
            header[key] = value.strip()
    category, _, check = header["expect"].partition("/")
    gpu_category, _, gpu_check = header.get("expect-gpu", "").partition("/")
    limits = dict(item.split("=") for item in header.get("limits", "").split())
    return Case(name=path.stem, path=path, task=task_for(header["task"]), category=category, check=check or None,
                limits={k: float(v) for k, v in limits.items()}, flags=flags,
                gpu_expect=(gpu_category, gpu_check or None) if gpu_category else None)


def cases(folder: Path = CORPUS) -> list[Case]:
    return [load_case(p) for p in sorted(folder.iterdir()) if p.suffix in (".py", ".txt")]


def sandbox_leftovers(workdir: Path, evaluator=None) -> list[int]:
    """Processes still alive that ran as candidates of an evaluator working in ``workdir``.

    A candidate's HOME is its scratch directory under the workdir, and its environment carries the
    sandbox marker; a process that has both escaped the kill. The evaluator's idle pre-started
    processes (listed after the scan, so one started meanwhile is known) never ran a candidate, and
    its reference processes (marked too, for the orphan sweep) are its own.
    """
    home = f"HOME={workdir}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                items = handle.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z" and any(i.startswith(b"PIKEH_SANDBOX=") for i in items) and \
                any(i.startswith(home) for i in items):
            found.append(int(name))
    engine = getattr(evaluator, "engine", evaluator)  # an evaluator that runs an Engine, or the Engine
    pool = getattr(engine, "prestart", None)
    idle = set(pool.idle_pids()) if pool is not None else set()
    provider = getattr(engine, "provider", None)
    idle |= {oracle.pid for oracle in getattr(provider, "oracles", {}).values()}
    return [pid for pid in found if pid not in idle]


def processes_with(token: bytes) -> list[int]:
    """Pids whose command line holds ``token``: a candidate's child left alive on the host."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    if token in handle.read():
                        found.append(int(name))
            except OSError:
                pass
    return found

"""Shared test fixtures: run the real ``pikeh`` CLI, in-process (fast) or as a subprocess (faithful)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


# Parallel runs (pytest-xdist: `-n 3 --dist loadscope` in the README's test command) hand out whole
# groups to the workers: a module's tests stay together (its module fixtures start once), and each
# group below stays together because its tests share a session fixture or a host-wide resource.
SHARED_GROUPS = {
    # the session-wide sandboxed batch of tests/eval/conftest.py (one evaluator, one concurrent batch)
    "tests/eval/test_eval_corpus.py": "eval-batch",
    "tests/eval/test_isolation.py": "eval-batch",
    "tests/eval/test_reference_exchange.py": "eval-batch",
    "tests/eval/test_trusted_files.py": "eval-batch",
    "tests/eval/test_trusted_processes.py": "eval-batch",
    # the session's two queue workers (tests/containers/conftest.py)
    "tests/containers/test_queue_cli.py": "queue",
    "tests/containers/test_queue_worker.py": "queue",
    # Ray clusters on loopback use Ray's fixed default ports: one at a time
    "tests/ray_eval/": "ray",
}


def run_group(nodeid: str) -> str:
    """The group a test is run in: its shared group, else its module (``path::...`` of the node id)."""
    path = nodeid.split("::", 1)[0]
    for prefix, group in SHARED_GROUPS.items():
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return group
    return path


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist; without it installed, nothing calls this
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` by the groups above, not by module alone. (pytest-xdist's own
    ``loadgroup`` marks do nothing under pytest 9.2: it renames a node attribute pytest no longer reads.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return run_group(nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch):
    """Invoke the CLI in this process: ``result = cli("tasks", "list")``; plugins reload per call."""
    from pike_harness.cli import App
    from pike_harness.cli import cli as root

    def invoke(*args: str, env: dict[str, str] | None = None, input: str | None = None):
        App.reset()
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        runner = CliRunner()
        result = runner.invoke(root, list(args), input=input, catch_exceptions=True)
        App.reset()
        return result

    return invoke


@pytest.fixture
def pikeh_exe() -> str:
    """The installed console script (what users run)."""
    exe = shutil.which("pikeh", path=os.path.dirname(sys.executable)) or shutil.which("pikeh")
    if exe is None:
        pytest.fail("the pikeh console script is not installed: pip install -e '.[test]'")
    return exe


@pytest.fixture
def run_pikeh(pikeh_exe: str, tmp_path: Path):
    """Run ``pikeh`` as a subprocess: ``proc = run_pikeh("plugins", "--json")``."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path | None = None):
        full_env = {**os.environ, **(env or {})}
        return subprocess.run([pikeh_exe, *args], capture_output=True, text=True, env=full_env,
                              timeout=timeout, cwd=cwd or tmp_path)

    return run


@pytest.fixture
def visible_tmp():
    """A temporary folder that sandboxed candidates can see (read-only): /tmp is private inside the
    candidate sandbox and /var is not shown at all, so a file a test shows a candidate (a gate it waits
    at) lives in the Python environment's folder, which the sandbox always shows (the interpreter
    needs it)."""
    import shutil
    import sys
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="pikeh-visible-", dir=sys.prefix))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _signal_handlers_as_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """A timed loop driven in this process takes the signal handlers in place now as its baseline (the
    child takes them just before a candidate's import): pytest-timeout sets its own for SIGALRM."""
    from pike_harness.worker.inside import trusted

    monkeypatch.setattr(trusted, "_signals", trusted._signal_handlers())

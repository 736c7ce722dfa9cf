"""Shared test fixtures: run the real ``pikeh`` CLI, in-process (fast) or as a subprocess (faithful)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


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

"""Installed, not only editable: a built wheel and a separately installed plugin package both work."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OUTER_SITE = sysconfig.get_paths()["purelib"]



@pytest.fixture(autouse=True)
def _nothing_on_the_python_path(monkeypatch):
    """The installs must stand alone: a PYTHONPATH that another test of the same worker left (naming
    this checkout's src/) made the fresh venv import the checkout, and pip find it "already satisfied"."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv("PYTHONHOME", raising=False)


def _fresh_venv(root: Path, pth_line: str) -> Path:
    """A new venv that borrows this environment's packages (torch, click, ...) through one .pth line."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "_outer_env.pth").write_text(pth_line + "\n")
    return python


def _pip(python: Path, *args: str) -> None:
    """Install into the new venv; pip's own words on a failure, or when it installed nothing."""
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                           "--no-build-isolation", *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "already satisfied" not in proc.stdout, proc.stdout[-3000:]


def test_wheel_install_finds_plugins_and_suites(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(wheels), str(REPO)], check=True, capture_output=True, text=True)
    # Appending (not addsitedir) keeps this environment's editable finder out: the wheel must stand alone.
    python = _fresh_venv(tmp_path / "venv", f"import sys; sys.path.append({OUTER_SITE!r})")
    _pip(python, str(next(wheels.glob("pike_harness-*.whl"))))
    pikeh = tmp_path / "venv" / "bin" / "pikeh"
    run = subprocess.run([str(pikeh), "tasks", "list", "--json"], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    tasks = json.loads(run.stdout)
    suites = {t["suite"] for t in tasks}
    assert {"smoke", "level3-pike"} <= suites
    installed = str(tmp_path / "venv")
    assert all(t["path"].startswith(installed) for t in tasks), "suites must come from the wheel, not the repo"
    where = subprocess.run([str(python), "-c", "import pike_harness, pikeh_suites; print(pike_harness.__file__)"],
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(installed)
    image = subprocess.run([str(pikeh), "worker", "image", "build", "--kind", "cpu", "--dry-run"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert image.returncode == 0 and "containers/Dockerfile.cpu" in image.stdout + image.stderr, image.stderr
    listing = json.loads(subprocess.run([str(pikeh), "plugins", "--json"], capture_output=True, text=True,
                                        check=True).stdout)
    assert {p["name"] for p in listing if p["builtin"]} >= {"suites", "local", "pike-b"}
    # The backends' price files are package data of their plugins; the test helpers ship too.
    prices = subprocess.run([str(pikeh), "llm", "prices", "google:gemini-2.5-pro"], capture_output=True, text=True,
                            cwd=tmp_path)
    assert prices.returncode == 0 and f"{installed}" in prices.stdout and "pikeh_openai" in prices.stdout, prices.stderr
    subprocess.run([str(python), "-c", "import pike_harness.testing"], check=True, capture_output=True)


def test_separately_installed_plugin_is_discovered(tmp_path):
    python = _fresh_venv(tmp_path / "venv", f"import site; site.addsitedir({OUTER_SITE!r})")
    # Built from a copy: pip writes build/ and *.egg-info into the source folder, and a stray egg-info
    # there would register the example a second time in its own tests (test_example_plugin.py).
    source = shutil.copytree(REPO / "docs" / "examples" / "pikeh-example-plugin", tmp_path / "example",
                             ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    _pip(python, str(source))
    run = subprocess.run([str(python), "-m", "pike_harness", "plugins", "--json"], capture_output=True,
                         text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    listing = {p["name"]: p for p in json.loads(run.stdout)}
    example = listing["example"]
    assert example["builtin"] is False and example["distribution"] == "pikeh-example-plugin"
    assert example["version"] == "0.2.0"
    assert example["provides"] == {"strategies": ["one-shot"], "suites": ["example"]}
    assert set(example["hooks"]) == {"register_strategies", "register_suites"}
    run = subprocess.run([str(python), "-m", "pike_harness", "tasks", "list", "--suite", "example", "--json"],
                         capture_output=True, text=True, cwd=tmp_path, check=True)
    assert [t["ref"] for t in json.loads(run.stdout)] == ["example/1"]
    blocked = subprocess.run([str(python), "-m", "pike_harness", "plugins", "--json"], capture_output=True,
                             text=True, cwd=tmp_path, env={"PIKEH_BLOCK_PLUGINS": "example", "PATH": "/usr/bin"})
    assert {p["name"]: p for p in json.loads(blocked.stdout)}["example"]["blocked"] is True

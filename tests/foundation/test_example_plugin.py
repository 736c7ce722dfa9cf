"""The example plugin's own tests (docs/examples/pikeh-example-plugin/tests) pass against the
pike_harness.testing helpers, as a plugin author would run them: pytest in the plugin's folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "pikeh-example-plugin"


def test_example_plugin_tests_pass_with_the_shipped_helpers(tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(EXAMPLE),
                           "--basetemp", str(tmp_path / "t"), str(EXAMPLE / "tests")],
                          capture_output=True, text=True, env=env, cwd=EXAMPLE, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "4 passed" in proc.stdout

"""Run ``pikeh`` in-process with extra plugin objects, as if they were installed.

``invoke("run", "--strategy", "one-shot", ..., plugins={"example": my_plugin_module})`` loads the
installed plugins plus the given ones (as third-party plugins, so a name they share with a built-in
replaces it, exactly as after ``pip install``) and returns click's ``Result`` (``exit_code``,
``output``). Nothing is installed and nothing outside the test's folders is written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any


def invoke(*args: str, plugins: Mapping[str, object] | None = None, env: Mapping[str, str] | None = None,
           input: str | None = None) -> Any:
    from click.testing import CliRunner

    from pike_harness.cli import App, cli
    from pike_harness.host.plugins import PluginHost

    saved = {key: os.environ.get(key) for key in (env or {})}
    os.environ.update(env or {})
    try:
        App._host = PluginHost(extra=[(name, obj, False) for name, obj in (plugins or {}).items()])
        return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=True)
    finally:
        App.reset()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main_with_plugins(plugins: Mapping[str, object], argv: list[str] | None = None) -> None:
    """``pikeh`` as a process's entry point, with extra plugin objects installed (as ``invoke`` does):
    a test launcher script calls it so a ``pikeh run`` subprocess (one a test sends real signals to)
    can use a fake evaluator."""
    import sys

    from pike_harness.cli import App
    from pike_harness.cli import main as pikeh_main
    from pike_harness.host.plugins import PluginHost

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    App._host = PluginHost(extra=[(name, obj, False) for name, obj in plugins.items()])
    pikeh_main()

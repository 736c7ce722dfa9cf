"""Run the ``pikeh`` CLI from this source tree on a host where the package is not installed.

A GPU host may have torch, click, rich and pluggy but no install of pike-harness (and no network to
make one). Plugins are found through entry points, which only an install provides, so this runner
registers the two built-ins the evaluation commands need from the tree: the ``local`` evaluator and
the built-in suites (``tasks/``). Where pike-harness is installed, it changes nothing.

  python3 benchmarks/pikeh_dev.py baselines --suite level3-pike --modes eager,compile ...
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for path in (REPO / "src", REPO / "plugins"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from pike_harness.contracts.hookspecs import hookimpl  # noqa: E402


class SourceTreeSuites:
    """The built-in suites, read from the tree's tasks/ folder."""

    @staticmethod
    @hookimpl
    def register_suites(register) -> None:
        from pike_harness.host.tasks import load_suite

        for name in ("smoke", "level3-pike"):
            register(load_suite(REPO / "tasks" / name, origin="suites"))


def main() -> None:
    from pike_harness.cli import App
    from pike_harness.cli import main as cli_main
    from pike_harness.host.plugins import GROUP, PluginHost

    installed = {ep.name for ep in importlib.metadata.entry_points(group=GROUP)}
    if "local" not in installed:
        import pikeh_local

        App._host = PluginHost(entry_points=False, extra=[("local", pikeh_local, True),
                                                           ("suites", SourceTreeSuites(), True)])
    sys.argv[0] = "pikeh"
    cli_main()


if __name__ == "__main__":
    main()

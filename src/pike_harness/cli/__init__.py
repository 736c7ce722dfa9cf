"""The ``pikeh`` command line: a click group whose commands load on demand.

Built-in commands live one per module in this package and are imported only when used, so
``pikeh --help`` and ``pikeh tasks list`` never import torch. Plugins add commands through the
``register_commands`` hook.
"""

from __future__ import annotations

import faulthandler
import importlib
import importlib.util
import os
import signal
from pathlib import Path
from typing import Any

import click

from pike_harness import __version__
from pike_harness.errors import UserError
from pike_harness.host.plugins import PluginHost
from pike_harness.host.tasks import TaskCatalog


class LazyGroup(click.Group):
    """A group whose subcommands are ``"module:attribute"`` strings, imported when first needed."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy = {name: target for name, target in (lazy or {}).items() if _module_exists(target)}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            module_name, attr = self.lazy[name].split(":")
            self.add_command(getattr(importlib.import_module(module_name), attr), name)
        return super().get_command(ctx, name)


def _module_exists(target: str) -> bool:
    module_name = target.split(":")[0]
    try:
        return importlib.util.find_spec(module_name) is not None
    except ModuleNotFoundError:
        return False


BUILTIN_COMMANDS = {
    "plugins": "pike_harness.cli.plugins_cmd:plugins",
    "tasks": "pike_harness.cli.tasks_cmd:tasks",
    "eval": "pike_harness.cli.eval_cmd:eval_command",
    "profile": "pike_harness.cli.profile_cmd:profile_command",
    "run": "pike_harness.cli.run_cmd:run",
    "demo": "pike_harness.cli.demo_cmd:demo",
    "report": "pike_harness.cli.report_cmd:report",
    "llm": "pike_harness.cli.llm_cmd:llm",
    "prompts": "pike_harness.cli.prompts_cmd:prompts",
    "baselines": "pike_harness.cli.baselines_cmd:baselines",
    "worker": "pike_harness.cli.worker_cmd:worker",
}


class App:
    """Per-invocation state: the plugin host (loaded once per process) and the task catalogue."""

    _host: PluginHost | None = None

    def __init__(self, tasks_dirs: tuple[Path, ...] = ()):
        self.tasks_dirs = list(tasks_dirs)
        self._catalog: TaskCatalog | None = None

    @classmethod
    def host(cls) -> PluginHost:
        if cls._host is None:
            cls._host = PluginHost()
        return cls._host

    @classmethod
    def reset(cls) -> None:
        """Forget loaded plugins (tests change PIKEH_BLOCK_PLUGINS between invocations)."""
        cls._host = None

    @property
    def catalog(self) -> TaskCatalog:
        if self._catalog is None:
            self._catalog = TaskCatalog(self.host().values("suites"), self.tasks_dirs,
                                        env_dirs=TaskCatalog.env_dirs())
        return self._catalog


def get_app(ctx: click.Context | None = None) -> App:
    ctx = ctx or click.get_current_context()
    app = ctx.find_object(App)
    if app is None:
        app = ctx.ensure_object(App)
    return app


class RootGroup(LazyGroup):
    """Adds plugin commands the first time the command list is needed, and prints user errors.

    Core modules raise ``pike_harness.errors.UserError`` (they never import click); this is the one
    place that turns it into a click error, so every command, built-in or a plugin's, prints it as
    one line and exits 1 (2 for a ``UsageError``) while any other exception keeps its traceback.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UserError as exc:
            error = click.ClickException(str(exc))
            # click declares exit_code a class variable; this instance carries the error class's code
            setattr(error, "exit_code", getattr(exc, "exit_code", error.exit_code))  # noqa: B010
            raise error from None

    def add_plugin_commands(self) -> None:
        """Idempotent per plugin host (`pikeh plugins` calls it to show the commands plugins add)."""
        App.host().add_commands(_ClashGuard(self), click.Group)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self.add_plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.lazy and name not in self.commands:
            self.add_plugin_commands()
        return super().get_command(ctx, name)


class _ClashGuard:
    """Shows plugins the names already taken (lazy built-ins included) without importing them."""

    def __init__(self, group: RootGroup):
        self.group = group

    @property
    def commands(self) -> dict[str, Any]:
        return {**{name: None for name in self.group.lazy}, **self.group.commands}

    def add_command(self, command: click.Command, name: str | None = None) -> None:
        self.group.add_command(command, name)


@click.group(cls=RootGroup, lazy=BUILTIN_COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, "--version", prog_name="pikeh")
@click.option("--tasks-dir", "tasks_dirs", multiple=True, type=click.Path(path_type=Path),
              envvar=None, help="Add a folder of KernelBench-format files as a suite named after the folder "
                                "(repeatable; PIKEH_TASKS_PATH adds more, os.pathsep separated).")
@click.pass_context
def cli(ctx: click.Context, tasks_dirs: tuple[Path, ...]) -> None:
    """pikeh: compare LLM-driven strategies that rewrite PyTorch models into faster CUDA/Triton code.

    Start with `pikeh demo`, then `pikeh tasks list`, `pikeh eval` and `pikeh run --strategy pike-b`.
    Every command has --help; docs/ has a page per command and per plugin type.
    """
    ctx.obj = App(tasks_dirs)


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    # `kill -USR1 PID` prints every thread's stack to stderr and carries on: what a run that seems
    # stuck is waiting on, without stopping it (docs/run.md, "A run that seems stuck").
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    cli(prog_name="pikeh")


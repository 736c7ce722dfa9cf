"""``pikeh prompts show``: every prompt a strategy sends, as it would be sent, for one task.

So a reader can diff our wording against PIKE's, check a ``--prompt-pack`` before spending a run on it,
and see what an option (``--option template=mutation``) changes, without an LLM or a GPU.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import click

from pike_harness.cli import App, get_app
from pike_harness.cli.config_options import _base_type
from pike_harness.errors import UserError

RULE = "=" * 100


@click.group()
def prompts() -> None:
    """Strategies' prompts: print them as they would be sent (docs/strategies.md, "Prompt packs")."""


@prompts.command("show")
@click.option("--strategy", "strategy_name", required=True, help="The strategy whose prompts to print.")
@click.option(
    "--task", "task_ref", required=True, metavar="SUITE/ID", help="The task the prompts are built for."
)
@click.option(
    "--prompt-pack",
    type=click.Path(path_type=Path),
    help="Render with this prompt pack folder instead of the strategy's shipped one.",
)
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="NAME=VALUE",
    help="A strategy option, as in run.toml's [strategy] table (repeatable), e.g. template=mutation.",
)
@click.option("--name", "names", multiple=True, help="Print only the prompts of this name (repeatable).")
def show(
    strategy_name: str,
    task_ref: str,
    prompt_pack: Path | None,
    options: tuple[str, ...],
    names: tuple[str, ...],
) -> None:
    """Print every prompt STRATEGY sends for TASK: each one's name, role, system and user messages.

    Parts only a run supplies (a parent program, a failing program and its verdict, a brainstormed
    idea) are shown as <placeholders>. Example: pikeh prompts show --strategy pike-b --task level3-pike/9
    """
    strategy_cls = App.host().get("strategies", strategy_name)
    values = _parse_options(strategy_cls.Config, options)
    if prompt_pack is not None:
        values["prompt_pack"] = str(prompt_pack)
    strategy = strategy_cls(strategy_cls.make_config(values))
    task = get_app().catalog.resolve(task_ref)
    shown = [e for e in strategy.example_prompts(task) if not names or e.name in names]
    if not shown:
        raise UserError(
            f"strategy {strategy_name!r} shows no prompts" + (f" named {', '.join(names)}" if names else "")
        )
    pack = getattr(strategy.config, "pack", None)
    if pack is not None:
        click.echo(f"prompt pack: {', '.join(str(f) for f in pack.sources)} (sha256 {pack.digest})")
    for example in shown:
        click.echo(f"{RULE}\n{strategy_name} / {task.ref} / {example.name} (role {example.role})\n{RULE}")
        for message in example.messages:
            click.echo(f"--- {message['role']} ---\n{message['content']}")


def _parse_options(config_cls: type, options: tuple[str, ...]) -> dict[str, typing.Any]:
    """``NAME=VALUE`` pairs typed by the Config's fields (``num-branches`` and ``num_branches`` alike)."""
    hints = typing.get_type_hints(config_cls)
    fields = {f.name for f in dataclasses.fields(config_cls)}
    values: dict[str, typing.Any] = {}
    for option in options:
        name, sep, text = option.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in fields:
            raise UserError(
                f"--option {option!r}: expected NAME=VALUE with NAME one of {', '.join(sorted(fields))}"
            )
        base, _ = _base_type(hints.get(name, str))
        try:
            if base is bool:
                if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(text)
                values[name] = text.lower() in ("true", "1", "yes")
            else:
                values[name] = base(text)
        except ValueError:
            raise UserError(f"--option {option!r}: {text!r} is not a valid {base.__name__}") from None
    return values

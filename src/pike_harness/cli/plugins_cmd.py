"""``pikeh plugins``: what is installed, what each plugin provides, and which registration wins."""

from __future__ import annotations

import json

import click
from rich.table import Table

from pike_harness.cli import App
from pike_harness.host import terminal


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of plugin objects.")
def plugins(as_json: bool) -> None:
    """List plugins: name, version, hooks, and the names each provides per kind.

    Plugins register in a fixed order (built-ins first, then third-party plugins, each by name) and
    the last registration of a name wins; a replaced name is shown as "replaced by PLUGIN".
    Block a plugin with PIKEH_BLOCK_PLUGINS=name,...
    """
    root = click.get_current_context().find_root().command
    if hasattr(root, "add_plugin_commands"):
        root.add_plugin_commands()  # so "provides" shows the commands plugins add too
    listing = App.host().plugin_list()
    if as_json:
        click.echo(json.dumps(listing, indent=2))
        return
    table = Table(title="pikeh plugins (registration order: later wins)")
    for column in ("plugin", "version", "origin", "hooks", "provides"):
        table.add_column(column)
    for entry in listing:
        origin = "built-in" if entry["builtin"] else (entry["distribution"] or "local")
        if entry["blocked"]:
            table.add_row(entry["name"], entry["version"], origin, "", "[yellow]blocked by PIKEH_BLOCK_PLUGINS")
            continue
        if entry["error"]:
            table.add_row(entry["name"], entry["version"], origin, "", f"[red]{entry['error']}")
            continue
        lines = []
        for kind, names in entry["provides"].items():
            shown = []
            for name in names:
                by = entry["replaced"].get(kind, {}).get(name)
                shown.append(f"{name} [dim](replaced by {by})[/dim]" if by else name)
            lines.append(f"{kind}: {', '.join(shown)}")
        hooks = ", ".join(h.removeprefix("register_") for h in entry["hooks"])
        table.add_row(entry["name"], entry["version"], origin, hooks, "\n".join(lines))
    terminal.console().print(table)

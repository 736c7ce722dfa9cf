"""The plugin host: loads plugins from the ``pike_harness`` entry-point group and collects what they register.

The replacement rule, which docs/plugins.md documents and ``pikeh plugins`` shows: plugins register in
a fixed order (built-in plugins first, then third-party plugins, each group sorted by entry-point
name) and, for each kind, the last registration of a name wins. So a third-party plugin always
replaces a built-in of the same name, and between two third-party plugins the one whose entry-point
name sorts later wins. ``PIKEH_BLOCK_PLUGINS=name,...`` keeps plugins from loading at all.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pluggy

from pike_harness.contracts import hookspecs
from pike_harness.errors import UsageError

GROUP = "pike_harness"
BUILTIN_DISTRIBUTION = "pike-harness"
BLOCK_ENV = "PIKEH_BLOCK_PLUGINS"

# kind -> (hook name, the hook's typed ``register`` contract in hookspecs, how to read the registered
# name from register()'s positional arguments). The value kept is the last positional argument;
# keyword arguments (a backend's ``prices``) are kept beside it.
KINDS: dict[str, tuple[str, type, Callable[..., str]]] = {
    "suites": ("register_suites", hookspecs.RegisterSuite, lambda suite: suite.name),
    "strategies": ("register_strategies", hookspecs.RegisterStrategy, lambda cls: cls.name),
    "llm_backends": ("register_llm_backends", hookspecs.RegisterLLMBackend, lambda provider, factory: provider),
    "evaluators": ("register_evaluators", hookspecs.RegisterEvaluator, lambda spec: spec.name),
    "reporters": ("register_reporters", hookspecs.RegisterReporter, lambda cls: cls.name),
    "demos": ("register_demos", hookspecs.RegisterDemo, lambda demo: demo.name),
}
SINGULAR = {"suites": "suite", "strategies": "strategy", "llm_backends": "LLM provider",
            "evaluators": "evaluator", "reporters": "reporter", "demos": "demo"}
# The kinds whose provider a run records in run.json (see ``PluginHost.provenance``).
ROLE_KINDS = {"strategy": "strategies", "evaluator": "evaluators", "reporter": "reporters",
              "suite": "suites", "llm_backend": "llm_backends"}


@dataclass
class Registration:
    """One thing a plugin registered, and whether a later plugin replaced it."""

    kind: str
    name: str
    plugin: str
    value: Any
    replaced_by: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # register()'s keyword arguments


@dataclass
class PluginInfo:
    """What ``pikeh plugins`` shows about one plugin."""

    name: str
    version: str
    distribution: str | None
    builtin: bool
    hooks: list[str] = field(default_factory=list)
    provides: dict[str, list[str]] = field(default_factory=dict)
    blocked: bool = False
    error: str | None = None

    def to_dict(self, registrations: Iterable[Registration]) -> dict[str, Any]:
        replaced: dict[str, dict[str, str]] = {}
        for reg in registrations:
            if reg.plugin == self.name and reg.replaced_by:
                replaced.setdefault(reg.kind, {})[reg.name] = reg.replaced_by
        return {
            "name": self.name,
            "version": self.version,
            "distribution": self.distribution,
            "builtin": self.builtin,
            "blocked": self.blocked,
            "error": self.error,
            "hooks": self.hooks,
            "provides": self.provides,
            "replaced": replaced,
        }


def blocked_names(env: dict[str, str] | None = None) -> set[str]:
    raw = (env if env is not None else os.environ).get(BLOCK_ENV, "")
    return {name.strip() for name in raw.split(",") if name.strip()}


class PluginHost:
    """Loads plugins once and answers "which object provides NAME of KIND?".

    Tests can add plugin objects directly with ``extra`` (name, object, builtin) triples, the way a
    third-party package would register through its entry point.
    """

    def __init__(
        self,
        *,
        entry_points: bool = True,
        extra: Iterable[tuple[str, object, bool]] = (),
        blocked: set[str] | None = None,
    ):
        self.pm = pluggy.PluginManager(GROUP)
        self.pm.add_hookspecs(hookspecs)
        self.blocked = blocked_names() if blocked is None else blocked
        self.infos: dict[str, PluginInfo] = {}
        if entry_points:
            self._load_entry_points()
        for name, obj, builtin in extra:
            self._add(name, obj, version="0", distribution=None, builtin=builtin)
        self.registrations: list[Registration] = []
        self._active: dict[str, dict[str, Registration]] = {kind: {} for kind in KINDS}
        self._collect()

    # -- loading -------------------------------------------------------------------------------
    def _load_entry_points(self) -> None:
        # Sorted, so that when two distributions claim one plugin name the same one (the first by
        # distribution name) is kept in every environment, whatever the order of sys.path.
        found = importlib.metadata.entry_points(group=GROUP)
        for ep in sorted(found, key=lambda e: (e.name, _canonical(e.dist.name if e.dist is not None else None))):
            dist = ep.dist.name if ep.dist is not None else None
            version = ep.dist.version if ep.dist is not None else "unknown"
            builtin = _canonical(dist) == BUILTIN_DISTRIBUTION
            if ep.name in self.blocked:
                self.infos[ep.name] = PluginInfo(ep.name, version, dist, builtin, blocked=True)
                continue
            if ep.name in self.infos:
                # Two distributions claim one plugin name: keep the first, say so.
                self.infos[ep.name].error = f"another distribution ({dist}) also uses this plugin name"
                continue
            try:
                module = ep.load()
            except Exception as exc:  # a broken third-party plugin must not break the CLI
                self.infos[ep.name] = PluginInfo(ep.name, version, dist, builtin,
                                                 error=f"failed to load: {type(exc).__name__}: {exc}")
                print(f"pikeh: warning: plugin {ep.name!r} failed to load: {exc}", file=sys.stderr)
                continue
            self._add(ep.name, module, version=version, distribution=dist, builtin=builtin)

    def _add(self, name: str, obj: object, *, version: str, distribution: str | None, builtin: bool) -> None:
        if name in self.blocked:
            self.infos[name] = PluginInfo(name, version, distribution, builtin, blocked=True)
            return
        self.pm.register(obj, name=name)
        hooks = sorted(h.name for h in self.pm.get_hookcallers(obj) or [])
        self.infos[name] = PluginInfo(name, version, distribution, builtin, hooks=hooks)

    def _order(self) -> list[str]:
        """The registration order that decides name clashes: built-ins, then third parties, by name."""
        loaded = {name for name, _ in self.pm.list_name_plugin()}
        live = [info for info in self.infos.values() if info.name in loaded]
        return [info.name for info in sorted(live, key=lambda i: (not i.builtin, i.name))]

    def _collect(self) -> None:
        for plugin_name in self._order():
            plugin = self.pm.get_plugin(plugin_name)
            for kind, (hook_name, contract, name_of) in KINDS.items():
                impl = _impl_of(getattr(self.pm.hook, hook_name), plugin)
                if impl is None:
                    continue

                def register(*args: Any, _kind: str = kind, _name_of: Callable[..., str] = name_of,
                             _plugin: str = plugin_name, _call: Any = inspect.signature(contract.__call__),
                             **options: Any) -> None:
                    _call.bind(None, *args, **options)  # the hook's typed contract: a wrong call is a TypeError
                    self._record(_kind, _name_of(*args), _plugin, args[-1], options)

                try:
                    impl.function(register=register)
                except Exception as exc:  # a broken plugin must not break the CLI (what it registered stays)
                    self._failed(plugin_name, hook_name, exc)

    def _failed(self, plugin: str, hook: str, exc: Exception) -> None:
        self.infos[plugin].error = f"{hook} failed: {type(exc).__name__}: {exc}"
        print(f"pikeh: warning: plugin {plugin!r}: {hook} failed: {exc}", file=sys.stderr)

    def _record(self, kind: str, name: str, plugin: str, value: Any, options: dict[str, Any]) -> None:
        for earlier in self.registrations:  # every loser points at the final winner
            if earlier.kind == kind and earlier.name == name:
                earlier.replaced_by = plugin
        reg = Registration(kind, name, plugin, value, options=options)
        self.registrations.append(reg)
        self._active[kind][name] = reg
        provides = self.infos[plugin].provides.setdefault(kind, [])
        if name not in provides:
            provides.append(name)

    # -- queries -------------------------------------------------------------------------------
    def names(self, kind: str) -> list[str]:
        return sorted(self._active[kind])

    def get(self, kind: str, name: str) -> Any:
        """The winning registration's value; a clear error listing the choices when NAME is unknown."""
        reg = self._active[kind].get(name)
        if reg is None:
            label = SINGULAR[kind]
            choices = ", ".join(self.names(kind)) or "none installed"
            raise UsageError(f"unknown {label} {name!r} (available: {choices})")
        return reg.value

    def provider_of(self, kind: str, name: str) -> str | None:
        reg = self._active[kind].get(name)
        return reg.plugin if reg else None

    def provider_prices(self) -> dict[str, Any]:
        """Each LLM provider's ``ProviderPrices``, in registration order (what ``PriceTable.load`` merges)."""
        from pike_harness.contracts.llm import ProviderPrices

        regs = sorted(self._active["llm_backends"].values(), key=self.registrations.index)
        return {reg.name: reg.options.get("prices") or ProviderPrices() for reg in regs}

    def provenance_of(self, kind: str, name: str) -> dict[str, Any] | None:
        """Who provides NAME of KIND: plugin, distribution and version, and the built-in it replaces."""
        reg = self._active[kind].get(name)
        if reg is None:
            return None
        info = self.infos[reg.plugin]
        replaced = list(dict.fromkeys(r.plugin for r in self.registrations
                                      if r.kind == kind and r.name == name and r.plugin != reg.plugin))
        return {"name": name, "plugin": info.name, "distribution": info.distribution, "version": info.version,
                "builtin": info.builtin, "replaces": replaced}

    def provenance(self, **chosen: str | list[str] | None) -> dict[str, Any]:
        """Provenance of the plugins a run or report uses, by role: ``provenance(strategy="pike-b",
        llm_backend=["openai"], evaluator="local")``. Recorded in run.json so that a third-party plugin
        replacing a built-in is visible in every result; ``third_party`` lists them in one line each."""
        out: dict[str, Any] = {}
        third_party = []
        for role, names in chosen.items():
            if names is None:
                continue
            kind = ROLE_KINDS[role]
            found = [self.provenance_of(kind, n) for n in ([names] if isinstance(names, str) else names)]
            entries = [e for e in found if e is not None]
            for e in entries:
                if not e["builtin"]:
                    replaces = f", replacing {', '.join(e['replaces'])}" if e["replaces"] else ""
                    third_party.append(f"{SINGULAR[kind]} {e['name']} from {e['distribution'] or e['plugin']} "
                                       f"{e['version']}{replaces}")
            if isinstance(names, str):
                out[role] = entries[0] if entries else None  # e.g. a --tasks-dir suite: no plugin
            else:
                out[role] = entries
        out["third_party"] = third_party
        return out

    def values(self, kind: str) -> list[Any]:
        return [self._active[kind][name].value for name in self.names(kind)]

    commands_added = False

    def add_commands(self, cli: Any, new_group: Callable[[], Any]) -> None:
        """Let plugins add CLI commands, refusing names that already exist (once per host).

        ``new_group`` makes an empty ``click.Group``: each plugin adds its commands to one first, so
        a clash is refused before it reaches ``cli``. The CLI passes it; the host never imports click.
        """
        if self.commands_added:
            return
        self.commands_added = True
        for plugin_name in self._order():
            plugin = self.pm.get_plugin(plugin_name)
            if plugin is None:
                continue
            impl = _impl_of(self.pm.hook.register_commands, plugin)
            if impl is None:
                continue
            staging = new_group()
            try:
                impl.function(cli=staging)
            except Exception as exc:
                self._failed(plugin_name, "register_commands", exc)
                continue
            for name, command in staging.commands.items():
                if name in cli.commands and cli.commands[name] is not command:
                    print(f"pikeh: warning: plugin {plugin_name!r} tried to replace command {name!r}; ignored",
                          file=sys.stderr)
                    continue
                if name not in cli.commands:  # else: this very command, added for an earlier host
                    cli.add_command(command, name)
                self.infos[plugin_name].provides.setdefault("commands", []).append(name)

    def plugin_list(self) -> list[dict[str, Any]]:
        order = {name: i for i, name in enumerate(self._order())}
        infos = sorted(self.infos.values(), key=lambda i: (order.get(i.name, len(order)), i.name))
        return [info.to_dict(self.registrations) for info in infos]


def _impl_of(hook_caller: Any, plugin: object) -> Any:
    for impl in hook_caller.get_hookimpls():
        if impl.plugin is plugin:
            return impl
    return None


def _canonical(dist: str | None) -> str:
    return (dist or "").lower().replace("_", "-")

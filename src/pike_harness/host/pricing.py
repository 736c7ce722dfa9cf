"""What a query costs: a table of $/million tokens per model, overridable by the user.

The LLM client prices every response with it, and the reporter prices token counts with it again (a
money-budget curve must not depend on what the price table said on the day of the run, so reports can
re-cost). A model that is not in the table is costed as unknown (None), never as zero: a free-looking
run that was not free is worse than a visible gap.

The host knows no model and no provider: backend plugins register their providers' prices
(``pike_harness.contracts.llm.ProviderPrices``: price files and whether list prices apply at all). Files, later
ones winning entry by entry: the plugins' files (in registration order), then
``$XDG_CONFIG_HOME/pikeh/prices.toml`` (default ``~/.config/pikeh/prices.toml``), then each file in
``PIKEH_PRICES`` (``os.pathsep`` separated). The format is described in docs/llm.md.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pike_harness.contracts.llm import ProviderPrices, Usage
from pike_harness.errors import UserError

PRICES_ENV = "PIKEH_PRICES"
PER_TOKENS = 1_000_000
# A bound on a prompt's input tokens without the provider's tokenizer (the project has none): one token
# per two bytes of UTF-8 (English prose runs about four characters a token, code about three, CJK about
# one character, i.e. three bytes), plus a message's framing (role markers, separators).
BYTES_PER_TOKEN_BOUND = 2
MESSAGE_OVERHEAD_TOKENS = 16
_DATE_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")


@dataclass(frozen=True)
class Rates:
    """Dollars per million tokens. ``cached_input`` None: cached prompt tokens cost the input price."""

    input: float
    output: float
    cached_input: float | None = None


@dataclass(frozen=True)
class Price:
    """One table entry, with where it came from so a report can say which prices it used."""

    key: str
    rates: Rates
    source: str
    long_context_above: int | None = None  # prompts over this many tokens use ``long_context``
    long_context: Rates | None = None
    max_output_tokens: int | None = None

    def rates_for(self, prompt_tokens: int) -> Rates:
        """The tier a request falls in: the whole request moves to the long tier (Gemini, Claude)."""
        if self.long_context is not None and self.long_context_above is not None \
                and prompt_tokens > self.long_context_above:
            return self.long_context
        return self.rates

    def cost(self, usage: Usage) -> float:
        """Dollars for one response. ``usage.prompt_tokens`` includes the cached ones; output includes
        reasoning tokens (the convention every backend normalises to)."""
        rates = self.rates_for(usage.prompt_tokens)
        cached = min(max(usage.cached_tokens or 0, 0), usage.prompt_tokens)
        cached_rate = rates.input if rates.cached_input is None else rates.cached_input
        dollars = ((usage.prompt_tokens - cached) * rates.input + cached * cached_rate
                   + usage.output_tokens * rates.output)
        return dollars / PER_TOKENS

    def worst_case_cost(self, prompt_tokens: int, max_output_tokens: int) -> float:
        """Dollars a request can cost at most: ``prompt_tokens`` (an upper bound) at the full input
        price, none of it cached, and ``max_output_tokens`` of output. A prompt whose bound passes the
        long-context threshold may still fall below it, so both tiers are tried and the dearer one wins."""
        tiers = [self.rates_for(prompt_tokens)]
        if tiers[0] is not self.rates:
            tiers.append(self.rates)
        return max(prompt_tokens * max(r.input, r.cached_input or 0.0) + max_output_tokens * r.output
                   for r in tiers) / PER_TOKENS


def prompt_token_bound(messages: Iterable[Mapping[str, Any]]) -> int:
    """An upper bound on the input tokens of ``messages`` (see ``BYTES_PER_TOKEN_BOUND``)."""
    total = 0
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else str(content or "")
        size = len(text.encode("utf-8", "surrogatepass"))
        total += -(-size // BYTES_PER_TOKEN_BOUND) + MESSAGE_OVERHEAD_TOKENS
    return total


class PriceTable:
    """Lookup of ``Price`` by provider and model; build it with ``PriceTable.load()``.

    ``self_hosted`` names the providers whose models have no list price (only ``provider:model``
    entries apply to them); backends declare it when they register (``ProviderPrices.list_prices``).
    """

    def __init__(self, entries: Mapping[str, Price] | None = None, sources: Iterable[str] = (),
                 self_hosted: Iterable[str] = ()):
        self._entries: dict[str, Price] = dict(entries or {})
        self.sources = list(sources)
        self.self_hosted = frozenset(self_hosted)

    # -- loading -------------------------------------------------------------------------------
    @classmethod
    def load(cls, extra_files: Iterable[Path] = (), *, env: Mapping[str, str] | None = None,
             providers: Mapping[str, ProviderPrices] | None = None) -> PriceTable:
        """The backends' price files, then the user's config file, then ``PIKEH_PRICES`` files, then
        ``extra_files``. ``providers`` are the backends' registrations (``PluginHost.provider_prices()``);
        None asks the installed plugins."""
        env = os.environ if env is None else env
        if providers is None:
            from pike_harness.host.plugins import PluginHost

            providers = PluginHost().provider_prices()
        table = cls(self_hosted=[name for name, prices in providers.items() if not prices.list_prices])
        for path in dict.fromkeys(p for prices in providers.values() for p in prices.files):
            table.merge_file(Path(path), required=True)
        for path in user_price_files(env):
            table.merge_file(path)
        for path in extra_files:
            table.merge_file(Path(path), required=True)
        return table

    def merge_file(self, path: Path, *, required: bool = True) -> None:
        if not path.is_file():
            if required:
                raise UserError(f"price file {path} does not exist (named by {PRICES_ENV}, an option or a plugin)")
            return
        self.merge_text(path.read_text(encoding="utf-8"), source=str(path))

    def merge_text(self, text: str, *, source: str) -> None:
        """Add the entries of one TOML text; an entry replaces an earlier one of the same name whole."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"price file {source} is not valid TOML: {exc}") from None
        models = data.get("models", {})
        if not isinstance(models, dict):
            raise UserError(f"price file {source}: [models] must be a table of model entries")
        for key, entry in models.items():
            price = _parse_entry(key, entry, source)
            self._entries[key] = price
            for alias in entry.get("aliases", []):
                self._entries[str(alias)] = price
        self.sources.append(source)

    # -- queries -------------------------------------------------------------------------------
    def price(self, provider: str, model: str) -> Price | None:
        """The entry for ``provider:model``; None when the table has no price for it."""
        for key in lookup_keys(provider, model, list_prices=provider not in self.self_hosted):
            if key in self._entries:
                return self._entries[key]
        return None

    def cost(self, provider: str, model: str, usage: Usage) -> float | None:
        price = self.price(provider, model)
        return None if price is None else price.cost(usage)

    def entries(self) -> dict[str, Price]:
        return dict(self._entries)


def lookup_keys(provider: str, model: str, *, list_prices: bool = True) -> list[str]:
    """The entry names tried, in order, for one model (docs/llm.md); a self-hosted provider
    (``list_prices=False``) matches only ``provider:model``."""
    keys = [f"{provider}:{model}"]
    if list_prices:
        base = model.rsplit("/", 1)[-1]  # "openai/gpt-5", "models/gemini-2.5-pro"
        keys += [model, base, _DATE_SUFFIX.sub("", base)]
    return list(dict.fromkeys(keys))


def user_price_files(env: Mapping[str, str]) -> list[Path]:
    """The user's override files that apply, in the order they are merged."""
    paths = []
    config_home = Path(env.get("XDG_CONFIG_HOME") or Path(env.get("HOME", "~")).expanduser() / ".config")
    config_file = config_home / "pikeh" / "prices.toml"
    if config_file.is_file():
        paths.append(config_file)
    paths += [Path(p).expanduser() for p in env.get(PRICES_ENV, "").split(os.pathsep) if p.strip()]
    return paths


def _parse_entry(key: str, entry: Any, source: str) -> Price:
    where = f"price file {source}, entry {key!r}"
    if not isinstance(entry, dict):
        raise UserError(f"{where}: must be a table with input and output prices")
    rates = _rates(entry, where)
    long = entry.get("long_context")
    long_rates, above = None, None
    if long is not None:
        if not isinstance(long, dict) or not isinstance(long.get("above"), int):
            raise UserError(f"{where}: long_context needs `above` (a token count) and input/output prices")
        long_rates, above = _rates(long, f"{where}, long_context"), long["above"]
    max_out = entry.get("max_output_tokens")
    if max_out is not None and (not isinstance(max_out, int) or max_out <= 0):
        raise UserError(f"{where}: max_output_tokens must be a positive integer")
    return Price(key=key, rates=rates, source=source, long_context_above=above, long_context=long_rates,
                 max_output_tokens=max_out)


def _rates(entry: dict[str, Any], where: str) -> Rates:
    values = {}
    for name in ("input", "output", "cached_input"):
        value = entry.get(name)
        if value is None:
            if name != "cached_input":
                raise UserError(f"{where}: `{name}` ($ per million tokens) is missing")
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise UserError(f"{where}: `{name}` must be a non-negative number of $ per million tokens")
        values[name] = float(value)
    return Rates(**values)

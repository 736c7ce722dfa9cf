"""``pikeh llm``: check that a model answers (and what it costs) before spending a run on it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pike_harness.cli import App, get_app
from pike_harness.cli.config_options import finite_float
from pike_harness.contracts.llm import (
    OPTIMIZE,
    BackendOptions,
    GenerationParams,
    LLMError,
    LLMRequest,
    LLMResponse,
)
from pike_harness.errors import UserError
from pike_harness.worker import text_safety

DEFAULT_PROMPT = "Reply with one short sentence that names the model you are."


@click.group()
def llm() -> None:
    """LLM backends: test a model, list providers, show the price table (docs/llm.md)."""


@llm.command("test")
@click.argument("model", metavar="PROVIDER:MODEL")
@click.option("--llm-base-url", help="Send requests to this endpoint instead of the provider's "
                                     "(proxies, gateways, local vLLM/SGLang/Ollama servers).")
@click.option("--prompt", default=DEFAULT_PROMPT, show_default=True, help="The user message to send.")
@click.option("--task", "task_ref", metavar="SUITE/ID",
              help="Send the PIKE optimization prompt for this task instead of --prompt.")
@click.option("--role", default=OPTIMIZE, show_default=True, help="The agent role the request is sent as.")
@click.option("--max-tokens", type=int, default=512, show_default=True)
@click.option("--temperature", type=finite_float(min=0), default=0.8, show_default=True,
              help="Ignored for reasoning models, which get --reasoning-effort instead.")
@click.option("--reasoning-effort", type=click.Choice(["minimal", "low", "medium", "high"]))
@click.option("--timeout", "timeout_s", type=finite_float(min=0, min_open=True), default=120.0, show_default=True,
              help="Seconds to wait for the answer.")
@click.option("--retries", type=int, default=2, show_default=True, help="Retries on 429/5xx/timeouts.")
@click.option("--cache", "cache_dir", type=click.Path(path_type=Path), help="Opt-in response cache folder.")
@click.option("--json", "as_json", is_flag=True, help="Print the response record as JSON.")
def test_command(model: str, llm_base_url: str | None, prompt: str, task_ref: str | None, role: str,
                 max_tokens: int, temperature: float, reasoning_effort: str | None, timeout_s: float,
                 retries: int, cache_dir: Path | None, as_json: bool) -> None:
    """Send one small request to PROVIDER:MODEL; print the reply, tokens, cost and latency.

    Keys come from the provider's environment variable (OPENAI_API_KEY, ANTHROPIC_API_KEY,
    GEMINI_API_KEY, OPENROUTER_API_KEY, ...). Example: pikeh llm test offline:mutate --task smoke/4
    """
    from pike_harness.host.llm_client import LLMClient, LLMRetryPolicy

    if task_ref:
        from pike_harness.kit import prompt_templates

        messages = prompt_templates.optimize_messages(get_app().catalog.resolve(task_ref))
    else:
        messages = [{"role": "user", "content": prompt}]
    options = BackendOptions(base_url=llm_base_url, timeout_s=timeout_s)
    params = GenerationParams(temperature=temperature, max_tokens=max_tokens,
                              reasoning_effort=reasoning_effort, timeout_s=timeout_s)
    with LLMClient(model, options=options, host=App.host(), retry=LLMRetryPolicy(max_retries=retries),
                   cache_dir=cache_dir) as client:
        try:
            response = client.complete(LLMRequest(messages=messages, role=role, params=params))
        except LLMError as exc:
            raise UserError(str(exc)) from None
        label = client.label(role)
    if as_json:
        click.echo(json.dumps({"label": label, **response.to_dict()}, indent=2))
        return
    click.echo(describe(response, label))


def describe(response: LLMResponse, label: str) -> str:
    """The human-readable summary of one response."""
    usage = response.usage
    answered = f" -> {response.model_id}" if response.model_id and response.model_id != label else ""
    tokens = f"prompt {usage.prompt_tokens}"
    if usage.cached_tokens is not None:
        tokens += f" (cached {usage.cached_tokens})"
    tokens += f", output {usage.output_tokens}"
    if usage.reasoning_tokens is not None:
        tokens += f" (reasoning {usage.reasoning_tokens})"
    if response.cost_usd is None:
        cost = (f"unknown: no price for {response.provider}:{response.model} "
                "(add it to ~/.config/pikeh/prices.toml or a PIKEH_PRICES file)")
    else:
        cost = f"${response.cost_usd:.6f} ({response.cost_source})"
    flags = [flag for flag, on in (("TRUNCATED at max tokens", response.truncated), ("EMPTY reply", response.empty),
                                   ("from cache", response.from_cache), ("replayed", response.replayed)) if on]
    lines = [
        f"model:    {label}{answered}",
        f"tokens:   {tokens}",
        f"cost:     {cost}",
        f"latency:  {response.latency_s:.2f} s",
        f"finish:   {response.finish_reason or '-'}{'  [' + ', '.join(flags) + ']' if flags else ''}",
        f"retries:  {len(response.retries)}",
    ]
    lines += [f"  retry {r.attempt}: {r.error} (waited {r.waited_s:.2f} s)" for r in response.retries]
    lines += ["reply:", response.text.rstrip() or "(empty)"]
    return text_safety.printable("\n".join(lines))  # the endpoint's words, shown and never obeyed


@llm.command("providers")
@click.option("--json", "as_json", is_flag=True)
def providers_command(as_json: bool) -> None:
    """List the LLM providers the installed plugins offer (write them as PROVIDER:MODEL)."""
    host = App.host()
    rows = []
    for name in host.names("llm_backends"):
        factory = host.get("llm_backends", name)
        doc = (factory.__doc__ or "").strip().splitlines()
        rows.append({"provider": name, "plugin": host.provider_of("llm_backends", name),
                     "about": doc[0] if doc else ""})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        click.echo(f"{row['provider']:<12} {row['plugin']:<10} {row['about']}")


@llm.command("prices")
@click.argument("model", required=False, metavar="[PROVIDER:MODEL]")
def prices_command(model: str | None) -> None:
    """Show the price table ($ per million tokens) and the files it was read from, or one model's price."""
    from pike_harness.contracts.llm import parse_model_spec
    from pike_harness.host.pricing import PriceTable

    table = PriceTable.load(providers=App.host().provider_prices())
    click.echo("price files: " + ", ".join(table.sources))
    if model:
        provider, name = parse_model_spec(model)
        price = table.price(provider, name)
        if price is None:
            raise UserError(f"no price for {model}: its cost is reported as unknown "
                            "(add it to ~/.config/pikeh/prices.toml or a PIKEH_PRICES file)")
        entries = {price.key: price}
    else:
        entries = table.entries()
    for key, price in sorted(entries.items()):
        rates = price.rates
        cached = "-" if rates.cached_input is None else f"{rates.cached_input:g}"
        extra = ""
        if price.long_context is not None:
            extra = (f"  (prompts > {price.long_context_above:,} tokens: {price.long_context.input:g} / "
                     f"{price.long_context.output:g})")
        click.echo(f"{key:<28} in {rates.input:<6g} out {rates.output:<6g} cached {cached:<6}{extra}")

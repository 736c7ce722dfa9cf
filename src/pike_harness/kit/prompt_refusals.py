"""Which HTTP 400s are about one prompt, not about the run's setup.

A provider answers 400 both for a request that can never work (an unknown model, a parameter the model
rejects, a malformed key) and for one prompt it will not take (longer than the context window, or
content it refuses to process). The first must stop the run: every later query would fail the same way.
The second is that one query's failure: the strategy's next prompt is a different request and may well
be answered, and asking the same prompt again gets the same refusal. Only the error body tells them
apart, so this reads the fields the OpenAI and Anthropic APIs (and the OpenAI-compatible servers: vLLM,
DeepSeek, Gemini's endpoint) actually send. Anything not recognised is treated as the setup's fault:
a run that stops with the provider's message costs a rerun, one that fails every query silently costs
the whole search.
"""

from __future__ import annotations

import re
from typing import Any

# ``error.code`` / ``error.type`` values that name the prompt. OpenAI: context_length_exceeded,
# string_above_max_length (a message over its size limit), invalid_prompt ("flagged as potentially
# violating our usage policy"), content_policy_violation; Azure OpenAI: content_filter;
# Anthropic (HTTP 413): request_too_large.
PROMPT_CODES = frozenset({
    "context_length_exceeded", "string_above_max_length", "invalid_prompt", "content_policy_violation",
    "content_filter", "request_too_large",
})

# Codes that name the setup even when the message mentions tokens or length (OpenAI's
# ``unsupported_parameter`` for max_tokens on a reasoning model, for one).
SETUP_CODES = frozenset({
    "model_not_found", "invalid_model", "invalid_api_key", "unsupported_parameter", "unsupported_value",
    "authentication_error", "permission_error", "not_found_error",
})

# The messages that say the prompt is too long or refused, as the APIs word them:
#   Anthropic:  "prompt is too long: 215000 tokens > 200000 maximum";
#               "input length and `max_tokens` exceed context limit: 190000 + 32000 > 200000, ..."
#   OpenAI, vLLM, DeepSeek: "This model's maximum context length is 128000 tokens. However, your
#               messages resulted in ..."; OpenAI: "Input tokens exceed the configured limit of ..."
#   Gemini:     "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
#   OpenAI, Azure: "... flagged as potentially violating our usage policy", "... content management policy"
# Not here: "max_tokens is too large: 100000. This model supports at most 16384 completion tokens" is the
# same for every request of the run (a setting), so it stays fatal.
PROMPT_MESSAGES = re.compile(
    r"prompt is too long|context[ _](?:length|window|limit)|"
    r"(?:input|prompt)[ _](?:tokens?|token count|length)\b[^.]*\bexceed|too many (?:input |prompt )?tokens|"
    r"reduce the length of the (?:messages|prompt)|"
    r"flagged as potentially violating|content (?:management )?polic|content filter",
    re.IGNORECASE,
)


def refuses_prompt(status: int, body: Any) -> bool:
    """Whether an HTTP error with this status and JSON body is the provider refusing this one prompt.

    ``body`` is the error as the SDKs keep it (``APIStatusError.body``): the ``error`` object itself, or
    the whole body (``{"error": {...}}``, Gemini's ``[{"error": {...}}]``); anything else reads as empty.
    """
    if status == 413:  # Request Entity Too Large: this request's size, whatever the body says
        return True
    if status != 400:
        return False
    error = error_object(body)
    codes = {str(error.get(name)) for name in ("code", "type") if error.get(name) is not None}
    if codes & SETUP_CODES:
        return False
    if codes & PROMPT_CODES:
        return True
    return bool(PROMPT_MESSAGES.search(str(error.get("message") or "")))


def error_object(body: Any) -> dict[str, Any]:
    """The error's fields (``message``, ``type``, ``code``...) from any of the shapes above; {} if none."""
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, dict):
        return {}
    inner = body.get("error")
    return inner if isinstance(inner, dict) else body

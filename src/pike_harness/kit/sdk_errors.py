"""What LLM backends built on the official ``openai``/``anthropic`` SDKs share: their exceptions mapped to
the host's (transient, to retry; a refused prompt, that query's failure; or permanent), the server's
retry-after honoured, and keys redacted from every error text before it can reach a log, a run record or
the terminal."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from typing import Any

from pike_harness.contracts.llm import LLMError, PromptRefusedError, TransientLLMError
from pike_harness.kit.prompt_refusals import error_object, refuses_prompt

# Shapes of API keys that services echo back in error messages ("Incorrect API key provided: sk-ab***yz").
_KEY_SHAPES = re.compile(
    r"(?:sk|pk|rk)-[A-Za-z0-9_\-*.]{6,}|AIza[0-9A-Za-z_\-]{20,}|[A-Za-z0-9_\-]*\*{4,}[A-Za-z0-9_\-]*|"
    r"(?i:bearer)\s+[A-Za-z0-9_\-.=]{8,}"
)


def redact_secrets(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with the given secrets and anything shaped like an API key replaced by ``[redacted]``.

    Backends pass every error message through this before raising, so keys never reach logs, run
    records or the terminal, even when a service quotes part of the key back.
    """
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return _KEY_SHAPES.sub("[redacted]", text)


def parse_retry_after(headers: Any) -> float | None:
    """Seconds a server asked us to wait (``retry-after-ms``, ``retry-after`` seconds or HTTP date).

    ``headers`` is anything with a case-insensitive ``get`` (the SDKs' response headers).
    """
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        if seconds >= 0 and seconds != float("inf"):
            return seconds
    value = headers.get("retry-after")
    if value:
        import email.utils
        import time

        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())
    return None


# Worth retrying besides every 5xx (Anthropic's 529 "overloaded" included).
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


@contextlib.contextmanager
def sdk_errors(sdk: Any, *, spec: str, base_url: str, timeout_s: float,
               secrets: Iterable[str | None]) -> Iterator[None]:
    """Turn an official SDK's exceptions into the host's: transient (retry), a refused prompt (HTTP 400/413
    about this request's content: ``PromptRefusedError``) or permanent, keys redacted.

    The ``openai`` and ``anthropic`` SDKs share one exception hierarchy (APITimeoutError,
    APIConnectionError, APIStatusError, APIError), so every backend built on either maps failures here.
    """
    secrets = list(secrets)
    try:
        yield
    except sdk.APITimeoutError:
        raise TransientLLMError(f"{spec}: no answer within {timeout_s:g} s") from None
    except sdk.APIConnectionError as exc:
        raise TransientLLMError(redact_secrets(f"{spec}: connection to {base_url} failed: "
                                               f"{exc.__cause__ or exc}", secrets)) from None
    except sdk.APIStatusError as exc:
        status = exc.status_code
        message = redact_secrets(f"{spec}: HTTP {status}: {_sdk_error_text(exc)}", secrets)
        if status in RETRYABLE_STATUS or status >= 500:
            raise TransientLLMError(message, status=status,
                                    retry_after=parse_retry_after(exc.response.headers)) from None
        if refuses_prompt(status, getattr(exc, "body", None)):
            raise PromptRefusedError(message, status=status) from None
        raise LLMError(message, status=status) from None
    except sdk.APIError as exc:  # an answer the SDK could not read: retrying will not change it
        raise LLMError(redact_secrets(f"{spec}: unreadable answer from {base_url}: {exc}", secrets)) from None


def reject_non_json(reply: Any, *, spec: str, secrets: Iterable[str | None]) -> None:
    """A server that answered 200 with something that is not JSON (a proxy's error page): retry it."""
    if isinstance(reply, str):
        raise TransientLLMError(redact_secrets(f"{spec}: the server's answer is not JSON: {reply[:200]}",
                                               list(secrets)))


def _sdk_error_text(exc: Any) -> str:
    """The provider's own message: what a user needs to fix a refused request (Gemini's list-wrapped
    body included, which the SDK's message leaves as a bare "Error code: 400")."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return str(body["error"])
    message = error_object(body).get("message")
    if message:
        return str(message)
    return str(getattr(exc, "message", exc))

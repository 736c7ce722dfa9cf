"""Secrets of the harness's environment never enter a result record, by value.

A candidate's logs, the evaluator's error messages and build logs all end up in result records,
and failure reports send them to an LLM provider. The candidate's environment is scrubbed, so it
should never learn a secret; this is the second line: every string of a result is searched for the
values of this process's secret-looking variables (API keys of the LLM backends, cloud and registry
tokens: names with KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, AUTH, ... or a provider prefix) and
each occurrence, and its base64 form, is replaced. By value, not by name: an error that echoes a
key without naming it is masked too. A secret split into pieces, encoded some other way or shorter
than ``MIN_SECRET_CHARS`` is not recognised. Standard library only.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pike_harness.worker import text_safety

SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE)", re.IGNORECASE
)
SECRET_PREFIXES = ("AWS_", "GOOGLE_", "AZURE_", "OPENAI_", "ANTHROPIC_", "HF_", "HUGGING", "GITHUB_", "GH_")
MASK = "[masked]"
MIN_SECRET_CHARS = 6  # shorter values ("1", "true") would mask ordinary words


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return bool(SECRET_NAME.search(upper)) or upper.startswith(SECRET_PREFIXES)


def secret_values(source: Mapping[str, str] | None = None) -> list[str]:
    """Values of the secret-looking variables of ``source`` (default: this process's environment),
    with their stripped and base64 forms, longest first."""
    source = os.environ if source is None else source
    values: set[str] = set()
    for name, value in source.items():
        if is_secret_name(name):
            for form in (value, value.strip()):
                if len(form) >= MIN_SECRET_CHARS:
                    values.add(form)
                    values.add(base64.b64encode(form.encode()).decode().rstrip("="))
    return sorted(values, key=len, reverse=True)


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def shown(text: str, secrets: Iterable[str], limit: int | None = None) -> str:
    """Text that came from outside the harness (a candidate, a worker), as a record or an error keeps
    it: its secrets masked, then its control characters and bidi marks escaped (``text_safety``).

    With ``limit``, at most that many characters of it, then a note of the length it had: a candidate
    can make any text of its result megabytes long, and each copy of it goes into the journal, the run's
    database and the next prompt. The cut comes first, a secret's length before the limit, so that no
    secret cut in two escapes its mask; escaping may lengthen what is left, so it is cut again."""
    secrets = list(secrets)
    length = len(text)
    if limit is not None and length > limit:
        text = text[:max(0, limit - max(map(len, secrets), default=0))]
    text = text_safety.printable(mask_secrets(text, secrets))
    return text if limit is None else text_safety.head_capped(text, limit, length=length)


def redact(value: Any, secrets: list[str]) -> Any:
    """``value`` with every secret masked in every string inside it (dicts, lists and tuples walked)."""
    if not secrets:
        return value
    return text_safety.map_strings(value, lambda text: mask_secrets(text, secrets))

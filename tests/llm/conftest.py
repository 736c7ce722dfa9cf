"""Fixtures for the LLM tests: the loopback fake server and fake API keys."""

from __future__ import annotations

import pytest

from pike_harness.testing.fixtures import llm_server  # noqa: F401  (a fixture, used by name)

FAKE_OPENAI_KEY = "sk-test-0123456789abcdefSECRET"
FAKE_ANTHROPIC_KEY = "sk-ant-test-0123456789SECRET"


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Fake keys in the environment, and no stray real ones or endpoint overrides."""
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "PIKEH_LOCAL_BASE_URL", "PIKEH_PRICES",
                "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent-pikeh-test-config")
    return {"openai": FAKE_OPENAI_KEY, "anthropic": FAKE_ANTHROPIC_KEY}

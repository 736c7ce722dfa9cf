"""pytest fixtures for plugin tests: import them into a conftest.py (``from pike_harness.testing.fixtures
import llm_server``). Kept apart so ``pike_harness.testing`` itself does not need pytest."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pike_harness.testing.llm_server import FakeLLMServer


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    """A started fake OpenAI/Anthropic server on 127.0.0.1, stopped after the test."""
    server = FakeLLMServer().start()
    try:
        yield server
    finally:
        server.stop()

"""Test doubles shared by the test suite: real protocols on loopback, never mocks of the code under test.

``fakes.llm_server``: an OpenAI/Anthropic-compatible HTTP server the real SDKs talk to (fixture
``llm_server``; import it into a conftest.py or a test module to use it).
"""

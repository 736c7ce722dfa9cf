"""Which HTTP 400s are one prompt refused and which are the run's setup refused, as the real openai and
anthropic SDKs report the providers' own error bodies from the loopback fake (kit/prompt_refusals.py).

The bodies are the providers' documented shapes and wordings; a refused prompt is a PromptRefusedError
(that query fails, the run goes on), anything else stays a plain LLMError (the run stops). Neither is
retried: the same request gets the same answer.
"""

from __future__ import annotations

import pytest
from llm_test_helpers import MODELS, ask, client_for

from pike_harness.contracts.llm import LLMError, PromptRefusedError
from pike_harness.testing.llm_server import FakeLLMServer, FakeReply

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


def openai_error(message: str, *, type: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def anthropic_error(message: str, *, type: str = "invalid_request_error") -> dict:
    return {"type": "error", "error": {"type": type, "message": message}}


PROMPT_REFUSED = {
    "openai context_length_exceeded": ("openai", 400, openai_error(
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 "
        "tokens. Please reduce the length of the messages.", code="context_length_exceeded", param="messages")),
    "openai input tokens over the limit": ("openai", 400, openai_error(
        "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 280101 tokens. "
        "Please reduce the length of the messages.", param="messages")),
    "openai prompt plus completion (vLLM, DeepSeek)": ("openai", 400, openai_error(
        "This model's maximum context length is 32768 tokens. However, you requested 40500 tokens (8500 in "
        "the messages, 32000 in the completion). Please reduce the length of the messages or completion.",
        type="BadRequestError", code="400")),
    "openai flagged prompt": ("openai", 400, openai_error(
        "Invalid prompt: your prompt was flagged as potentially violating our usage policy.", code="invalid_prompt")),
    "anthropic prompt is too long": ("anthropic", 400, anthropic_error("prompt is too long: 215000 tokens > "
                                                                      "200000 maximum")),
    "anthropic input and max_tokens over the context": ("anthropic", 400, anthropic_error(
        "input length and `max_tokens` exceed context limit: 190000 + 32000 > 200000, decrease input length or "
        "`max_tokens` and try again")),
    "anthropic 413 request too large": ("anthropic", 413, anthropic_error(
        "Request exceeds the maximum allowed number of bytes.", type="request_too_large")),
}

SETUP_REFUSED = {
    "openai unknown model": ("openai", 400, openai_error("The requested model 'gpt-9' does not exist.",
                                                         code="model_not_found", param="model")),
    "openai unsupported parameter": ("openai", 400, openai_error(
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
        "instead.", code="unsupported_parameter", param="max_tokens")),
    "openai max_tokens over the model's output limit": ("openai", 400, openai_error(
        "max_tokens is too large: 100000. This model supports at most 16384 completion tokens, whereas you "
        "provided 100000.", code="invalid_value", param="max_tokens")),
    "anthropic unknown model": ("anthropic", 400, anthropic_error("model: claude-nonexistent-9")),
    "anthropic bad parameter": ("anthropic", 400, anthropic_error("temperature: range: 0..1")),
}


@pytest.mark.parametrize("api,status,body", PROMPT_REFUSED.values(), ids=PROMPT_REFUSED.keys())
def test_a_refused_prompt_is_that_querys_failure(api: str, status: int, body: dict, llm_server: FakeLLMServer,
                                                 keys: dict[str, str]):
    llm_server.script(FakeReply(status=status, body=body))
    with pytest.raises(PromptRefusedError) as info:
        ask(client_for(llm_server, MODELS[api]))
    assert info.value.status == status and body["error"]["message"][:40] in str(info.value)
    assert llm_server.count() == 1 and info.value.retries == []  # the same prompt gets the same refusal


@pytest.mark.parametrize("api,status,body", SETUP_REFUSED.values(), ids=SETUP_REFUSED.keys())
def test_a_refused_setup_stays_a_plain_error(api: str, status: int, body: dict, llm_server: FakeLLMServer,
                                             keys: dict[str, str]):
    llm_server.script(FakeReply(status=status, body=body))
    with pytest.raises(LLMError) as info:
        ask(client_for(llm_server, MODELS[api]))
    assert not isinstance(info.value, PromptRefusedError)
    assert info.value.status == status and body["error"]["message"][:30] in str(info.value)
    assert llm_server.count() == 1


def test_geminis_list_shaped_body_is_read(llm_server: FakeLLMServer, keys: dict[str, str],
                                          monkeypatch: pytest.MonkeyPatch):
    """Gemini's OpenAI-compatible endpoint wraps its error in a list; a bad key there is a 400 too."""
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-test-key-0123456789")
    too_long = [{"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "The input token count "
                           "(1200000) exceeds the maximum number of tokens allowed (1048576)."}}]
    bad_key = [{"error": {"code": 400, "status": "INVALID_ARGUMENT",
                          "message": "API key not valid. Please pass a valid API key."}}]
    llm_server.script(FakeReply(status=400, body=too_long), FakeReply(status=400, body=bad_key))
    client = client_for(llm_server, "google:gemini-2.5-pro")
    with pytest.raises(PromptRefusedError):
        ask(client)
    with pytest.raises(LLMError) as info:
        ask(client)
    assert not isinstance(info.value, PromptRefusedError) and "API key not valid" in str(info.value)

"""A loopback fake of the OpenAI Chat Completions and Anthropic Messages APIs, for tests of plugins and the host.

The real ``openai`` and ``anthropic`` SDKs talk to it over HTTP on 127.0.0.1 (these SDK versions use
httpx2, which respx cannot intercept), so tests exercise the same code path as a real run: request
building, status handling, retries, usage parsing. Nothing leaves the machine.

Use::

    from pike_harness.testing import FakeLLMServer, FakeReply
    from pike_harness.testing.fixtures import llm_server   # the fixture: a started server

    def test_something(llm_server, monkeypatch):
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        llm_server.script(FakeReply(status=429, headers={"Retry-After": "0"}), "second answer")
        ...  # point a client at llm_server.openai_base_url or llm_server.anthropic_base_url
        assert llm_server.count() == 2
        assert "reference" in llm_server.requests[0].prompt_text

A reply is decided per request, in this order: the next scripted reply (``script``), else the reply
function (``FakeLLMServer(reply=fn)`` or ``set_reply(fn)``; ``fn(request) -> FakeReply | str``), else
"ok". A ``str`` means a successful answer with that text. Usage numbers are filled in (prompt tokens =
prompt characters / 4, output = reply characters / 4) unless the reply sets them. ``mutate_reply``
answers like ``offline:mutate`` does, so whole strategy runs get real programs through a real SDK.

Endpoints: ``POST /v1/chat/completions`` (OpenAI), ``POST /v1/messages`` (Anthropic, also under any
path prefix ending in ``/messages``), ``GET /v1/models``. Every request is logged (``requests``,
thread-safe) with its headers and JSON body, before its reply is chosen.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeLLMServer", "FakeReply", "ReceivedRequest", "mutate_reply"]


@dataclass
class FakeReply:
    """What the fake answers to one request.

    ``finish`` is in OpenAI terms ("stop", "length", "content_filter"); the Anthropic endpoint maps
    "stop" to "end_turn" and "length" to "max_tokens". A ``status`` of 400 or more sends an error body
    with ``error_message``. ``delay_s`` waits before answering (for timeout tests; cut short when the
    server stops). ``body`` replaces the whole JSON body; ``raw`` sends these bytes as the body.
    """

    text: str = "ok"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    finish: str = "stop"
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    model_id: str | None = None
    error_message: str = "fake error"
    extra_usage: dict[str, Any] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    raw: bytes | None = None

    @classmethod
    def code(cls, program: str, prose: str = "Here is the program.", **kwargs: Any) -> FakeReply:
        """A reply holding ``program`` in one fenced Python block, as a model answers."""
        return cls(text=f"{prose}\n\n```python\n{program.rstrip()}\n```\n", **kwargs)


@dataclass
class ReceivedRequest:
    """One request as the fake saw it."""

    api: str  # "openai" | "anthropic" | "other"
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: dict[str, Any]
    received_at: float

    @property
    def model(self) -> str | None:
        return self.body.get("model")

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation, with Anthropic's ``system`` parameter put back as a first system message."""
        messages = [dict(m) for m in self.body.get("messages", [])]
        system = self.body.get("system")
        if system:
            text = system if isinstance(system, str) else "".join(b.get("text", "") for b in system)
            messages.insert(0, {"role": "system", "content": text})
        return messages

    @property
    def prompt_text(self) -> str:
        return "\n".join(_content_text(m.get("content")) for m in self.messages)


class FakeLLMServer:
    """A threaded HTTP server on 127.0.0.1 speaking enough of both APIs for the SDKs. Thread-safe."""

    def __init__(self, reply: Callable[[ReceivedRequest], FakeReply | str] | None = None):
        self._reply_fn = reply
        self._script: deque[FakeReply | str] = deque()
        self._requests: list[ReceivedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> FakeLLMServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the server first"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """What ``--llm-base-url`` takes for OpenAI-compatible providers."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """What ``--llm-base-url`` takes for ``anthropic:`` (the SDK appends /v1/messages)."""
        return self.url

    # -- scripting -----------------------------------------------------------------------------
    def script(self, *replies: FakeReply | str) -> None:
        """Queue replies for the next requests, in order; the reply function answers after them."""
        with self._lock:
            self._script.extend(replies)

    def set_reply(self, reply: Callable[[ReceivedRequest], FakeReply | str] | None) -> None:
        with self._lock:
            self._reply_fn = reply

    def _choose(self, request: ReceivedRequest) -> FakeReply:
        with self._lock:
            choice: FakeReply | str | None = self._script.popleft() if self._script else None
            fn = self._reply_fn
        if choice is None:
            choice = fn(request) if fn is not None else "ok"
        return FakeReply(text=choice) if isinstance(choice, str) else choice

    # -- the request log -----------------------------------------------------------------------
    @property
    def requests(self) -> list[ReceivedRequest]:
        with self._lock:
            return list(self._requests)

    def count(self, api: str | None = None) -> int:
        return sum(1 for r in self.requests if api is None or r.api == api)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self._script.clear()

    def _log(self, request: ReceivedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _wait(self, seconds: float) -> None:
        self._stopping.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeLLMServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}, {})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}}, {})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        path = self.path.split("?", 1)[0].rstrip("/")
        api = "openai" if path.endswith("/chat/completions") else "anthropic" if path.endswith("/messages") else "other"
        request = ReceivedRequest(api=api, method="POST", path=self.path,
                                  headers={k.lower(): v for k, v in self.headers.items()},
                                  body=body, received_at=time.time())
        self.fake._log(request)
        if api == "other":
            self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
            return
        reply = self.fake._choose(request)
        if reply.delay_s:
            self.fake._wait(reply.delay_s)
        if reply.raw is not None:
            self._send_bytes(reply.status, reply.raw, reply.headers, "text/plain")
            return
        if reply.status >= 400:
            payload = reply.body or _error_body(api, reply)
        else:
            payload = reply.body or (_openai_body(request, reply) if api == "openai"
                                     else _anthropic_body(request, reply))
        self._send(reply.status, payload, reply.headers)

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), headers, "application/json")

    def _send_bytes(self, status: int, data: bytes, headers: dict[str, str], content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _usage_numbers(request: ReceivedRequest, reply: FakeReply) -> tuple[int, int]:
    prompt = reply.prompt_tokens if reply.prompt_tokens is not None else _tokens(request.prompt_text)
    output = reply.output_tokens if reply.output_tokens is not None else _tokens(reply.text)
    return prompt, output


def _openai_body(request: ReceivedRequest, reply: FakeReply) -> dict[str, Any]:
    prompt, output = _usage_numbers(request, reply)
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": output,
                             "total_tokens": prompt + output}
    if reply.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    if reply.reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
    usage.update(reply.extra_usage)
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
        "model": reply.model_id or request.model or "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text},
                     "finish_reason": reply.finish}],
        "usage": usage,
    }


_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens"}


def _anthropic_body(request: ReceivedRequest, reply: FakeReply) -> dict[str, Any]:
    prompt, output = _usage_numbers(request, reply)
    cached = reply.cached_tokens or 0
    usage = {"input_tokens": prompt - cached, "output_tokens": output,
             "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0, **reply.extra_usage}
    content = [{"type": "text", "text": reply.text}] if reply.text else []
    return {
        "id": "msg_fake", "type": "message", "role": "assistant",
        "model": reply.model_id or request.model or "fake-model", "content": content,
        "stop_reason": _ANTHROPIC_STOP.get(reply.finish, reply.finish), "stop_sequence": None,
        "usage": usage,
    }


def _error_body(api: str, reply: FakeReply) -> dict[str, Any]:
    if api == "anthropic":
        return {"type": "error", "error": {"type": "api_error", "message": reply.error_message}}
    return {"error": {"message": reply.error_message, "type": "fake_error", "code": str(reply.status)}}


def mutate_reply(request: ReceivedRequest) -> FakeReply:
    """Answer like ``offline:mutate``: ideas for brainstorm prompts, real programs otherwise.

    The role is inferred from the prompt (the fake sees only messages): PIKE's brainstorm prompt
    asks for ideas, the fix prompt quotes a failing program.
    """
    from pike_harness.api import LLMRequest, prompt_kinds

    messages = [{"role": m["role"], "content": _content_text(m.get("content"))} for m in request.messages]
    kind = prompt_kinds.prompt_kind(messages)
    role = {"brainstorm": "brainstorm", "fix": "fix"}.get(kind or "", "optimize")
    answer = _mutate_backend().complete(LLMRequest(messages=messages, role=role))
    return FakeReply(text=answer.text)


@functools.cache
def _mutate_backend() -> Any:
    """The installed ``offline:mutate`` backend, found through the plugin host (the host imports no plugin)."""
    from pike_harness.api import BackendOptions
    from pike_harness.host.plugins import PluginHost

    return PluginHost().get("llm_backends", "offline")("mutate", BackendOptions())

"""``offline:replay``: answers from a recorded run's journal, so a past run can be replayed exactly.

Where the recording is: ``offline:replay=/path/to/run`` (the model part names the run directory or its
journal.jsonl), or ``offline:replay`` with ``BackendOptions.extra["replay_dir"]`` (what
``pikeh run --replay-dir`` passes). Naming it twice, differently, is an error.

Matching: every ``"type": "llm"`` line of the journal holds ``request_sha256`` (the recording client's
``request_hash``: provider, model, messages, parameters) and ``response``. A request is hashed with
each provider/model pair the recording used (they are in the recorded responses), so a run that routed
roles to different models replays too. When one prompt was asked several times (PIKE-B sends the same
prompt to one parent for several children), the request's ``key`` picks the recorded answer to that
same query; without a key, successive identical requests get the recorded answers in journal order.

Replayed responses keep the recorded provider, model, usage and cost (a replayed run reports like the
original) and are flagged ``replayed``. An unknown request is an ``LLMError``: replay never invents.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pike_harness.api import (
    JOURNAL,
    BackendOptions,
    LLMAnswer,
    LLMBackend,
    LLMError,
    LLMRequest,
    LLMResponse,
    UserError,
    read_journal,
    request_hash,
)


class ReplayBackend(LLMBackend):
    provider = "offline"

    def __init__(self, model: str, options: BackendOptions):
        spec_dir = model.partition("=")[2] or None
        option_dir = (options.extra or {}).get("replay_dir")
        if spec_dir and option_dir and Path(spec_dir).resolve() != Path(option_dir).resolve():
            raise UserError(f"offline:replay names two recordings ({spec_dir} and {option_dir}); give one")
        where = spec_dir or option_dir
        if not where:
            raise UserError("offline:replay needs a recorded run: write offline:replay=RUN_DIR "
                            "or pass --replay-dir RUN_DIR")
        super().__init__("replay", options)  # the path is not part of the model name (or of hashes)
        self.journal = _journal_path(Path(where).expanduser())
        self._by_hash: dict[str, list[dict[str, Any]]] = {}
        self._pairs: list[tuple[str, str]] = []
        self._load()
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()

    def _load(self) -> None:
        pairs: dict[tuple[str, str], None] = {}
        for event in read_journal(self.journal):
            if event.get("type") != LLMAnswer.type or "request_sha256" not in event or "response" not in event:
                continue
            self._by_hash.setdefault(event["request_sha256"], []).append(event)
            response = event["response"]
            pairs[(response.get("provider", ""), response.get("model", ""))] = None
            if isinstance(event.get("spec"), str) and ":" in event["spec"]:
                provider, _, model = event["spec"].partition(":")
                pairs[(provider, model)] = None
        pairs[(self.provider, self.model)] = None  # a replay of a replayed run
        self._pairs = list(pairs)
        if not self._by_hash:
            raise UserError(f"{self.journal} holds no recorded LLM responses to replay")

    def complete(self, request: LLMRequest) -> LLMResponse:
        for provider, model in self._pairs:
            digest = request_hash(provider, model, request)
            events = self._by_hash.get(digest)
            if events:
                response = LLMResponse.from_dict(self._pick(digest, events, request.key)["response"])
                response.replayed = True
                response.retries = []
                return response
        digest = request_hash(*self._pairs[0], request) if self._pairs else "?"
        raise LLMError(f"offline:replay: no recorded answer for this {request.role} request "
                       f"(sha256 {digest[:12]}...) in {self.journal}; the prompts or generation "
                       "parameters differ from the recorded run's")

    def _pick(self, digest: str, events: list[dict[str, Any]], key: str | None) -> dict[str, Any]:
        if key is not None:
            for event in events:
                if key in _keys_of(event):
                    return event
        with self._lock:
            index = self._next.get(digest, 0)
            self._next[digest] = index + 1
        return events[min(index, len(events) - 1)]


def _keys_of(event: dict[str, Any]) -> set[str]:
    """The names a journal event's query may be known by (the run loop's key conventions)."""
    key, task = event.get("key"), event.get("task")
    names = {str(event["request_key"])} if event.get("request_key") else set()
    if key:
        names.add(str(key))
        if task:
            names |= {f"{task}#{key}", f"{task}/{key}", f"{task}:{key}"}
    return names


def _journal_path(where: Path) -> Path:
    path = where / JOURNAL if where.is_dir() else where
    if not path.is_file():
        raise UserError(f"offline:replay: {path} does not exist (give a run directory or its {JOURNAL})")
    return path

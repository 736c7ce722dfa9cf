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
original) and are flagged ``replayed``. A query whose prompt the provider refused (an ``"llm_error"``
line with ``refused: true``, ``PromptRefusedError`` in the recording run) is refused again: the request
whose ``key`` names that query (and whose role is the recorded one) gets a ``PromptRefusedError`` with
the recorded message and status, so the strategy takes the path it took. Those lines hold no request
hash, so only the key finds them; an answer recorded under the same key wins. Any other recorded
failure is not replayed. An unknown request is an ``LLMError``: replay never invents.
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
    LLMFailure,
    LLMRequest,
    LLMResponse,
    PromptRefusedError,
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
        self._refused: dict[str, dict[str, Any]] = {}  # the recorded refusals, by each name of their query
        self._pairs: list[tuple[str, str]] = []
        self._load()
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()

    def _load(self) -> None:
        pairs: dict[tuple[str, str], None] = {}
        for event in read_journal(self.journal):
            if event.get("type") == LLMFailure.type and event.get("refused") is True:
                for name in _keys_of(event):
                    self._refused.setdefault(name, event)
                continue
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
        if not self._by_hash and not self._refused:
            raise UserError(f"{self.journal} holds no recorded LLM responses to replay")

    def complete(self, request: LLMRequest) -> LLMResponse:
        found = self._recorded(request)
        if found is not None and request.key is not None:
            for event in found[1]:
                if request.key in _keys_of(event):
                    return _replayed(event)
        refusal = self._refusal(request)
        if refusal is not None:
            status = refusal.get("status")
            raise PromptRefusedError(str(refusal.get("error") or "the provider refused the prompt"),
                                     status=status if isinstance(status, int) else None)
        if found is not None:
            return _replayed(self._pick(*found))
        digest = request_hash(*self._pairs[0], request) if self._pairs else "?"
        raise LLMError(f"offline:replay: no recorded answer for this {request.role} request "
                       f"(sha256 {digest[:12]}...) in {self.journal}; the prompts or generation "
                       "parameters differ from the recorded run's")

    def _recorded(self, request: LLMRequest) -> tuple[str, list[dict[str, Any]]] | None:
        """The recorded answers to this request (its hash under the first provider/model that has any)."""
        for provider, model in self._pairs:
            digest = request_hash(provider, model, request)
            events = self._by_hash.get(digest)
            if events:
                return digest, events
        return None

    def _refusal(self, request: LLMRequest) -> dict[str, Any] | None:
        """The recorded refusal of the query ``request.key`` names, when it was asked in the same role."""
        event = self._refused.get(request.key) if request.key is not None else None
        if event is None or event.get("role") not in (None, request.role):
            return None
        return event

    def _pick(self, digest: str, events: list[dict[str, Any]]) -> dict[str, Any]:
        """The next of several recorded answers to one request, in journal order (a request without a
        key, or one whose key names none of them)."""
        with self._lock:
            index = self._next.get(digest, 0)
            self._next[digest] = index + 1
        return events[min(index, len(events) - 1)]


def _replayed(event: dict[str, Any]) -> LLMResponse:
    response = LLMResponse.from_dict(event["response"])
    response.replayed = True
    response.retries = []
    return response


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

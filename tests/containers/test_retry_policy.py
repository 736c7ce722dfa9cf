"""One retry policy for every evaluator transport and the run loop: a request is tried at most
``max_attempts`` times in all, the transport's own tries included."""

from __future__ import annotations

import pytest
from queue_helpers import CORRECT, request

from pike_harness.contracts.evaluation import EvalRetryPolicy, Evaluator, EvaluatorError
from pike_harness.worker import queue_channel as qc
from pike_harness.worker.queue_client import QueueClient


def test_the_transports_own_tries_count_against_the_policy():
    calls: list[int] = []
    spent = iter([2, 1, 5])  # a transport that retried once on its own, then two plain failures

    def attempt() -> str:
        calls.append(1)
        raise EvaluatorError("infrastructure", attempts=next(spent))

    waits: list[float] = []
    with pytest.raises(EvaluatorError):
        EvalRetryPolicy(max_attempts=3).call(attempt, retry_on=EvaluatorError, sleep=waits.append)
    assert len(calls) == 2, "2 tries by the transport + 1 here = the policy's 3; no more"
    assert waits == [4.0]

    outcomes = iter([EvaluatorError("down"), "verdict"])

    def flaky() -> str:
        value = next(outcomes)
        if isinstance(value, Exception):
            raise value
        return value

    assert EvalRetryPolicy().call(flaky, retry_on=EvaluatorError, sleep=lambda _: None) == "verdict"
    with pytest.raises(EvaluatorError):  # a run that is stopping does not retry at all
        EvalRetryPolicy().call(attempt, retry_on=EvaluatorError, give_up=lambda: True, sleep=lambda _: None)
    assert Evaluator.retry_policy == EvalRetryPolicy(), "every evaluator shares the one default"
    assert EvalRetryPolicy.from_dict(EvalRetryPolicy(max_attempts=5).to_dict()).max_attempts == 5


def test_a_queue_workers_error_says_how_many_tries_the_request_had(tmp_path):
    """Two workers died on the request before this one failed it: the run loop sees 3 tries spent."""
    client = QueueClient(tmp_path / "io", error_type=EvaluatorError, wait_for_worker_s=60)
    try:
        future = client.submit(request(CORRECT))
        (name,) = qc.names(client.qdir.requests)
        ticket, _ = qc.parse_request_name(name)
        qc.write_json(client.qdir.results, qc.result_name(ticket), {
            "protocol": qc.PROTOCOL, "kind": "result", "ticket": ticket, "attempt": 2,
            "worker": {"id": "w"}, "error": "the reference process failed"})
        with pytest.raises(EvaluatorError) as caught:
            future.result(timeout=30)
    finally:
        client.close()
    assert caught.value.attempts == 3
    assert not EvalRetryPolicy().may_retry(caught.value.attempts)

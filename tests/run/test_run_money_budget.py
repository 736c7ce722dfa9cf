"""The money budget holds against answers in flight, and a stopping run sends no retry: real `pikeh run`s
against the loopback fake model, counted at the fake.

Prices make the arithmetic exact: input is free and output costs $1,000 per million tokens, so a query
sent with ``--max-tokens 1000`` can cost at most $1.00 and each answer (400 output tokens) costs $0.40.
The host sends a query exactly when the answers charged before it plus its own worst case fit in the
budget (host/budget_ledger.py), whatever the timing.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time

from scripted_programs import ScriptedModel, scripted_evaluator_plugin
from test_run_pike_b import KEY, WORKS, env, in_process, journal, pikeh_cmd

from pike_harness.kit import prompt_kinds
from pike_harness.testing import invoke
from pike_harness.testing.llm_server import FakeLLMServer, FakeReply

PRICES = '[models."openai:fake-coder"]\ninput = 0.0\noutput = 1000.0\n'


def priced(model: ScriptedModel):
    def reply(request):
        answer = model(request)
        answer.output_tokens = 400  # $0.40 at these prices
        return answer

    return reply


def best_of_n(server: FakeLLMServer, out, *extra: str) -> list[str]:
    return ["run", "--strategy", "best-of-n", "--suite", "smoke", "--tasks", "1", "--llm", "openai:fake-coder",
            "--llm-base-url", server.openai_base_url, "--query-budget", "20", "--parallel", "4",
            "--max-fix-attempts", "0", "--max-tokens", "1000", "--device", "cpu", "--protocol", "quick",
            "--output-dir", str(out), "--run-name", "r", "--evaluator", "scripted", "--no-final-retime", *extra]


def run_priced(tmp_path, args: list[str]):
    prices = tmp_path / "prices.toml"
    tmp_path.mkdir(exist_ok=True)
    prices.write_text(PRICES)
    result = invoke(*args, plugins={"scripted": scripted_evaluator_plugin()},
                    env={**KEY, "PIKEH_PRICES": str(prices), "XDG_CONFIG_HOME": str(tmp_path / "no-config")})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def test_parallel_queries_never_pass_the_money_budget(tmp_path):
    # Before reservations, every query of a round was sent while the recorded spend was below the budget:
    # two rounds of four, $3.20 against $2.90. Now the fourth query of round 0 waits for two answers
    # (3 x $1.00 reserved + $1.00 > $2.90), and the task stops when $2.00 spent + $1.00 would pass it.
    with FakeLLMServer(reply=priced(ScriptedModel(WORKS))) as server:
        result = run_priced(tmp_path / "cfg", best_of_n(server, tmp_path, "--money-budget", "2.9"))
        assert result.exit_code == 0, result.stderr[-3000:]
        sent = server.count()
    events = journal(tmp_path)
    answers = [e for e in events if e["type"] == "llm"]
    assert sent == len(answers) == 5
    spent = sum(e["response"]["cost_usd"] for e in answers)
    assert abs(spent - 2.0) < 1e-9
    end = [e for e in events if e["type"] == "task_end"][0]
    assert end["reason"] == "budget" and end["queries_used"] == 5 and abs(end["spend_usd"] - 2.0) < 1e-9
    assert 2.9 - end["spend_usd"] < 1.0  # what is left unspent is less than one query's worst case


def test_a_worst_case_above_the_budget_sends_nothing_and_the_rule_survives_a_resume(tmp_path):
    with FakeLLMServer(reply=priced(ScriptedModel(WORKS))) as server:
        result = run_priced(tmp_path / "cfg", best_of_n(server, tmp_path, "--money-budget", "0.99"))
        assert result.exit_code == 0, result.stderr[-3000:]
        assert server.count() == 0
        end = [e for e in journal(tmp_path) if e["type"] == "task_end"][0]
        assert end["reason"] == "budget" and end["queries_used"] == 0 and end["spend_usd"] == 0
        again = run_priced(tmp_path / "cfg", best_of_n(server, tmp_path, "--money-budget", "0.99"))
        assert again.exit_code == 0 and server.count() == 0  # the ended task is shown, not rerun


def test_ctrl_c_ends_the_retries_and_journals_no_error(tmp_path):
    # The brainstorm's first try gets a 503 that asks for no wait, but only once the run has said it is
    # stopping (the test sends SIGINT and holds the reply until then). The client used to retry
    # regardless: 5 more tries here (the audit counted 12 requests after a SIGINT).
    holder: dict = {"text": ""}

    def reply(request):
        proc = holder["proc"]
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 120
        while "stopping" not in holder["text"] and time.monotonic() < deadline:
            time.sleep(0.05)
        return FakeReply(status=503, error_message="overloaded", headers={"Retry-After": "0"})

    def read() -> None:
        for line in holder["proc"].stdout:
            holder["text"] += line

    with FakeLLMServer(reply=reply) as server:
        holder["proc"] = subprocess.Popen(pikeh_cmd(server, tmp_path), env=env(), stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True)
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        holder["proc"].wait(timeout=240)
        reader.join(60)
        assert holder["proc"].returncode == 130, holder["text"][-3000:]
        assert "stopping" in holder["text"]
        assert server.count() == 1, "a try was sent after the run began to stop"
    events = journal(tmp_path)
    assert not [e for e in events if e["type"] in ("llm", "llm_error", "attempt")]
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "interrupted"
    with FakeLLMServer(reply=ScriptedModel(WORKS)) as server:
        resumed = in_process(pikeh_cmd(server, tmp_path))
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert prompt_kinds.prompt_kind(server.requests[0].prompt_text) == "brainstorm"  # asked again
    counted = sorted(e["index"] for e in journal(tmp_path) if e["type"] == "llm" and e["counted"])
    assert counted == list(range(1, 12))  # the same 11 counted queries as a run never interrupted

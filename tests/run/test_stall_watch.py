"""A run whose evaluations stop making progress says so, with every thread's stack in log.txt, and
goes on waiting (the real CLI, the real openai SDK against the loopback fake model, a fake evaluator
whose verdict waits until the warning is written)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

from pike_harness.api import EvalRequest, EvalResult
from pike_harness.host.stall_watch import STALL_ENV, StallWatch
from pike_harness.testing import FakeReply, default_verdict, fake_evaluator_plugin, invoke
from pike_harness.testing.llm_server import FakeLLMServer

PROGRAM = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 1\n"


def test_a_stalled_run_warns_once_with_the_stacks_and_still_finishes(tmp_path: Path):
    log = tmp_path / "r" / "log.txt"

    def stuck_until_warned(request: EvalRequest) -> EvalResult:
        if request.candidate_source == PROGRAM:  # the candidate, not the baseline
            deadline = time.monotonic() + 120
            while "stuck_until_warned" not in (log.read_text() if log.exists() else ""):  # its own stack
                assert time.monotonic() < deadline, "no stall warning within 120 s"
                time.sleep(0.05)
        return default_verdict(request)

    with FakeLLMServer() as server:
        server.set_reply(lambda _request: FakeReply.code(PROGRAM))
        result = invoke("run", "--strategy", "best-of-n", "--suite", "smoke", "--tasks", "4", "--llm", "openai:fake",
                        "--llm-base-url", server.openai_base_url, "--query-budget", "1", "--evaluator", "fake",
                        "--no-final-retime", "--output-dir", str(tmp_path), "--run-name", "r",
                        plugins={"fake": fake_evaluator_plugin(stuck_until_warned)},
                        env={"OPENAI_API_KEY": "sk-test", STALL_ENV: "1"})
    assert result.exit_code == 0, result.output[-3000:]
    text = log.read_text()
    assert "stall:" in text and "most recent call first" in text, "the warning and every thread's stack"
    assert "the run may be stuck" in result.output


def test_the_watch_warns_once_per_quiet_spell(tmp_path: Path):
    store = SimpleNamespace(path=tmp_path, last_write=time.monotonic() - 10)
    said: list[str] = []
    watch = StallWatch(store, lambda: 1, said.append, threshold_s=5)  # type: ignore[arg-type]
    assert watch.poll() and not watch.poll(), "once for this spell"
    store.last_write = time.monotonic() - 6  # the journal grew, then went quiet again
    assert watch.poll() and len(said) == 2
    assert not StallWatch(store, lambda: 0, said.append, threshold_s=5).poll(), "nothing open: no warning"
    assert (tmp_path / "log.txt").read_text().count("stall:") == 2
